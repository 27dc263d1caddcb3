#include <gtest/gtest.h>

#include "aether/aether.h"

using namespace aether;

TEST(Smoke, AddBroadcast) {
  auto a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto b = Tensor::from_vector<float>({10, 20, 30}, {3});
  auto c = a + b;
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
}

TEST(Smoke, Grad) {
  auto x = Tensor::from_vector<double>({1, -2, 3}, {3}).set_requires_grad();
  auto y = (x * x).sum();
  y.backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, -4, 6}));
}
