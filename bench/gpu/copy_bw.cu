// Device copy bandwidth, the ceiling for aether's memory-bound GPU kernels (scripts/gpu-check.sh):
// a device-to-device cudaMemcpy and a 16-byte-per-thread grid-stride copy kernel over two 2 GiB
// buffers, each timed with CUDA events (median of 20 after 3 warm-ups). GB/s counts the bytes read
// plus the bytes written. Prints one JSON object. Build: nvcc -O3 -arch=sm_90 copy_bw.cu -o copy_bw
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));                \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

// dst[i] = src[i], float4 (16 bytes) per thread per step.
__global__ void copy4(const float4* __restrict__ src, float4* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

template <typename F>
double median_ms(F&& f, cudaStream_t s) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    CHECK(cudaEventRecord(a, s));
    f();
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int main(int argc, char** argv) {
  const size_t bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2048ull) << 20;  // MiB
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  void *src = nullptr, *dst = nullptr;
  CHECK(cudaMalloc(&src, bytes));
  CHECK(cudaMalloc(&dst, bytes));
  CHECK(cudaMemset(src, 1, bytes));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  const double memcpy_ms =
      median_ms([&] { CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)); }, s);
  const size_t n4 = bytes / 16;
  const int blocks = prop.multiProcessorCount * 8;
  const double kernel_ms = median_ms(
      [&] {
        copy4<<<blocks, 512, 0, s>>>(static_cast<const float4*>(src), static_cast<float4*>(dst), n4);
        CHECK(cudaGetLastError());
      },
      s);
  const double moved = 2.0 * double(bytes);
  const double memcpy_gbs = moved / (memcpy_ms * 1e-3) / 1e9, kernel_gbs = moved / (kernel_ms * 1e-3) / 1e9;
  std::printf(
      "{\"benchmark\": \"copy\", \"device\": \"%s\", \"bytes\": %zu, \"memcpy_median_ms\": %.4f, "
      "\"memcpy_gb_per_s\": %.1f, \"kernel_median_ms\": %.4f, \"kernel_gb_per_s\": %.1f, \"copy_gb_per_s\": %.1f}\n",
      prop.name, bytes, memcpy_ms, memcpy_gbs, kernel_ms, kernel_gbs, std::max(memcpy_gbs, kernel_gbs));
  return 0;
}
