// The CUDA device runtime: Device::cuda() and its errors, device parsing, the caching allocator,
// copies between host and device (Tensor::to), mixing devices, events for timing.
// Without a GPU (or in a build without CUDA) the error-text tests run and the rest are skipped with
// the reason. Named cuda_runtime so that `ctest -R cuda` selects it.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>
#if AETHER_HAS_CUDA
#include <cuda_runtime.h>
#endif

#include "aether/aether.h"
#include "aether/backend/cuda.h"
#include "aether/core/buffer.h"
#include "aether/nn/layers.h"
#include "error_util.h"

using namespace aether;

namespace {

#define REQUIRE_GPU()                                                                           \
  do {                                                                                          \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA GPU: " << cuda_unavailable_reason(); \
  } while (0)

std::vector<float> ramp(int64_t n, float scale = 0.5f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i % 97) * scale - 7.0f;
  return v;
}

}  // namespace

// ---- without a GPU --------------------------------------------------------------------------------------
TEST(cuda_runtime, UnavailableReasonIsConsistent) {
  const int n = cuda_device_count();
  EXPECT_GE(n, 0);
  EXPECT_EQ(int(cuda_devices().size()), n);
  if (n == 0) {
    const std::string why = cuda_unavailable_reason();
    EXPECT_FALSE(why.empty());
    if (!cuda_built())
      EXPECT_TRUE(contains(why, "built without CUDA")) << why;
    else
      EXPECT_TRUE(contains(why, "no CUDA")) << why;  // no CUDA driver / no CUDA GPU / ...
  } else {
    EXPECT_EQ(cuda_unavailable_reason(), "");
  }
}

TEST(cuda_runtime, DeviceCudaErrorSaysWhy) {
  const int n = cuda_device_count();
  if (n == 0) {
    const std::string e = error_of([] { (void)Device::cuda(0); });
    ASSERT_FALSE(e.empty()) << "Device::cuda(0) did not throw without a GPU";
    EXPECT_TRUE(contains(e, "Device::cuda(0)")) << e;
    EXPECT_TRUE(contains(e, cuda_unavailable_reason())) << e;
    EXPECT_TRUE(contains(e, "cpu")) << e;  // what is available instead
    EXPECT_TRUE(contains(error_of([] { (void)Device::parse("cuda"); }), cuda_unavailable_reason()));
    EXPECT_TRUE(contains(error_of([] { (void)Device::parse("cuda:1"); }), "Device::cuda(1)"));
  }
  // An index out of range names the count.
  const std::string e = error_of([n] { (void)Device::cuda(n + 3); });
  ASSERT_FALSE(e.empty());
  if (n > 0) {
    EXPECT_TRUE(contains(e, "no such GPU")) << e;
    EXPECT_TRUE(contains(e, std::to_string(n) + " CUDA device")) << e;
  }
  EXPECT_FALSE(error_of([] { (void)Device::cuda(-1); }).empty());
}

TEST(cuda_runtime, DeviceParse) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_EQ((Device{DeviceType::cuda, 2}).str(), "cuda:2");
  EXPECT_TRUE(contains(error_of([] { (void)Device::parse("gpu"); }), "unknown device 'gpu'"));
  EXPECT_TRUE(contains(error_of([] { (void)Device::parse("cuda:x"); }), "bad device index"));
  EXPECT_TRUE(contains(error_of([] { (void)Device::parse("cuda:"); }), "bad device index"));
  // Was std::out_of_range from std::stoi ("stoi", an IndexError in Python).
  EXPECT_TRUE(contains(error_of([] { (void)Device::parse("cuda:99999999999999"); }), "bad device index"));
  if (cuda_device_count() > 0) {
    EXPECT_EQ(Device::parse("cuda"), (Device{DeviceType::cuda, 0}));
    EXPECT_EQ(Device::parse("cuda:0"), (Device{DeviceType::cuda, 0}));
  }
}

