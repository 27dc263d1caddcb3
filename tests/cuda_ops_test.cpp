// The op and layer suite on CUDA, compared with the CPU reference: elementwise ops, reductions,
// batch norm (training, forward and backward), ReLU backward with a float16 output and a float32
// gradient, matmul (cuBLAS), convolution forward and backward (cuDNN), pooling, softmax
// cross-entropy, and a few training steps of a cifarnet-like network. Each case builds the same
// graph from the same inputs on the CPU and on cuda:0 and compares the values within a tolerance.
// Without a GPU every test is skipped with the reason. Named cuda_ops so that `ctest -R cuda`
// selects it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/backend/cuda.h"
#include "aether/graph/autograd.h"
#include "aether/nn/layers.h"
#include "aether/ops/conv.h"
#include "aether/ops/nn.h"
#include "aether/optim/optimizer.h"
#include "test_values.h"

using namespace aether;

namespace {

// AETHER_CUDA_TEST_DRY_RUN=1 runs the cases with the CPU standing in for the GPU: it checks the
// test's own graphs and tolerances on a machine without one.
bool dry_run() {
  const char* e = std::getenv("AETHER_CUDA_TEST_DRY_RUN");
  return e && *e == '1';
}
Device target() { return dry_run() ? Device::cpu() : Device::cuda(0); }

#define REQUIRE_GPU()                                               \
  do {                                                              \
    if (!dry_run() && cuda_device_count() == 0)                     \
      GTEST_SKIP() << "no CUDA GPU: " << cuda_unavailable_reason(); \
  } while (0)

using testing_values::input;
using testing_values::values;

using Graph = std::function<std::vector<Tensor>(std::vector<Tensor>& inputs)>;

// Runs `g` on the CPU inputs and on their copies on cuda:0 (leaves there too, requires_grad kept),
// and compares every output: |gpu - cpu| <= atol + rtol * |cpu|, shapes and dtypes equal.
void expect_matches_cpu(const std::vector<Tensor>& inputs, const Graph& g, double rtol = 1e-5,
                        double atol = 1e-5) {
  const Device gpu = target();
  std::vector<Tensor> cin, gin;
  for (const Tensor& x : inputs) {
    cin.push_back(x.detach());
    gin.push_back(x.to(gpu));
    if (x.requires_grad()) {
      cin.back().set_requires_grad();
      gin.back().set_requires_grad();
    }
  }
  const std::vector<Tensor> want = g(cin);
  const std::vector<Tensor> got = g(gin);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i) + ": " + want[i].str());
    EXPECT_EQ(got[i].device(), gpu);
    EXPECT_EQ(got[i].shape(), want[i].shape());
    EXPECT_EQ(got[i].dtype(), want[i].dtype());
    const auto w = want[i].to_vector<double>(), v = got[i].to_vector<double>();
    ASSERT_EQ(w.size(), v.size());
    int bad = 0;
    for (size_t j = 0; j < w.size() && bad < 5; ++j) {
      const bool ok =
          (std::isnan(w[j]) && std::isnan(v[j])) || std::fabs(v[j] - w[j]) <= atol + rtol * std::fabs(w[j]);
      if (!ok) {
        ++bad;
        ADD_FAILURE() << "element " << j << ": cuda " << v[j] << ", cpu " << w[j];
      }
    }
  }
}

Tensor leaf(const Shape& s, uint32_t seed, float lo = -2, float hi = 2) {
  return input(s, seed, lo, hi).set_requires_grad();
}

}  // namespace

TEST(cuda_ops, Elementwise) {
  REQUIRE_GPU();
  const int64_t before = cuda_host_fallbacks();
  expect_matches_cpu({input({64, 48}, 1), input({64, 48}, 2), input({1, 48}, 3)},
                     [](std::vector<Tensor>& in) {
                       const Tensor &x = in[0], &y = in[1], &b = in[2];
                       return std::vector<Tensor>{((x + y) * 0.5).exp() - y / (x.abs() + 1.0),
                                                  (x * b).sin() + (y.abs() + 0.1).log() + (x.abs()).sqrt(),
                                                  x.maximum(y),
                                                  where(x < y, x, b),
                                                  (x > 0.5).cast(DType::int32),
                                                  x.cast(DType::float64) * 3.0,
                                                  x.transpose(0, 1).relu(),
                                                  x.clamp(-1, 1)};
                     });
  EXPECT_EQ(cuda_host_fallbacks(), before) << "float32 elementwise ops ran on the host";
}

TEST(cuda_ops, Reductions) {
  REQUIRE_GPU();
  expect_matches_cpu(
      {input({32, 17, 40}, 4)},
      [](std::vector<Tensor>& in) {
        const Tensor& x = in[0];
        return std::vector<Tensor>{x.sum(),
                                   x.sum({0, 2}),
                                   x.max({1}, true),
                                   x.mean({2}),
                                   x.var({0}, false, 1),
                                   x.argmax(2),
                                   (x - x.mean({2}, true)).exp().sum({2}),
                                   x.min({0, 1})};
      },
      1e-5, 1e-4);
  // A long reduction split over several blocks (the combine pass).
  expect_matches_cpu(
      {input({1 << 20}, 5)},
      [](std::vector<Tensor>& in) {
        return std::vector<Tensor>{in[0].sum(), in[0].max(), (in[0] * in[0]).mean()};
      },
      1e-5, 1e-3);
}

