// dist::create_nccl (aether/dist/nccl.h): without a GPU or NCCL the error says what is missing;
// with one, a world of one runs every collective on device buffers (one GPU cannot hold two NCCL
// ranks; several ranks need several GPUs). Named cuda_nccl so that `ctest -R cuda` (and
// scripts/gpu-check.sh) selects it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/core/error.h"
#include "aether/dist/nccl.h"
#include "error_util.h"

#if AETHER_HAS_CUDA
#include <cuda_runtime.h>
#endif

using namespace aether;
using namespace aether::dist;

TEST(cuda_nccl, InvalidOptionsAreNamedBeforeAnythingElse) {
  Options o;
  o.world_size = 2;
  o.rank = 2;
  const std::string e = error_of([&] { create_nccl(o); });
  EXPECT_TRUE(contains(e, "dist::create_nccl")) << e;
  EXPECT_TRUE(contains(e, "rank 2 is not in [0, 2)")) << e;
}

TEST(cuda_nccl, WithoutAGpuOrNcclCreateSaysWhatIsMissing) {
  std::string why;
  if (nccl_available(&why)) GTEST_SKIP() << "a GPU and NCCL are present: this checks the behaviour without";
  EXPECT_FALSE(why.empty());
  Options o;  // a world of one: no store, nothing to wait for
  const std::string e = error_of([&] { create_nccl(o); });
  EXPECT_TRUE(contains(e, "dist::create_nccl")) << e;
  EXPECT_TRUE(contains(e, why)) << e << "\nvs " << why;
}

#if AETHER_HAS_CUDA
namespace {

// n elements of T on the GPU, filled from (and read back into) host vectors.
template <typename T>
struct DeviceArray {
  explicit DeviceArray(const std::vector<T>& host) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceArray() { cudaFree(p); }
  std::vector<T> read() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  void* p = nullptr;
  size_t n;
};

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(int(i % 97) - 40) * 0.25f;
  return v;
}

}  // namespace

// A world of one: each collective leaves the values as they are (sum, average and max of one rank;
// broadcast from itself; gather and scatter of one row), in float32, float16 and bfloat16, and a
// split works as its parent does.
TEST(cuda_nccl, AWorldOfOneRunsEveryCollectiveOnDeviceBuffers) {
  std::string why;
  if (!nccl_available(&why)) GTEST_SKIP() << why;
  Options o;
  auto c = create_nccl(o);
  ASSERT_STREQ(c->backend(), "nccl");
  const std::vector<float> x = ramp(1001);  // an odd size
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::average, ReduceOp::max}) {
    DeviceArray<float> d(x);
    c->all_reduce(d.p, d.n, DType::float32, op);
    EXPECT_EQ(d.read(), x) << reduce_op_name(op);
  }
  // 1.5 in float16 and in bfloat16
  for (auto [dtype, bits] :
       {std::pair{DType::float16, uint16_t(0x3e00)}, std::pair{DType::bfloat16, uint16_t(0x3fc0)}}) {
    DeviceArray<uint16_t> d(std::vector<uint16_t>(333, bits));
    c->all_reduce(d.p, d.n, dtype, ReduceOp::average);
    EXPECT_EQ(d.read(), std::vector<uint16_t>(333, bits)) << dtype_name(dtype);
  }
  DeviceArray<float> a(x), b(ramp(17));
  const std::vector<dist::Buffer> two = {{a.p, a.n}, {b.p, b.n}};
  c->all_reduce(std::span<const dist::Buffer>(two), DType::float32, ReduceOp::sum);
  EXPECT_EQ(a.read(), x);
  EXPECT_EQ(b.read(), ramp(17));
  DeviceArray<float> out(std::vector<float>(x.size(), 0.0f));
  c->all_gather(a.p, out.p, x.size(), DType::float32);
  EXPECT_EQ(out.read(), x);
  DeviceArray<float> row(std::vector<float>(x.size(), 0.0f));
  c->reduce_scatter(a.p, row.p, x.size(), DType::float32, ReduceOp::sum);
  EXPECT_EQ(row.read(), x);
  c->broadcast(a.p, x.size(), DType::float32, 0);
  EXPECT_EQ(a.read(), x);
  c->barrier();
  auto s = c->split("nccl_test");
  DeviceArray<float> e(x);
  s->all_reduce(e.p, e.n, DType::float32, ReduceOp::sum);
  EXPECT_EQ(e.read(), x);
}

namespace {

// 64 images (6, 6, 3) with labels 0..3.
data::Dataset small_images() {
  data::Dataset d;
  d.name = "synthetic";
  d.n = 64;
  d.h = d.w = 6;
  d.c = 3;
  d.num_classes = 4;
  for (int64_t i = 0; i < d.n; ++i) {
    d.labels.push_back(i % 4);
    for (int64_t k = 0; k < 6 * 6 * 3; ++k) d.images.push_back(uint8_t((i * 53 + k * (i % 4 + 5) * 7) % 256));
  }
  return d;
}

// A small conv net trained on the GPU for 2 epochs of 4 steps, through `comm` (nullptr: none); its
// parameters and buffers, one after another.
std::vector<float> train_on_gpu(Communicator* comm) {
  manual_seed(5);
  Model m;
  m.add(std::make_shared<nn::Conv2d>(3, 8, 3, Conv2dOptions{.padding = "same"}))
      .add(std::make_shared<nn::BatchNorm2d>(8))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Linear>(6 * 6 * 8, 4));
  ModelConfig c;
  c.optimizer = "sgd";
  c.lr = 0.05;
  c.momentum = 0.9;
  m.configure(c).finalize({6, 6, 3});
  m.to("cuda");
  TrainOptions o;
  o.epochs = 2;
  o.progress = false;
  o.data.batch_size = 16;
  o.data.seed = 3;
  o.communicator = comm;
  m.train(small_images(), o);
  std::vector<float> all;
  auto tensors = m.network().named_parameters();
  for (auto& b : m.network().named_buffers()) tensors.push_back(b);
  for (auto& [name, t] : tensors) {
    const auto v = t->to_vector<float>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

}  // namespace

// Model::train on the GPU through an NCCL world of one (each gradient bucket packed on the device
// by a kernel, all-reduced by NCCL in place, every gradient a slice of it; the checks and the
// broadcast through device copies) follows training without a communicator.
TEST(cuda_nccl, TrainingOnAWorldOfOneFollowsTrainingWithout) {
  std::string why;
  if (!nccl_available(&why)) GTEST_SKIP() << why;
  const std::vector<float> plain = train_on_gpu(nullptr);
  Options o;
  auto c = create_nccl(o);
  const std::vector<float> nccl = train_on_gpu(c.get());
  ASSERT_EQ(nccl.size(), plain.size());
  double err = 0, scale = 1;
  for (size_t i = 0; i < plain.size(); ++i) {
    err = std::max(err, double(std::abs(nccl[i] - plain[i])));
    scale = std::max(scale, double(std::abs(plain[i])));
  }
  EXPECT_LT(err / scale, 1e-5);
}
#endif
