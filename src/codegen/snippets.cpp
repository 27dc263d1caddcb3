// The shared instruction -> C expression table of the renderers (see snippets.h): the same
// semantics as the reference backend's lambdas, spelled for the host compiler or for CUDA.
#include "snippets.h"

#include <cmath>
#include <cstdio>

#include "aether/core/error.h"

namespace aether::codegen::snippets {

using ir::Inst;
using ir::InstKind;

namespace {

// Valid C++ and CUDA C alike; $FN is replaced by the function qualifiers of the language.
constexpr const char* kHelpers = R"(typedef long long i64;
typedef unsigned long long u64;
$FN i64 ae_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
$FN i64 ae_sub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
$FN i64 ae_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
$FN i64 ae_div(i64 a, i64 b) { return b == 0 ? 0 : b == -1 ? (i64)(0ull - (u64)a) : a / b; }
$FN i64 ae_fmod(i64 a, i64 b) { return b == 0 || b == -1 ? 0 : a % b; }
// The NaN-propagating max (a NaN a or b wins): b when a > b fails, b being NaN included. ae_gt is a
// quiet comparison, so the compiler may evaluate both sides and vectorise (a plain `>` can raise
// FE_INVALID, which keeps the branches).
$FN float ae_max(float a, float b) { const float m = ae_gt(a, b) ? a : b; return a != a ? a : m; }
$FN double ae_max(double a, double b) { const double m = ae_gt(a, b) ? a : b; return a != a ? a : m; }
$FN i64 ae_maxi(i64 a, i64 b) { return a > b ? a : b; }
template <class O, class C>
$FN O ae_f2i(C v, O lo, O hi) { return v != v ? (O)0 : v <= (C)lo ? lo : v >= (C)hi ? hi : (O)v; }
typedef unsigned int u32;
// Philox4x32-10 (as aether/core/random.h): counter (index, stream), key seed; outputs r0, r1.
$FN void ae_philox(u64 seed, u64 stream, u64 index, u32* r0, u32* r1) {
  u32 c0 = (u32)index, c1 = (u32)(index >> 32), c2 = (u32)stream, c3 = (u32)(stream >> 32);
  u32 k0 = (u32)seed, k1 = (u32)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const u64 p0 = (u64)0xD2511F53u * c0, p1 = (u64)0xCD9E8D57u * c2;
    const u32 n0 = (u32)(p1 >> 32) ^ c1 ^ k0, n1 = (u32)p1, n2 = (u32)(p0 >> 32) ^ c3 ^ k1, n3 = (u32)p0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  *r0 = c0, *r1 = c1;
}
$FN float ae_rand_f32(u64 seed, u64 stream, u64 index) {
  u32 r0, r1;
  ae_philox(seed, stream, index, &r0, &r1);
  return (float)(r0 >> 8) * (1.0f / 16777216.0f);
}
$FN double ae_rand_f64(u64 seed, u64 stream, u64 index) {
  u32 r0, r1;
  ae_philox(seed, stream, index, &r0, &r1);
  const u64 bits = ((u64)r0 << 21) ^ ((u64)r1 >> 11);
  return (double)(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}
// 16-bit floats are stored as their bits (unsigned short) and computed in float, rounded after every
// op like the reference (aether/core/dtype.h: the same round-to-nearest-even bit manipulations).
// Branch-free (selects by masks), so that a loop over them vectorises: the same bits as the
// reference's scalar conversions for every input (tests/codegen_test.cpp checks all of them).
$FN float ae_h2f(unsigned short h) {
  const u32 em = (u32)(h & 0x7fffu) << 13, e = em & 0x0f800000u;  // exponent and mantissa, as a float's
  const u32 normal = em + ((127u - 15u) << 23);
  const u32 special = (em + ((255u - 31u) << 23)) | ((u32)((em & 0x7fe000u) != 0) << 22);  // inf; NaN made quiet
  const u32 sub = ae_fbits(ae_bitsf(em | (113u << 23)) - ae_bitsf(113u << 23));  // m * 2^-24, exact
  const u32 is_sub = 0u - (u32)(e == 0), is_special = 0u - (u32)(e == 0x0f800000u);
  const u32 r = (sub & is_sub) | (special & is_special) | (normal & ~(is_sub | is_special));
  return ae_bitsf(r | ((u32)(h & 0x8000u) << 16));
}
$FN unsigned short ae_f2h(float f) {  // round to nearest even, overflow to inf, NaN -> sign | 0x7e00
  const u32 u = ae_fbits(f), a = u & 0x7fffffffu;
  const u32 normal = (a + ((u32)(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;  // carries to inf
  const u32 sub = ae_fbits(ae_bitsf(a) + 0.5f) - ae_fbits(0.5f);  // below 2^-14: the FPU rounds in 2^-24 steps
  const u32 big = 0x7c00u | ((u32)(a > 0x7f800000u) << 9);
  const u32 is_big = 0u - (u32)(a >= 0x47800000u), is_sub = 0u - (u32)(a < 0x38800000u);
  const u32 r = (big & is_big) | (sub & is_sub) | (normal & ~(is_big | is_sub));
  return (unsigned short)(r | ((u >> 16) & 0x8000u));
}
$FN float ae_b2f(unsigned short b) { return ae_bitsf((u32)b << 16); }
$FN unsigned short ae_f2b(float f) {
  u32 u = ae_fbits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
// Where(c, a, b) as bit operations (the bits of `c ? a : b`, NaN payloads and -0 kept): see alu_expr.
template <class U> $FN U ae_seli(bool c, U a, U b) { return (U)(b ^ ((a ^ b) & (U)(0 - (U)c))); }
$FN float ae_sel(bool c, float a, float b) { return ae_bitsf(ae_seli<u32>(c, ae_fbits(a), ae_fbits(b))); }
$FN double ae_sel(bool c, double a, double b) { return ae_bitsd(ae_seli<u64>(c, ae_dbits(a), ae_dbits(b))); }
$FN float ae_rh(float f) { return ae_h2f(ae_f2h(f)); }  // f rounded to float16
$FN float ae_rb(float f) { return ae_b2f(ae_f2b(f)); }  // f rounded to bfloat16
// exp of a float (the Exp op's float form on the CPU, snippet $E): Cephes' expf, branch-free, so
// that a loop calling it vectorises (a libm call per element keeps the loop scalar: GELU's backward
// ran at 1% of the copy bandwidth) and every lane and remainder computes the same bits. At most 1 ulp
// from the correctly rounded exp over [-110, 90] (libm's expf, the reference's, is correctly rounded
// in most cases): exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in two parts, exp(r) by a
// degree-7 polynomial, 2^n as two normal factors; inf above 88.8, 0 below -104, NaN kept.
$FN float ae_expf(float x) {
  const float a = ae_sel(x > 88.8f, 88.8f, ae_sel(x < -104.0f, -104.0f, x));
  const float t = (a * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round to nearest
  const float n = ae_sel(t != t, 0.0f, t);
  const float r = (a - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const int k = (int)n, k1 = k >> 1;
  return p * ae_bitsf((u32)(k1 + 127) << 23) * ae_bitsf((u32)(k - k1 + 127) << 23);
}
// double -> float rounded to odd, so that rounding once more to 16 bits rounds only once.
$FN float ae_odd(double v) {
  float f = (float)v;
  if (v != v || (double)f == v || !(f - f == 0.0f)) return f;
  u32 u = ae_fbits(f);
  if ((f < 0 ? -(double)f : (double)f) > (v < 0 ? -v : v)) --u;
  return ae_bitsf(u | 1u);
}
)";

// Bit casts, spelled per language (CUDA C has intrinsics, the host compiler a builtin).
constexpr const char* kBitsCpp =
    R"(static inline unsigned int ae_fbits(float f) { return __builtin_bit_cast(unsigned int, f); }
static inline float ae_bitsf(unsigned int u) { return __builtin_bit_cast(float, u); }
static inline unsigned long long ae_dbits(double f) { return __builtin_bit_cast(unsigned long long, f); }
static inline double ae_bitsd(unsigned long long u) { return __builtin_bit_cast(double, u); }
#define ae_gt(a, b) __builtin_isgreater(a, b)
)";
constexpr const char* kBitsCuda =
    R"(__device__ __forceinline__ unsigned int ae_fbits(float f) { return __float_as_uint(f); }
__device__ __forceinline__ float ae_bitsf(unsigned int u) { return __uint_as_float(u); }
__device__ __forceinline__ unsigned long long ae_dbits(double f) { return (unsigned long long)__double_as_longlong(f); }
__device__ __forceinline__ double ae_bitsd(unsigned long long u) { return __longlong_as_double((long long)u); }
#define ae_gt(a, b) ((a) > (b))
)";

std::string int_limits(DType t) {
  switch (t) {
    case DType::int32: return "(-2147483647 - 1), 2147483647";
    case DType::int64: return "(-9223372036854775807LL - 1), 9223372036854775807LL";
    case DType::uint8: return "(unsigned char)0, (unsigned char)255";
    default: throw Error("codegen: not an integer type");
  }
}

// NaN and +-infinity (CUDA C has no __builtin_inf: the bit patterns, which equal the host's).
std::string special(Lang lang, DType t, bool nan, bool negative) {
  const bool f32 = t != DType::float64;
  std::string v;
  if (lang == Lang::Cpp)
    v = detail::cat(nan ? "__builtin_nan" : "__builtin_inf", f32 ? "f" : "", nan ? "(\"\")" : "()");
  else if (f32)
    v = nan ? "__int_as_float(0x7fc00000)" : "__int_as_float(0x7f800000)";
  else
    v = nan ? "__longlong_as_double(0x7ff8000000000000LL)" : "__longlong_as_double(0x7ff0000000000000LL)";
  return negative ? "(-" + v + ")" : v;
}

}  // namespace

std::string prelude_helpers(Lang lang) {
  const std::string fn = lang == Lang::Cpp ? "static inline" : "__device__ __forceinline__";
  std::string s = std::string(lang == Lang::Cpp ? kBitsCpp : kBitsCuda) + kHelpers;
  for (size_t at = s.find("$FN"); at != std::string::npos; at = s.find("$FN", at + fn.size()))
    s.replace(at, 3, fn);
  return s;
}

const char* ctype(DType t) {
  switch (t) {
    case DType::float32: return "float";
    case DType::float64: return "double";
    case DType::int32: return "int";
    case DType::int64: return "i64";
    case DType::uint8: return "unsigned char";
    case DType::boolean: return "bool";
    case DType::float16:
    case DType::bfloat16: return "float";
  }
  throw Error(detail::cat("codegen: no C type for ", dtype_name(t)), ErrorKind::type);
}
const char* storage_ctype(DType t) { return is_16bit_float(t) ? "unsigned short" : ctype(t); }
int value_bytes(DType t) { return is_16bit_float(t) ? 4 : int(dtype_size(t)); }
const char* compute_type(DType t) { return t == DType::float64 ? "double" : is_fp(t) ? "float" : "i64"; }
bool is_fp(DType t) { return t == DType::float32 || t == DType::float64 || is_16bit_float(t); }

std::string round_to(DType t, const std::string& e) {
  if (!is_16bit_float(t)) return e;
  return detail::cat(t == DType::float16 ? "ae_rh(" : "ae_rb(", e, ")");
}

std::string load_expr(DType t, const std::string& e) {
  if (!is_16bit_float(t)) return e;
  return detail::cat(t == DType::float16 ? "ae_h2f(" : "ae_b2f(", e, ")");
}
std::string store_expr(DType t, const std::string& e) {
  if (!is_16bit_float(t)) return e;
  return detail::cat(t == DType::float16 ? "ae_f2h(" : "ae_f2b(", e, ")");
}

std::string convert(DType to, DType from, const std::string& e) {
  if (to == DType::boolean) return "(" + e + " != 0)";
  if (is_16bit_float(to))  // from float64 or an integer: round to float to odd first, then once to 16 bits
    return round_to(to, from == DType::float32 || is_16bit_float(from)
                            ? detail::cat("(float)(", e, ")")
                            : detail::cat("ae_odd((double)(", e, "))"));
  if (is_fp(to)) return detail::cat("(", ctype(to), ")(", e, ")");
  if (is_fp(from))
    return detail::cat("ae_f2i<", ctype(to), ", ", compute_type(from), ">(", e, ", ", int_limits(to), ")");
  return detail::cat("(", ctype(to), ")(", e, ")");
}

std::string literal(Lang lang, DType t, double v) {
  char buf[64];
  switch (t) {
    case DType::float32: {
      const float f = float(v);
      if (std::isnan(f) || std::isinf(f)) return special(lang, t, std::isnan(f), f < 0);
      std::snprintf(buf, sizeof buf, "%af", double(f));
      return buf;
    }
    case DType::float64:
      if (std::isnan(v) || std::isinf(v)) return special(lang, t, std::isnan(v), v < 0);
      std::snprintf(buf, sizeof buf, "%a", v);
      return buf;
    case DType::boolean: return v != 0 ? "true" : "false";
    case DType::int32:
    case DType::int64:
    case DType::uint8: {
      const double lo = t == DType::int32 ? -2147483648.0 : t == DType::int64 ? -9223372036854775808.0 : 0.0;
      const double hi = t == DType::int32 ? 2147483647.0 : t == DType::int64 ? 9223372036854775807.0 : 255.0;
      if (v != v) return detail::cat("(", ctype(t), ")0");
      if (v <= lo)
        return detail::cat("(", ctype(t), ")(",
                           t == DType::int64   ? "-9223372036854775807LL - 1"
                           : t == DType::int32 ? "-2147483647 - 1"
                                               : "0",
                           ")");
      if (v >= hi)
        return detail::cat("(", ctype(t), ")",
                           t == DType::int64   ? "9223372036854775807LL"
                           : t == DType::int32 ? "2147483647"
                                               : "255");
      std::snprintf(buf, sizeof buf, "(%s)%lldLL", ctype(t), static_cast<long long>(v));
      return buf;
    }
    case DType::float16:  // the float the reference's constant holds: rounded once, via float to odd
      return literal(lang, DType::float32, double(half_to_float(float_to_half(float_round_odd(v)))));
    case DType::bfloat16:
      return literal(lang, DType::float32, double(bf16_to_float(float_to_bf16(float_round_odd(v)))));
  }
  throw Error(detail::cat("codegen: no literal for ", dtype_name(t)), ErrorKind::type);
}

std::string affine(const ir::Affine& a) {
  std::string s = "(";  // appended, not "(" + s: GCC 12 warns (-Wrestrict) about that at -O3
  s += ir::to_string(a);
  s += ')';
  return s;
}

std::string guards(const std::vector<ir::Guard>& gs, const Shape& extent) {
  std::string s;
  for (const ir::Guard& g : gs) {
    const std::string e = affine(g.e);
    if (g.e.min(extent) < g.lo) s += detail::cat(s.empty() ? "" : " && ", e, " >= ", g.lo);
    if (g.e.max(extent) >= g.hi) s += detail::cat(s.empty() ? "" : " && ", e, " < ", g.hi);
  }
  return s.empty() ? "true" : s;
}

// The row's snippet (aether/graph/op.h) with its placeholders filled in: $0 $1 $2 the sources, $T the
// result's C type, $B the math-builtin prefix, $F the float suffix, $E the exp function.
std::string expand_snippet(Lang lang, const char* tmpl, const std::vector<std::string>& a, DType o) {
  std::string s;
  for (const char* p = tmpl; *p; ++p) {
    if (*p != '$' || !p[1]) {
      s += *p;
      continue;
    }
    switch (*++p) {
      case '0':
      case '1':
      case '2': {
        const size_t i = size_t(*p - '0');
        AETHER_CHECK(i < a.size(), "codegen", "snippet ", tmpl, " reads source ", i, " of ", a.size());
        s += a[i];
        break;
      }
      case 'T': s += ctype(o); break;
      case 'B': s += lang == Lang::Cpp ? "__builtin_" : ""; break;
      case 'E':  // exp: ae_expf for float (and 16-bit) math on the CPU (it vectorises), else the library's
        s += lang == Lang::Cuda ? (o == DType::float64 ? "exp" : "expf")
                                : (o == DType::float64 ? "__builtin_exp" : "ae_expf");
        break;
      case 'F': s += o == DType::float64 ? "" : "f"; break;
      default: throw Error(detail::cat("codegen: unknown placeholder $", *p, " in snippet ", tmpl));
    }
  }
  return s;
}

std::string alu_expr(Lang lang, const Inst& in, const std::vector<std::string>& a,
                     const std::vector<DType>& t) {
  const DType o = in.dtype;
  AETHER_CHECK(is_elementwise(in.op), "codegen", op_name(in.op), " is not an ALU op");
  if (in.op == Op::Cast) {
    // Integers of 32 bits or fewer go to a float through int (exact): AVX2 converts int32 vectors to
    // floats, but int64 only with AVX-512DQ, so (float)(i64)b kept a loop scalar there (max-pooling's
    // tie count, a sum of bools, ran at 10% of the copy bandwidth capped at AVX2).
    const bool via_int = is_fp(o) && (t[0] == DType::boolean || t[0] == DType::uint8 || t[0] == DType::int32);
    return convert(o, t[0], detail::cat("(", via_int ? "int" : compute_type(t[0]), ")", a[0]));
  }
  // A comparison is written once for every source dtype; other integer results are computed in
  // int64 (wrapping helpers) and converted. Where is written as bit operations, never a branch:
  // g++ 12 targeting AVX2 (no mask registers) does not if-convert `c ? a : b` on integers whose
  // condition is a float comparison, nor a float select whose result is compared again (its PRE
  // turns the comparison into a phi of bools): one such branch keeps the whole loop scalar.
  // Max-pool backward's first-maximum chain ran at 7% of the copy bandwidth on a Zen3 because of it.
  // The bits are those of `c ? a : b` (NaN payloads, -0 kept); CUDA uses the same helpers.
  const bool fp = op_has(in.op, kBoolResult) ? is_fp(t[0]) : is_fp(o);
  const char* tmpl = op_snippet(in.op, fp);
  AETHER_CHECK(*tmpl, "codegen", op_name(in.op), " has no ", fp ? "float" : "integer", " snippet (",
               dtype_name(o), ")");
  const std::string e = expand_snippet(lang, tmpl, a, o);
  return fp || op_has(in.op, kBoolResult) ? e : convert(o, DType::int64, e);
}

std::string value_expr(Lang lang, const std::vector<Inst>& insts, size_t i, const std::string& pre,
                       const Shape& extent) {
  const Inst& in = insts[i];
  const bool cpp = lang == Lang::Cpp;
  switch (in.kind) {
    case InstKind::Load: {
      const std::string ld = load_expr(in.dtype, detail::cat("p", in.buf, "[", affine(in.offset), "]"));
      const std::string g = guards(in.guards, extent);
      return g == "true" ? ld : detail::cat("(", g, ") ? ", ld, " : (", ctype(in.dtype), ")0");
    }
    case InstKind::Const:
      if (in.param < 0) return literal(lang, in.dtype, in.value);
      if (is_16bit_float(in.dtype))
        return convert(in.dtype, DType::float64, detail::cat(cpp ? "fp_[" : "fp", in.param, cpp ? "]" : ""));
      return detail::cat("(", ctype(in.dtype), ")", cpp ? "fp_[" : "fp", in.param, cpp ? "]" : "");
    case InstKind::Rand: {
      AETHER_CHECK_DTYPE(in.dtype == DType::float32 || in.dtype == DType::float64, "codegen",
                         "random numbers of dtype ", dtype_name(in.dtype), ", expected float32 or float64");
      auto ip = [&](int n) { return cpp ? detail::cat("ip_[", n, "]") : detail::cat("ip", n); };
      return detail::cat("ae_rand_", in.dtype == DType::float32 ? "f32" : "f64", "(", ip(in.param), ", ",
                         ip(in.param + 1), ", (u64)", affine(in.offset), ")");
    }
    case InstKind::InBounds: return guards(in.guards, extent);
    case InstKind::Alu: {
      std::vector<std::string> a;
      std::vector<DType> t;
      for (int s : in.srcs) {
        a.push_back(detail::cat(pre, s));
        t.push_back(insts[size_t(s)].dtype);
      }
      // A 16-bit result is computed in float and rounded, as the reference stores every op's value.
      const std::string e = alu_expr(lang, in, a, t);
      return op_has(in.op, kBoolResult | kExact16) ? e : round_to(in.dtype, e);
    }
    case InstKind::Accum:
    case InstKind::Result:
    case InstKind::Store: break;
  }
  throw Error("codegen: value_expr of an accumulation, result or store");
}

std::string Acc::init() const {
  if (sum()) return fp() ? "0.0" : narrow_int() ? "0u" : "0ull";
  if (narrow()) return literal(lang, DType::float32, -INFINITY);
  return fp() ? literal(lang, DType::float64, -INFINITY) : "(-9223372036854775807LL - 1)";
}
std::string Acc::add(const std::string& acc, const std::string& v) const {
  if (sum()) return fp() ? acc + " + (double)" + v : acc + (narrow_int() ? " + (u32)" : " + (u64)(i64)") + v;
  if (narrow()) return "ae_max(" + acc + ", (float)" + v + ")";
  return fp() ? "ae_max(" + acc + ", (double)" + v + ")" : "ae_maxi(" + acc + ", (i64)" + v + ")";
}
std::string Acc::combine(const std::string& a, const std::string& b) const {
  if (sum()) return a + " + " + b;
  if (narrow()) return "ae_max(" + a + ", " + b + ")";
  return fp() ? "ae_max(" + a + ", " + b + ")" : "ae_maxi(" + a + ", " + b + ")";
}
std::string Acc::final(const std::string& a) const {
  if (is_16bit_float(r.dtype)) return convert(r.dtype, narrow() ? DType::float32 : DType::float64, a);
  if (fp()) return detail::cat("(", ctype(r.dtype), ")", a);
  return convert(r.dtype, DType::int64, "(i64)" + a);
}

}  // namespace aether::codegen::snippets
