// Host buffers: 64-byte aligned (one cache line, one AVX-512 vector), zero-initialised unless the
// caller writes every element. Large blocks are kept for reuse when freed: glibc serves anything
// over 32 MiB with a fresh mmap, so without the cache every step of a training loop would fault in
// its big activations page by page.
#include "aether/core/buffer.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "aether/core/error.h"

namespace aether {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

// Freed blocks of 1 MiB or more, by size (rounded to 4 KiB), up to kCacheLimit bytes in all.
class BlockCache {
 public:
  static constexpr size_t kMin = size_t(1) << 20, kCacheLimit = size_t(2) << 30;
  static size_t round(size_t bytes) { return bytes >= kMin ? (bytes + 4095) / 4096 * 4096 : (bytes + 63) / 64 * 64; }
  void* get(size_t rounded) {
    if (rounded >= kMin) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(rounded);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_ -= rounded;
        return p;
      }
    }
    return std::aligned_alloc(64, rounded);
  }
  void put(void* p, size_t rounded) {
    if (!p) return;
    if (rounded >= kMin) {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + rounded > kCacheLimit) {  // over the limit: release everything cached
        for (auto& [size, block] : free_) std::free(block);
        free_.clear();
        cached_ = 0;
      }
      free_.emplace(rounded, p);
      cached_ += rounded;
      return;
    }
    std::free(p);
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
};
BlockCache& block_cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: buffers may outlive static destruction
  return *c;
}
}  // namespace

Buffer::Buffer(Device device, DType dtype, int64_t numel, bool zero_fill)
    : device_(device), dtype_(dtype), numel_(numel) {
  AETHER_CHECK(device.type == DeviceType::cpu, "Buffer", "device ", device.str(),
               " has no allocator in this build");
  AETHER_CHECK(numel >= 0, "Buffer", "negative element count ", numel);
  const size_t bytes = size_t(nbytes());
  const size_t rounded = BlockCache::round(bytes);
  if (rounded > 0) {
    data_ = block_cache().get(rounded);
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
  block_cache().put(data_, BlockCache::round(size_t(nbytes())));
  g_live.fetch_sub(nbytes());
}

int64_t Buffer::live_bytes() { return g_live.load(); }
int64_t Buffer::peak_bytes() { return g_peak.load(); }

}  // namespace aether