TEST(cuda_runtime, NoGpuMeansCleanErrorsNotCrashes) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: this checks the behaviour without one";
  const Device gpu{DeviceType::cuda, 0};  // built by hand: Device::cuda() would throw first
  const std::string why = cuda_built() ? cuda_unavailable_reason() : "built without CUDA";
  const std::string b = error_of([&] { Buffer buf(gpu, DType::float32, 16); });
  EXPECT_TRUE(contains(b, why)) << b;
  const Tensor x = Tensor::from_vector<float>({1, 2, 3});
  const std::string t = error_of([&] { (void)x.to(gpu); });
  EXPECT_TRUE(contains(t, why)) << t;
  EXPECT_TRUE(x.to(Device::cpu()).same(x));  // same device: the same tensor
  EXPECT_FALSE(cuda_memory_report().empty());
  EXPECT_EQ(cuda_host_fallbacks(), 0);
}

// ---- with a GPU -------------------------------------------------------------------------------------------
TEST(cuda_runtime, DevicesHaveProperties) {
  REQUIRE_GPU();
  for (const auto& d : cuda_devices()) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.total_bytes, int64_t(1) << 30);
    EXPECT_GE(d.major, 5);
    EXPECT_GT(d.multiprocessors, 0);
    const std::string arch = cuda_arch(d.index);
    EXPECT_EQ(arch.rfind("compute_", 0), 0u) << arch;
    EXPECT_LE(std::stoi(arch.substr(8)), d.major * 10 + d.minor) << arch;
  }
  EXPECT_EQ(Device::cuda(0), (Device{DeviceType::cuda, 0}));
}

TEST(cuda_runtime, AllocatorReusesFreedBlocksAndTracksPeak) {
  REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  cuda_synchronize(0);
  const CudaMemoryStats s0 = cuda_memory_stats(0);
  { Buffer a(gpu, DType::float32, 3 << 20); }  // 12 MiB, freed: cached
  const CudaMemoryStats s1 = cuda_memory_stats(0);
  EXPECT_EQ(s1.live_bytes, s0.live_bytes);
  EXPECT_GE(s1.cached_bytes, s0.cached_bytes + (int64_t(12) << 20));
  cuda_reset_peak_memory(0);
  {
    Buffer b(gpu, DType::float32, 3 << 20);  // the same size class: served from the cache
    const CudaMemoryStats s2 = cuda_memory_stats(0);
    EXPECT_EQ(s2.device_mallocs, s1.device_mallocs);
    EXPECT_EQ(s2.cache_hits, s1.cache_hits + 1);
    EXPECT_GE(s2.live_bytes, s1.live_bytes + (int64_t(12) << 20));
    Buffer c(gpu, DType::float32, 1 << 20);  // 4 MiB more
    EXPECT_GE(cuda_memory_stats(0).peak_bytes, s1.live_bytes + (int64_t(16) << 20));
  }
  const CudaMemoryStats s3 = cuda_memory_stats(0);
  EXPECT_EQ(s3.live_bytes, s1.live_bytes);
  EXPECT_GE(s3.peak_bytes, s1.live_bytes + (int64_t(16) << 20));  // the peak stays
  EXPECT_TRUE(contains(cuda_memory_report(), "cuda:0")) << cuda_memory_report();
  { Buffer z(gpu, DType::float32, 1000); }  // a small block: its own size class
  cuda_empty_cache(0);
  EXPECT_EQ(cuda_memory_stats(0).cached_bytes, 0);
}

TEST(cuda_runtime, ZeroFilledBuffers) {
  REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  // Dirty a block, free it, and get it back zero-filled (the same size class: the same block).
  { const Tensor junk = Tensor::from_vector<float>(std::vector<float>(5000, 3.5f)).to(gpu).realize(); }
  auto buf = std::make_shared<Buffer>(gpu, DType::float32, 5000);  // zero_fill defaults to true
  for (float v : Tensor(make_load(buf, View::contiguous({5000}))).to_vector<float>()) ASSERT_EQ(v, 0.0f);
  const Tensor z = Tensor::zeros({5000}, DType::float32, gpu);
  for (float v : z.to_vector<float>()) ASSERT_EQ(v, 0.0f);
}

