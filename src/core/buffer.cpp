// Host buffers: 64-byte aligned (one cache line, one AVX-512 vector), zero-initialised.
#include "aether/core/buffer.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include "aether/core/error.h"

namespace aether {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
}  // namespace

Buffer::Buffer(Device device, DType dtype, int64_t numel, bool zero_fill)
    : device_(device), dtype_(dtype), numel_(numel) {
  AETHER_CHECK(device.type == DeviceType::cpu, "Buffer", "device ", device.str(),
               " has no allocator in this build");
  AETHER_CHECK(numel >= 0, "Buffer", "negative element count ", numel);
  const size_t bytes = size_t(nbytes());
  const size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded > 0) {
    data_ = std::aligned_alloc(64, rounded);
    if (!data_)
      throw Error(detail::cat("Buffer: out of memory allocating ", bytes, " bytes (", numel, " x ",
                              dtype_name(dtype), ")"));
    if (zero_fill) std::memset(data_, 0, rounded);
  }
  const int64_t live = g_live.fetch_add(int64_t(bytes)) + int64_t(bytes);
  int64_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
}

Buffer::~Buffer() {
  std::free(data_);
  g_live.fetch_sub(nbytes());
}

int64_t Buffer::live_bytes() { return g_live.load(); }
int64_t Buffer::peak_bytes() { return g_peak.load(); }

}  // namespace aether
