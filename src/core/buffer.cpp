// Host buffers: 64-byte aligned (one cache line, one AVX-512 vector), zero-initialised unless the
// caller writes every element. Freed blocks of every size are kept for reuse (BlockCache below):
// glibc serves anything over 32 MiB with a fresh mmap, so without the cache every step of a training
// loop would fault in its big activations page by page, and a steady-state step allocates nothing.
#include "aether/core/buffer.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "aether/core/error.h"
#include "core/device_memory.h"  // device buffers

// Under AddressSanitizer cached blocks are poisoned, so a use after free is still reported.
#if defined(__SANITIZE_ADDRESS__)
#define AETHER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AETHER_ASAN 1
#endif
#endif
#ifdef AETHER_ASAN
#include <sanitizer/asan_interface.h>
#define AETHER_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define AETHER_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define AETHER_POISON(p, n) ((void)(p), (void)(n))
#define AETHER_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace aether {
namespace {
std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};
std::atomic<int64_t> g_buffers{0};  // Buffer allocations served (from the cache or the system)

// The host allocator: a caching allocator over size classes, like an arena that is never reset.
// A freed block goes to its class's free list and serves the next request of that class, so a
// training step, which makes the same requests every time, stops calling the system allocator after
// its first steps. Classes: up to 4 KiB the next power of two (at least 64 bytes, one cache line);
// above, the next multiple of 4 KiB (a page). At most kCacheLimit bytes are kept: a block freed
// beyond that goes back to the system. Thread-safe (one mutex; allocations are per tensor, coarse).
class BlockCache {
 public:
  static constexpr size_t kSmall = 4096, kPage = 4096, kCacheLimit = size_t(2) << 30;
  static size_t round(size_t bytes) {
    if (bytes == 0) return 0;
    if (bytes > kSmall) return (bytes + kPage - 1) / kPage * kPage;
    size_t c = 64;
    while (c < bytes) c *= 2;
    return c;
  }
  void* get(size_t rounded) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(rounded);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= rounded;
        AETHER_UNPOISON(p, rounded);
        return p;
      }
    }
    void* p = std::aligned_alloc(64, rounded);
    if (p) {
      system_allocs_.fetch_add(1);
      reserved_.fetch_add(int64_t(rounded));
    }
    return p;
  }
  void put(void* p, size_t rounded) {
    if (!p) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + rounded <= kCacheLimit) {
        AETHER_POISON(p, rounded);
        free_[rounded].push_back(p);
        cached_ += rounded;
        return;
      }
    }
    release(p, rounded);
  }
  // Returns every cached block to the system.
  void trim() {
    std::unordered_map<size_t, std::vector<void*>> blocks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      blocks.swap(free_);
      cached_ = 0;
    }
    for (auto& [size, list] : blocks)
      for (void* p : list) release(p, size);
  }
  int64_t cached_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return int64_t(cached_);
  }
  int64_t system_allocs() const { return system_allocs_.load(); }
  int64_t system_frees() const { return system_frees_.load(); }
  int64_t reserved_bytes() const { return reserved_.load(); }

 private:
  void release(void* p, size_t rounded) {
    AETHER_UNPOISON(p, rounded);
    std::free(p);
    system_frees_.fetch_add(1);
    reserved_.fetch_sub(int64_t(rounded));
  }
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // class size -> free blocks (LIFO: warm in cache)
  size_t cached_ = 0;
  std::atomic<int64_t> system_allocs_{0}, system_frees_{0}, reserved_{0};
};
BlockCache& block_cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: buffers may outlive static destruction
  return *c;
}
}  // namespace

Buffer::Buffer(Device device, DType dtype, int64_t numel, bool zero_fill)
    : device_(device), dtype_(dtype), numel_(numel) {
  AETHER_CHECK(numel >= 0, "Buffer", "negative element count ", numel);
  if (device.type != DeviceType::cpu) {  // device memory from the device's backend (its allocator)
    DeviceMemory* m = device_memory(device.type);
    if (!m)
      throw Error(detail::cat("Buffer: device ", device.str(),
                              " has no allocator: ", device_unavailable(device.type)),
                  ErrorKind::runtime);
    try {
      if (nbytes() > 0) data_ = m->alloc(device.index, size_t(nbytes()), zero_fill);
    } catch (const Error& e) {
      throw Error(
          detail::cat("Buffer: cannot allocate ", nbytes(), " bytes on ", device.str(), ": ", e.what()),
          ErrorKind::runtime);
    }
    return;
  }
  const size_t bytes = size_t(nbytes());
  const size_t rounded = BlockCache::round(bytes);
  if (rounded > 0) {
    data_ = block_cache().get(rounded);
    if (!data_)
      throw Error(detail::cat("Buffer: out of memory allocating ", bytes, " bytes (", numel, " x ",
                              dtype_name(dtype), ")"),
                  ErrorKind::runtime);
    if (zero_fill) std::memset(data_, 0, rounded);
  }
  g_buffers.fetch_add(1);
  const int64_t live = g_live.fetch_add(int64_t(bytes)) + int64_t(bytes);
  int64_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
}

Buffer::Buffer(DType dtype, int64_t numel, void* data, std::shared_ptr<const void> owner)
    : device_(Device::cpu()), dtype_(dtype), numel_(numel), data_(data), owner_(std::move(owner)) {
  AETHER_CHECK(numel >= 0, "Buffer", "negative element count ", numel);
  AETHER_CHECK(data != nullptr || numel == 0, "Buffer", "null external data for ", numel, " elements");
  if (!owner_) owner_ = std::make_shared<int>(0);  // external() stays true without an owner
}

Buffer::~Buffer() {
  if (external()) return;                 // owner_ releases the memory's owner
  if (device_.type != DeviceType::cpu) {  // only made when its memory is registered
    if (data_) device_memory(device_.type)->free(device_.index, data_);
    return;
  }
  block_cache().put(data_, BlockCache::round(size_t(nbytes())));
  g_live.fetch_sub(nbytes());
}

int64_t Buffer::live_bytes() { return g_live.load(); }
int64_t Buffer::peak_bytes() { return g_peak.load(); }
void Buffer::reset_peak_bytes() { g_peak.store(g_live.load()); }

Buffer::AllocStats Buffer::alloc_stats() {
  BlockCache& c = block_cache();
  AllocStats s;
  s.system_allocs = c.system_allocs();
  s.system_frees = c.system_frees();
  s.buffers = g_buffers.load();
  s.cached_bytes = c.cached_bytes();
  s.reserved_bytes = c.reserved_bytes();
  s.live_bytes = g_live.load();
  s.peak_bytes = g_peak.load();
  return s;
}
void Buffer::empty_cache() { block_cache().trim(); }
size_t Buffer::size_class(size_t bytes) { return BlockCache::round(bytes); }

}  // namespace aether
