// aether/core/layout.h - Layout: the order of a buffer's elements when it is not row-major.
//
// A node's value is its buffer read through its View, and buffers hold elements row-major. A
// library that keeps its operands in its own blocked order (oneDNN's convolution weights, e.g.
// "ABcd16b16a") may leave its result that way: the Buffer then carries a Layout, a permutation of
// the row-major positions described like oneDNN's blocking descriptor. Such a buffer is only ever
// read as is by code that understands its layout (the oneDNN convolutions, and elementwise kernels
// whose every operand has the same layout: an elementwise function commutes with any permutation);
// every other reader gets the row-major order first (to_row_major() in aether/graph/node.h).
//
//   // conv weights w (O,KH,KW,C) = (32,3,3,16) in 16-channel blocks of C:
//   // offset(o,kh,kw,c) = (c/16)*4608 + o*144 + kh*48 + kw*16 + c%16
//   Layout l{{32, 3, 3, 16}, {144, 48, 16, 4608}, {{3, 16}}, "aBcd16b"};
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aether/core/shape.h"

namespace aether {

struct Layout {
  Shape shape;                                  // the logical (row-major) shape
  std::vector<int64_t> strides;                 // per logical dim: the stride of its outer index
  std::vector<std::pair<int, int64_t>> blocks;  // inner blocks, outermost first: (dim, size)
  std::string name;                             // the library's name for it, for reports
  std::shared_ptr<const void> native;           // the library's own descriptor; opaque here

  // The physical position of the element at logical index idx (shape.size() values): with dim d's
  // index split into an outer part and one part per inner block of d (the innermost block takes
  // idx % size first), the outer parts times `strides` plus the inner parts, row-major over
  // `blocks`.
  int64_t offset(const int64_t* idx) const;
  // The same order (shape, strides, blocks); the name and the native descriptor are not compared.
  bool same_order(const Layout& o) const;
};

// `l` if it maps the numel(shape) logical positions one-to-one onto [0, numel) (no padding, no
// gaps), else null: only such layouts may be carried by a Buffer of numel(shape) elements.
std::shared_ptr<const Layout> permutation_layout(Layout l);

// Copies `numel(l.shape)` elements of `elem_size` bytes from row-major order into `l`'s order, and
// back. The reference loops (the conv library uses its own reorders where it has one).
void pack(const Layout& l, const void* row_major, void* packed, size_t elem_size);
void unpack(const Layout& l, const void* packed, void* row_major, size_t elem_size);

// pack() and unpack() calls so far (process-wide): a steady-state training step makes none.
struct LayoutCopies {
  int64_t packs = 0, unpacks = 0;
};
LayoutCopies layout_copies();

}  // namespace aether
