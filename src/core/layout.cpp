// Layout: offsets, validation and the reference pack / unpack loops.
#include "aether/core/layout.h"

#include <atomic>
#include <cstring>

namespace aether {

int64_t Layout::offset(const int64_t* idx) const {
  const size_t nd = shape.size();
  int64_t rest[8];  // what is left of each dim's index after the inner blocks took theirs
  for (size_t d = 0; d < nd; ++d) rest[d] = idx[d];
  int64_t off = 0, inner = 1;  // inner: the stride of the block being placed (innermost first)
  for (size_t k = blocks.size(); k-- > 0;) {
    const auto [d, size] = blocks[k];
    off += (rest[d] % size) * inner;
    rest[d] /= size;
    inner *= size;
  }
  for (size_t d = 0; d < nd; ++d) off += rest[d] * strides[d];
  return off;
}

bool Layout::same_order(const Layout& o) const {
  return shape == o.shape && strides == o.strides && blocks == o.blocks;
}

namespace {
std::atomic<int64_t> g_packs{0}, g_unpacks{0};

// Calls f(row-major position, physical position) for every element of l.shape.
template <typename F>
void for_each_position(const Layout& l, F&& f) {
  const size_t nd = l.shape.size();
  const int64_t n = numel(l.shape);
  std::vector<int64_t> idx(nd, 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, l.offset(idx.data()));
    for (size_t d = nd; d-- > 0;) {
      if (++idx[d] < l.shape[d]) break;
      idx[d] = 0;
    }
  }
}
}  // namespace

std::shared_ptr<const Layout> permutation_layout(Layout l) {
  const size_t nd = l.shape.size();
  if (nd == 0 || nd > 8 || l.strides.size() != nd) return nullptr;
  for (const auto& [d, size] : l.blocks)
    if (d < 0 || size_t(d) >= nd || size < 1) return nullptr;
  const int64_t n = numel(l.shape);
  std::vector<char> seen(size_t(n), 0);
  bool ok = true;
  for_each_position(l, [&](int64_t, int64_t p) {
    if (p < 0 || p >= n || seen[size_t(p)])
      ok = false;
    else
      seen[size_t(p)] = 1;
  });
  return ok ? std::make_shared<const Layout>(std::move(l)) : nullptr;
}

namespace {
// Copies every element of l.shape between row-major order and l's order (to_packed: into l's).
void reorder(const Layout& l, const void* from, void* to, size_t elem_size, bool to_packed) {
  const char* src = static_cast<const char*>(from);
  char* dst = static_cast<char*>(to);
  for_each_position(l, [&](int64_t i, int64_t p) {
    const int64_t d = to_packed ? p : i, s = to_packed ? i : p;
    std::memcpy(dst + d * elem_size, src + s * elem_size, elem_size);
  });
}
}  // namespace

void pack(const Layout& l, const void* row_major, void* packed, size_t elem_size) {
  ++g_packs;
  reorder(l, row_major, packed, elem_size, true);
}

void unpack(const Layout& l, const void* packed, void* row_major, size_t elem_size) {
  ++g_unpacks;
  reorder(l, packed, row_major, elem_size, false);
}

LayoutCopies layout_copies() { return {g_packs.load(), g_unpacks.load()}; }

}  // namespace aether