TEST(cuda_runtime, HostDeviceRoundTrip) {
  REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const std::vector<float> v = ramp(100003);
  const Tensor x = Tensor::from_vector(v, {100003});
  const Tensor d = x.to(gpu);
  EXPECT_EQ(d.device(), gpu);
  EXPECT_EQ(d.shape(), x.shape());
  EXPECT_EQ(d.to_vector<float>(), v);  // D2H inside to_vector
  const Tensor back = d.to(Device::cpu());
  EXPECT_EQ(back.device(), Device::cpu());
  EXPECT_EQ(back.to_vector<float>(), v);
  // Other dtypes, and a non-contiguous source (transpose) made dense before the copy.
  const std::vector<int64_t> iv{5, -3, 1LL << 40, 7, 0, 9};
  EXPECT_EQ(Tensor::from_vector(iv, {2, 3}).to(gpu).to_vector<int64_t>(), iv);
  const Tensor m = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(m.t().to(gpu).to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(m.to(gpu).t().to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));  // a view on the GPU
  EXPECT_EQ(m.to(gpu).slice(1, 1, 3).to(Device::cpu()).to_vector<float>(), (std::vector<float>{2, 3, 5, 6}));
  // Device to device (the same GPU) copies too.
  EXPECT_EQ(d.to(gpu).to_vector<float>(), v);
  EXPECT_DOUBLE_EQ(Tensor::scalar(2.5).to(gpu).item<double>(), 2.5);
  // Empty tensors move as well.
  EXPECT_EQ(Tensor::zeros({0, 3}).to(gpu).to(Device::cpu()).numel(), 0);
}

TEST(cuda_runtime, ComputesOnTheDevice) {
  REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const Tensor a = Tensor::from_vector<float>({1, -2, 3, -4}, {2, 2}).to(gpu);
  const Tensor b = Tensor::from_vector<float>({10, 20, 30, 40}, {2, 2}).to(gpu);
  const Tensor c = a * b + 1.0;
  EXPECT_EQ(c.device(), gpu);
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{11, -39, 91, -159}));
  EXPECT_FLOAT_EQ(c.sum().item<float>(), 11 - 39 + 91 - 159);
  EXPECT_EQ(cuda_host_fallbacks(), 0);
}

TEST(cuda_runtime, MixingDevicesIsAClearError) {
  REQUIRE_GPU();
  const Tensor cpu = Tensor::from_vector<float>({1, 2, 3});
  const Tensor gpu = cpu.to(Device::cuda(0));
  const std::string e = error_of([&] { (void)(cpu + gpu).realize(); });
  ASSERT_FALSE(e.empty()) << "adding a CPU and a CUDA tensor did not throw";
  EXPECT_TRUE(contains(e, "cpu") && contains(e, "cuda:0")) << e;
  const std::string m = error_of([&] { (void)matmul(cpu.reshape({1, 3}), gpu.reshape({3, 1})).realize(); });
  EXPECT_TRUE(contains(m, "cpu") && contains(m, "cuda:0")) << m;
}

TEST(cuda_runtime, EventTimer) {
  REQUIRE_GPU();
  cuda::Timer t(0);
  t.start();
  const Tensor x = Tensor::ones({1 << 20}, DType::float32, Device::cuda(0));
  (void)(x * 2.0).sum().realize();
  t.stop();
  const double ms = t.elapsed_ms();
  EXPECT_GE(ms, 0.0);
  EXPECT_LT(ms, 10000.0);
}