TEST(cuda_ops, BatchNormTrainingForwardBackward) {
  REQUIRE_GPU();
  const int64_t before = cuda_host_fallbacks();
  expect_matches_cpu(
      {leaf({8, 6, 6, 16}, 6), leaf({16}, 7, 0.5, 1.5), leaf({16}, 8), input({16}, 9, -0.1f, 0.1f),
       input({16}, 10, 0.9f, 1.1f), input({8, 6, 6, 16}, 11)},
      [](std::vector<Tensor>& in) {
        const auto r = batch_norm(in[0], in[1], in[2], in[3], in[4], /*training=*/true);
        const Tensor y = r.out.relu();
        const auto g = gradients((y * in[5]).sum(), {in[0], in[1], in[2]});
        return std::vector<Tensor>{r.out, r.new_running_mean, r.new_running_var, g[0], g[1], g[2]};
      },
      1e-4, 1e-4);
  EXPECT_EQ(cuda_host_fallbacks(), before) << "the float32 batch norm path ran on the host";
}

TEST(cuda_ops, ReluBackwardFloat16OutputFloat32Gradient) {
  REQUIRE_GPU();
  // One select: out > 0 ? dy : 0, with the output float16 and the gradient float32 (kept float32).
  expect_matches_cpu(
      {input({4, 33}, 12).cast(DType::float16), input({4, 33}, 13)},
      [](std::vector<Tensor>& in) {
        const Tensor out = in[0].relu();  // float16
        const Tensor dx = where(out > 0.0, in[1], 0.0);
        EXPECT_EQ(dx.dtype(), DType::float32);
        return std::vector<Tensor>{out, dx};
      },
      0, 0);
}

TEST(cuda_ops, Matmul) {
  REQUIRE_GPU();
  expect_matches_cpu(
      {leaf({3, 17, 31}, 14), leaf({31, 9}, 15), input({3, 17, 9}, 16)},
      [](std::vector<Tensor>& in) {
        const Tensor c = matmul(in[0], in[1]);  // batch broadcast of b
        const auto g = gradients((c * in[2]).sum(), {in[0], in[1]});
        return std::vector<Tensor>{c, matmul(in[0].transpose(1, 2), in[0]), g[0], g[1]};
      },
      1e-4, 1e-4);
}

TEST(cuda_ops, ConvolutionForwardBackward) {
  REQUIRE_GPU();
  expect_matches_cpu(
      {leaf({2, 9, 9, 4}, 17), leaf({6, 3, 3, 4}, 18, -0.5, 0.5), leaf({6}, 19), input({2, 5, 5, 6}, 20)},
      [](std::vector<Tensor>& in) {
        const Tensor y = conv2d(in[0], in[1], in[2], {.stride = 2, .padding = 1});  // (2,5,5,6)
        const auto g = gradients((y * in[3]).sum(), {in[0], in[1], in[2]});
        const Tensor same = conv2d(in[0], in[1], Tensor(), {.padding = "same"});
        return std::vector<Tensor>{y, g[0], g[1], g[2], same};
      },
      1e-4, 1e-4);
}

TEST(cuda_ops, Pooling) {
  REQUIRE_GPU();
  expect_matches_cpu(
      {leaf({2, 8, 8, 3}, 21), input({2, 4, 4, 3}, 22), input({2, 3, 3, 3}, 23)},
      [](std::vector<Tensor>& in) {
        const Tensor m = max_pool2d(in[0], 2);        // (2,4,4,3)
        const Tensor a = avg_pool2d(in[0], 3, 2, 1);  // (2,4,4,3)
        const Tensor a2 = avg_pool2d(in[0], 3, 3);    // (2,2,2,3)
        const auto gm = gradients((m * in[1]).sum(), {in[0]});
        const auto ga = gradients((a * in[1]).sum(), {in[0]});
        return std::vector<Tensor>{m, a, a2, gm[0], ga[0], global_max_pool2d(in[0])};
      },
      1e-5, 1e-5);
}

TEST(cuda_ops, SoftmaxCrossEntropy) {
  REQUIRE_GPU();
  const std::vector<int64_t> labels{3, 0, 9, 4, 4, 1, 7, 2};
  expect_matches_cpu(
      {leaf({8, 10}, 24, -4, 4), Tensor::from_vector(labels)},
      [](std::vector<Tensor>& in) {
        const Tensor loss = cross_entropy(in[0], in[1], 0.1);
        const auto g = gradients(loss, {in[0]});
        return std::vector<Tensor>{softmax(in[0]), loss, g[0], accuracy(in[0], in[1])};
      },
      1e-5, 1e-6);
}

