// dist::create_nccl (aether/dist/nccl.h): without a GPU or NCCL the error says what is missing;
// with one, a world of one runs every collective on device buffers (one GPU cannot hold two NCCL
// ranks; several ranks need several GPUs). Named cuda_nccl so that `ctest -R cuda` (and
// scripts/gpu-check.sh) selects it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "aether/core/error.h"
#include "aether/dist/nccl.h"
#include "error_util.h"

#if AETHER_HAS_CUDA
#include <cuda_runtime.h>
#endif

using namespace aether;
using namespace aether::dist;

TEST(Nccl, InvalidOptionsAreNamedBeforeAnythingElse) {
  Options o;
  o.world_size = 2;
  o.rank = 2;
  const std::string e = error_of([&] { create_nccl(o); });
  EXPECT_TRUE(contains(e, "dist::create_nccl")) << e;
  EXPECT_TRUE(contains(e, "rank 2 is not in [0, 2)")) << e;
}

TEST(Nccl, WithoutAGpuOrNcclCreateSaysWhatIsMissing) {
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
TEST(Nccl, AWorldOfOneRunsEveryCollectiveOnDeviceBuffers) {
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
  const std::vector<Buffer> two = {{a.p, a.n}, {b.p, b.n}};
  c->all_reduce(std::span<const Buffer>(two), DType::float32, ReduceOp::sum);
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
#endif
