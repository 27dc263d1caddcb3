// Uses the installed headers and library: a tiny computation with a gradient.
#include <aether/aether.h>

#include <cstdio>

int main() {
  using namespace aether;
  Tensor x = Tensor::from_vector<float>({1, -2, 3}).set_requires_grad();
  Tensor y = (x * x).relu().sum();
  y.backward();
  const auto g = x.grad().to_vector<float>();
  const bool ok = y.item<float>() == 14.0f && g[0] == 2.0f && g[1] == -4.0f && g[2] == 6.0f;
  std::printf("consumer: y=%g grad=(%g, %g, %g) %s\n", y.item<float>(), g[0], g[1], g[2], ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