TEST(cuda_runtime, AFenceWaitsOnAnyThreadForTheWorkQueuedBeforeIt) {
  REQUIRE_GPU();
#if AETHER_HAS_CUDA
  // (4096, 4096) @ (4096, 4096) of ones: every element 4096, a few milliseconds of queued work.
  const Device gpu = Device::cuda(0);
  const Tensor a = Tensor::ones({4096, 4096}, DType::float32, gpu);
  const Tensor y = matmul(a, a).realize();
  cuda::Fence fence(0);
  float last = -1;
  std::thread other([&] {
    fence.wait();
    // A copy on the legacy stream, which does not wait for aether's: right only after the fence.
    const NodePtr& n = y.node();
    const float* p = static_cast<const float*>(n->buffer->data()) + n->view.offset + 4096 * 4096 - 1;
    last = cudaMemcpy(&last, p, sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess ? last : -2;
  });
  other.join();
  EXPECT_EQ(last, 4096.0f);
#endif
}

TEST(cuda_runtime, ModuleToMovesParametersAndKeepsThemTrainable) {
  REQUIRE_GPU();
  manual_seed(3);
  nn::Linear lin(4, 3);
  const auto before = lin.weight.to_vector<float>();
  lin.to(Device::cuda(0));
  EXPECT_EQ(lin.weight.device(), Device::cuda(0));
  EXPECT_TRUE(lin.weight.requires_grad());
  EXPECT_EQ(lin.weight.to_vector<float>(), before);
  const Tensor x = Tensor::ones({2, 4}).to(Device::cuda(0));
  lin.forward(x).sum().backward();
  ASSERT_TRUE(lin.weight.grad().defined());
  EXPECT_EQ(lin.weight.grad().device(), Device::cuda(0));
  lin.to(Device::cpu());
  EXPECT_EQ(lin.weight.device(), Device::cpu());
  EXPECT_EQ(lin.weight.to_vector<float>(), before);
}

// ---- NVRTC and the PTX disk cache (no GPU needed)
// -----------------------------------------------------------
#if AETHER_HAS_CUDA
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backend/cuda/ptx_cache.h"
#include "core/config.h"

TEST(cuda_runtime, PtxIsCompiledOnceThenLoadedFromTheDiskCache) {
  // The cache directory is chosen on first use; this test is the first user in this process.
  const std::string dir = ::testing::TempDir() + "aether-ptx-" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  config().cache_dir.set(dir);  // as AETHER_CACHE_DIR=dir (the environment is read once, at start-up)
  const std::string src =
      "extern \"C\" __global__ void aether_kernel(float* p, double fp0, void* scratch) {\n"
      "  p[threadIdx.x] = float(fp0) * 2.0f;\n}\n";
  bool from_disk = true;
  const std::string ptx = cuda::ptx_for(src, "compute_90", &from_disk);
  EXPECT_FALSE(from_disk);
  EXPECT_NE(ptx.find(".entry aether_kernel"), std::string::npos) << ptx.substr(0, 400);
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos) << ptx.substr(0, 400);
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0) << dir;
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  int ptx_files = 0, key_files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    ptx_files += e.path().extension() == ".ptx";
    key_files += e.path().extension() == ".ptxkey";
  }
  EXPECT_EQ(ptx_files, 1);
  EXPECT_EQ(key_files, 1);
  const std::string again = cuda::ptx_for(src, "compute_90", &from_disk);
  EXPECT_TRUE(from_disk);
  EXPECT_EQ(again, ptx);
  // Another architecture is another entry.
  (void)cuda::ptx_for(src, "compute_80", &from_disk);
  EXPECT_FALSE(from_disk);
  // A tampered key is not trusted: the PTX is compiled again.
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".ptxkey") std::ofstream(e.path()) << "something else";
  (void)cuda::ptx_for(src, "compute_90", &from_disk);
  EXPECT_FALSE(from_disk);
  // A compile error names NVRTC's complaint.
  const std::string e = error_of([] {
    bool d = false;
    (void)cuda::ptx_for("extern \"C\" __global__ void k() { undeclared_thing = 1; }", "compute_90", &d);
  });
  EXPECT_TRUE(contains(e, "NVRTC")) << e;
  EXPECT_TRUE(contains(e, "undeclared_thing")) << e;
  std::filesystem::remove_all(dir);
}
#endif