TEST(cuda_ops, BinaryCrossEntropyWithLogits) {
  REQUIRE_GPU();
  expect_matches_cpu(
      {leaf({8, 3}, 25, -30, 30), input({8, 3}, 26, 0, 1), input({8, 1}, 27, 0, 2)},
      [](std::vector<Tensor>& in) {
        const Tensor loss = binary_cross_entropy_with_logits(in[0], in[1], 0.1, in[2]);
        const auto g = gradients(loss, {in[0]});
        return std::vector<Tensor>{in[0].sigmoid(), loss, g[0], binary_accuracy(in[0], in[1])};
      },
      1e-5, 1e-6);
}

// A few SGD (momentum) steps of a small cifarnet-like net, the same weights and batches on both
// devices: the losses and the final weights agree.
TEST(cuda_ops, CifarnetLikeTrainingStepsMatchCpu) {
  REQUIRE_GPU();
  const Device gpu = target();
  auto make_net = [] {
    manual_seed(42);
    auto net = std::make_shared<nn::Sequential>();
    net->add(std::make_shared<nn::Conv2d>(3, 8, 3, Conv2dOptions{.padding = 1}, /*bias=*/false));
    net->add(std::make_shared<nn::BatchNorm2d>(8));
    net->add(std::make_shared<nn::ReLU>());
    net->add(std::make_shared<nn::MaxPool2d>(2));
    net->add(std::make_shared<nn::Conv2d>(8, 16, 3, Conv2dOptions{.padding = 1}, /*bias=*/false));
    net->add(std::make_shared<nn::BatchNorm2d>(16));
    net->add(std::make_shared<nn::ReLU>());
    net->add(std::make_shared<nn::GlobalMaxPool2d>());
    net->add(std::make_shared<nn::Linear>(16, 10));
    return net;
  };
  auto cpu_net = make_net(), gpu_net = make_net();
  gpu_net->to(gpu);
  optim::SGD cpu_opt(cpu_net->parameters(), {0.05, 0.9});
  optim::SGD gpu_opt(gpu_net->parameters(), {0.05, 0.9});
  const int64_t before = cuda_host_fallbacks();
  for (int step = 0; step < 3; ++step) {
    const Tensor x = input({16, 12, 12, 3}, uint32_t(100 + step));
    std::vector<int64_t> ys;
    for (int i = 0; i < 16; ++i) ys.push_back((i * 7 + step) % 10);
    const Tensor y = Tensor::from_vector(ys);
    double losses[2];
    for (int d = 0; d < 2; ++d) {
      auto& net = d ? gpu_net : cpu_net;
      auto& opt = d ? gpu_opt : cpu_opt;
      const Device dev = d ? gpu : Device::cpu();
      const Tensor loss = cross_entropy(net->forward(x.to(dev)), y.to(dev));
      loss.backward();
      std::vector<Tensor> extra{loss};
      for (auto& [name, t] : net->named_buffers()) extra.push_back(*t);
      opt.step(extra);
      opt.zero_grad();
      losses[d] = loss.item<double>();
    }
    EXPECT_NEAR(losses[1], losses[0], 1e-4 * std::fabs(losses[0]) + 1e-5) << "step " << step;
  }
  EXPECT_EQ(cuda_host_fallbacks(), before) << "the float32 training step ran kernels on the host";
  const auto cp = cpu_net->parameters(), gp = gpu_net->parameters();
  ASSERT_EQ(cp.size(), gp.size());
  for (size_t i = 0; i < cp.size(); ++i) {
    EXPECT_EQ(gp[i].device(), gpu);
    const auto a = cp[i].to_vector<double>(), b = gp[i].to_vector<double>();
    for (size_t j = 0; j < a.size(); ++j)
      ASSERT_NEAR(b[j], a[j], 1e-3 * std::fabs(a[j]) + 1e-4) << "param " << i;
  }
  for (auto& [name, slot] : gpu_opt.named_state()) EXPECT_EQ(slot->device(), gpu) << name;
}

// A captured step replays and computes what the uncaptured one does.
TEST(cuda_ops, GraphStepReplaysAStep) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU: " << cuda_unavailable_reason();
  const Device gpu = target();
  Tensor w = input({64, 64}, 30).to(gpu);
  const Tensor x = input({64, 64}, 31).to(gpu);
  Tensor ref = input({64, 64}, 30);
  const Tensor xc = input({64, 64}, 31);
  cuda::GraphStep g(0);
  for (int i = 0; i < 4; ++i) {
    g.run([&] {
      w.assign(w - matmul(x, w).tanh() * 0.01);
      w.realize();
    });
    ref.assign(ref - matmul(xc, ref).tanh() * 0.01);
    ref.realize();
  }
  EXPECT_TRUE(g.fallback_reason().empty()) << g.fallback_reason();
  EXPECT_EQ(g.replays(), 3);
  const auto a = ref.to_vector<double>(), b = w.to_vector<double>();
  for (size_t j = 0; j < a.size(); ++j) ASSERT_NEAR(b[j], a[j], 1e-4) << j;
}
