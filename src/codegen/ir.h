// src/codegen/ir.h - (internal) the kernel IR: what one generated kernel computes, for any backend to render.
//
// A kernel iterates over an iteration shape `full` with one loop variable per dim (i0, i1, ...).
// Its body is a list of SSA instructions evaluated at every point of `full`: loads through affine
// index expressions (with validity guards for padded views), constants, the primitive ops of the
// graph (the ALU ops reuse aether::Op, so the op table stays the one place to add an op), and
// stores at dense output positions. A reduce kernel's body ends in accumulations into one or more
// reductions (a multi-output reduce), and an epilogue evaluated at every point of the reduced
// (keepdim) shape reads the reduction results and stores. Nothing here is CPU specific: loops,
// threads and accumulator layout belong to the renderers (codegen/render_cpp.cpp for the CPU,
// codegen/render_cuda.cpp for CUDA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aether/core/dtype.h"
#include "aether/core/shape.h"
#include "aether/graph/op.h"

namespace aether::ir {

// c + sum_v k[v] * i_v: an integer index expression, affine in the kernel's loop variables.
struct Affine {
  int64_t c = 0;
  std::vector<int64_t> k;  // one coefficient per loop variable (rank of the iteration shape)
  static Affine constant(int64_t c, int rank);
  static Affine var(int v, int rank);
  Affine operator+(const Affine& o) const;
  Affine scaled(int64_t s) const;
  bool is_constant() const;
  // Bounds over the iteration shape (inclusive).
  int64_t min(const Shape& extent) const;
  int64_t max(const Shape& extent) const;
  bool operator==(const Affine& o) const = default;
};

// lo <= e < hi: a load is valid (else reads 0) only where all its guards hold (padded views).
struct Guard {
  Affine e;
  int64_t lo = 0, hi = 0;
  bool operator==(const Guard& o) const = default;
};

enum class InstKind : uint8_t {
  Load,      // buf[offset] (0 where a guard fails), of the buffer's dtype
  Const,     // a literal of `dtype`
  Alu,       // `op` (an elementwise primitive: unary, binary, Where, Cast) over srcs
  InBounds,  // bool: whether all `guards` hold (a padded view's zero region)
  Rand,      // uniform [0, 1) of `dtype` from Philox4x32-10 (seed, stream) at element `offset`
  Accum,     // body of a reduce kernel: reduction `slot` takes srcs[0]
  Result,    // epilogue: reduction `slot`'s result at `offset` (dense in the reduced shape)
  Store,     // buf[offset] = srcs[0] (offset dense in the iteration or reduced shape)
};

struct Inst {
  InstKind kind = InstKind::Const;
  Op op = Op::Copy;              // Alu only
  DType dtype = DType::float32;  // the value's (storage) dtype; Store/Accum: the value stored
  std::vector<int> srcs;         // instruction indices within the same list
  int buf = -1;                  // Load/Store: index into Kernel::bufs
  int slot = -1;                 // Accum/Result: index into Kernel::reductions
  Affine offset;                 // Load/Store/Rand (Rand: the element's dense index)
  std::vector<Guard> guards;     // Load, InBounds
  double value = 0;              // Const (converted to dtype by the renderer, as the reference does)
  int param = -1;                // Const: index into Kernel::fparams (-1: a literal); Rand: seed at
                                 // iparams[param], stream at iparams[param + 1]
};

struct Buf {
  DType dtype = DType::float32;
  int64_t numel = 0;
  bool output = false;  // written by this kernel (fresh, dense); else read only
};

struct Reduction {
  Op op = Op::ReduceSum;         // ReduceSum or ReduceMax
  DType dtype = DType::float32;  // of the reduce's result (accumulation is wider: see renderers)
};

struct Kernel {
  std::string name;
  Shape full;                    // iteration shape; loop variable v runs over full[v]
  std::vector<int> reduce_axes;  // empty: an elementwise kernel
  std::vector<Buf> bufs;         // inputs then outputs, in the order the kernel receives them
  std::vector<Inst> body;        // at every point of `full`
  std::vector<Reduction> reductions;
  std::vector<Inst> epilogue;  // at every point of the reduced shape (reduce axes fixed at 0)
  // Run-time constants, passed to the kernel rather than written into its source.
  std::vector<double> fparams;
  std::vector<uint64_t> iparams;
  Shape reduced_shape() const;  // full with the reduce axes set to 1
  bool is_reduce() const { return !reduce_axes.empty() || !reductions.empty(); }
};

std::string to_string(const Affine& a);
std::string to_string(const Kernel& k);  // a readable listing, for AETHER_DEBUG and tests

}  // namespace aether::ir
