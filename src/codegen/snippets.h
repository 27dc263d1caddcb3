// codegen/snippets.h - the one table of kernel-IR instruction -> C expression, shared by every renderer.
//
// The CPU renderer (render_cpp.cpp: C++ with OpenMP) and the CUDA renderer (render_cuda.cpp) differ
// in loop structure only; what one instruction computes is written here once: C types, the
// conversions of the reference backend (saturating float -> int casts, bool as != 0), literals,
// affine indices and guards, the ALU ops (wrap-around integer arithmetic, division by zero giving 0,
// NaN-propagating max), the reductions' accumulator arithmetic, and the prelude of helpers (integer
// ops, Philox4x32-10) that both languages compile. `Lang` selects the few spellings that differ:
// the math functions and infinities (__builtin_expf for the host compiler, expf in device code) and
// how a kernel reads its run-time parameters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/ir.h"

namespace aether::codegen::snippets {

enum class Lang : uint8_t { Cpp, Cuda };

// typedefs (i64, u64, u32) and helper functions (ae_add, ae_div, ae_max, ae_f2i, ae_philox,
// ae_rand_f32, ...), declared `static inline` (Cpp) or `__device__ __forceinline__` (Cuda: not static, so
// that NVRTC does not warn about the helpers a kernel does not call).
std::string prelude_helpers(Lang lang);

// Values live in registers as ctype (16-bit floats as float, rounded after every op) and in buffers
// as storage_ctype (16-bit floats as their bits, unsigned short); load_expr / store_expr convert.
const char* ctype(DType t);          // the C type of a value of dtype t in a kernel
const char* storage_ctype(DType t);  // the C type of an element of a buffer of dtype t
int value_bytes(DType t);            // sizeof(ctype(t)): scratch arrays of values
const char* compute_type(DType t);   // the type the reference computes in for values stored as t
bool is_fp(DType t);                 // float64, float32, float16, bfloat16
std::string round_to(DType t, const std::string& e);    // a float rounded to t's precision (16-bit)
std::string load_expr(DType t, const std::string& e);   // element of a buffer of t -> value
std::string store_expr(DType t, const std::string& e);  // value -> element of a buffer of t

// Converts `e` (of compute type `from`'s) to storage type `to`, as the reference's convert().
std::string convert(DType to, DType from, const std::string& e);
std::string literal(Lang lang, DType t, double v);
std::string affine(const ir::Affine& a);  // "(2*i0 + i1 + 3)"
// The C condition that all guards hold over `extent` ("true" when they hold everywhere).
std::string guards(const std::vector<ir::Guard>& gs, const Shape& extent);

// The table: one ALU op (in.op, result in.dtype) over operands `a` of storage types `t` -> a C
// expression. Throws aether::Error for an op that is not elementwise.
std::string alu_expr(Lang lang, const ir::Inst& in, const std::vector<std::string>& a,
                     const std::vector<DType>& t);

// The value of instruction `i` of `insts` when it is a Load, Const, Rand, InBounds or Alu; operands
// are named pre<j> (j: their index in `insts`), buffers p<b>. Run-time parameters are read as
// fp_[n] and ip_[n] (Cpp: arrays) or fp<n> and ip<n> (Cuda: kernel arguments).
std::string value_expr(Lang lang, const std::vector<ir::Inst>& insts, size_t i, const std::string& pre,
                       const Shape& extent);

// Accumulator arithmetic of a reduction: type, identity, accumulate, combine, final conversion.
// Floats accumulate in double, integers in 64 bits (wrap-around sums), as the reference does.
struct Acc {
  const ir::Reduction& r;
  Lang lang = Lang::Cpp;
  bool fp() const { return is_fp(r.dtype); }
  bool sum() const { return r.op == Op::ReduceSum; }
  // A float maximum is exact in float: float32 and 16-bit maxima accumulate in float (twice the
  // vector lanes of double); float sums accumulate in double. An integer sum of at most 32 bits
  // wraps to its type at the end, so it accumulates modulo 2^32 in u32 with the same result as in
  // u64, in twice the lanes and without widening each value (max-pool's tie counts).
  bool narrow_int() const { return sum() && !fp() && r.dtype != DType::boolean && dtype_size(r.dtype) <= 4; }
  bool narrow() const { return (!sum() && fp() && r.dtype != DType::float64) || narrow_int(); }
  const char* type() const {
    return narrow_int() ? "u32" : narrow() ? "float" : fp() ? "double" : sum() ? "u64" : "i64";
  }
  std::string init() const;
  std::string add(const std::string& acc, const std::string& v) const;    // v: a stored value
  std::string combine(const std::string& a, const std::string& b) const;  // both accumulators
  std::string final(const std::string& a) const;                          // -> the result dtype
};

}  // namespace aether::codegen::snippets
