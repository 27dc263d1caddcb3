// Elementwise tensor ops: broadcasting and dtype promotion on top of the primitives.
#include <cmath>
#include <cstdint>
#include <numbers>

#include "aether/graph/primitives.h"
#include "ops/compute.h"

namespace aether {
namespace {
// Both operands broadcast to one shape and promoted to one dtype.
std::pair<Tensor, Tensor> align(const Tensor& a, const Tensor& b, const char* op) {
  const Shape s = broadcast_shapes(a.shape(), b.shape(), op);
  const DType t = promote(a.dtype(), b.dtype());
  return {a.cast(t).expand(s), b.cast(t).expand(s)};
}
Tensor bin(Op op, const Tensor& a, const Tensor& b, const char* name) {
  auto [x, y] = align(a, b, name);
  return prim::binary(op, x, y);
}
// Whether integer v is a value of integer dtype t.
bool fits(int64_t v, DType t) {
  switch (t) {
    case DType::int64: return true;
    case DType::int32: return v >= INT32_MIN && v <= INT32_MAX;
    case DType::uint8: return v >= 0 && v <= 255;
    case DType::boolean:  // a number with bools is arithmetic: int64 (NumPy, PyTorch)
    case DType::float32:
    case DType::float64:
    case DType::float16:
    case DType::bfloat16: return false;
  }
  return false;
}
// A number operand (the rule in aether/graph/tensor.h): the tensor's dtype if it is a float; an
// integer with an integer tensor in its dtype where it fits, else int64; a float with one float32.
Tensor scalar_like(const Tensor& t, Scalar v) {
  if (is_float(t.dtype()) || !v.is_integral())
    return Tensor::full({}, v.to_double(), is_float(t.dtype()) ? t.dtype() : DType::float32, t.device());
  const DType d = fits(v.to_int(), t.dtype()) ? t.dtype() : DType::int64;
  constexpr int64_t kExact = int64_t(1) << 53;  // a constant holds a double: exact up to 2^53
  if (v.to_int() >= -kExact && v.to_int() <= kExact)
    return Tensor::full({}, double(v.to_int()), d, t.device());
  return Tensor::from_vector<int64_t>({v.to_int()}, {}).to(t.device());
}
// Ops that only make sense on floats promote ints and bools to float32 first.
Tensor as_float(const Tensor& t) { return is_float(t.dtype()) ? t : t.cast(DType::float32); }
}  // namespace

Tensor operator+(const Tensor& a, const Tensor& b) { return bin(Op::Add, a, b, "add"); }
Tensor operator-(const Tensor& a, const Tensor& b) { return bin(Op::Sub, a, b, "sub"); }
Tensor operator*(const Tensor& a, const Tensor& b) { return bin(Op::Mul, a, b, "mul"); }
// True division: integer operands are promoted to float32 first, like NumPy and PyTorch.
Tensor operator/(const Tensor& a, const Tensor& b) {
  if (!is_float(a.dtype()) && !is_float(b.dtype())) return bin(Op::Div, as_float(a), as_float(b), "div");
  return bin(Op::Div, a, b, "div");
}
Tensor operator+(const Tensor& a, Scalar b) { return a + scalar_like(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return a - scalar_like(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return a * scalar_like(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return a / scalar_like(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return scalar_like(b, a) + b; }
Tensor operator-(Scalar a, const Tensor& b) { return scalar_like(b, a) - b; }
Tensor operator*(Scalar a, const Tensor& b) { return scalar_like(b, a) * b; }
Tensor operator/(Scalar a, const Tensor& b) { return scalar_like(b, a) / b; }

Tensor Tensor::lt(const Tensor& o) const { return bin(Op::CmpLt, *this, o, "lt"); }
Tensor Tensor::le(const Tensor& o) const { return bin(Op::CmpLe, *this, o, "le"); }
Tensor Tensor::gt(const Tensor& o) const { return bin(Op::CmpLt, o, *this, "gt"); }
Tensor Tensor::ge(const Tensor& o) const { return bin(Op::CmpLe, o, *this, "ge"); }
Tensor Tensor::eq(const Tensor& o) const { return bin(Op::CmpEq, *this, o, "eq"); }
Tensor Tensor::ne(const Tensor& o) const { return bin(Op::CmpNe, *this, o, "ne"); }
Tensor Tensor::eq(Scalar o) const { return eq(scalar_like(*this, o)); }
Tensor Tensor::ne(Scalar o) const { return ne(scalar_like(*this, o)); }
Tensor operator<(const Tensor& a, const Tensor& b) { return a.lt(b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return a.le(b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return a.gt(b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return a.ge(b); }
Tensor operator<(const Tensor& a, Scalar b) { return a.lt(scalar_like(a, b)); }
Tensor operator<=(const Tensor& a, Scalar b) { return a.le(scalar_like(a, b)); }
Tensor operator>(const Tensor& a, Scalar b) { return a.gt(scalar_like(a, b)); }
Tensor operator>=(const Tensor& a, Scalar b) { return a.ge(scalar_like(a, b)); }

namespace {
// Truth values as bools (x != 0; a bool is itself); bool * bool is and, bool + bool is or.
Tensor truth(const Tensor& x) { return x.dtype() == DType::boolean ? x : x.ne(0.0); }
}  // namespace
Tensor Tensor::logical_not() const { return truth(*this).eq(Tensor::zeros({}, DType::boolean, device())); }
Tensor Tensor::logical_and(const Tensor& o) const {
  return bin(Op::Mul, truth(*this), truth(o), "logical_and");
}
Tensor Tensor::logical_or(const Tensor& o) const {
  return bin(Op::Add, truth(*this), truth(o), "logical_or");
}
Tensor Tensor::logical_xor(const Tensor& o) const {
  return bin(Op::CmpNe, truth(*this), truth(o), "logical_xor");
}

Tensor Tensor::operator-() const {
  AETHER_CHECK_DTYPE(dtype() != DType::boolean, "neg", "bool tensors cannot be negated");
  return prim::unary(Op::Neg, *this);
}
Tensor Tensor::exp() const { return prim::unary(Op::Exp, as_float(*this)); }
Tensor Tensor::log() const { return prim::unary(Op::Log, as_float(*this)); }
Tensor Tensor::sqrt() const { return prim::unary(Op::Sqrt, as_float(*this)); }
Tensor Tensor::rsqrt() const { return sqrt().reciprocal(); }
Tensor Tensor::reciprocal() const { return prim::unary(Op::Recip, as_float(*this)); }
Tensor Tensor::sin() const { return prim::unary(Op::Sin, as_float(*this)); }
Tensor Tensor::cos() const {  // cos x = sin(x + pi/2)
  return ops_detail::in_compute(*this, [](const Tensor& x) { return (x + std::numbers::pi / 2).sin(); });
}
Tensor Tensor::square() const { return *this * *this; }
Tensor Tensor::abs() const {
  if (dtype() == DType::boolean || dtype() == DType::uint8) return *this;  // never negative
  return where(*this < 0.0, -*this, *this);
}
Tensor Tensor::isnan() const {
  return is_float(dtype()) ? ne(*this) : Tensor::zeros(shape(), DType::boolean, device());
}
Tensor Tensor::isinf() const {
  return is_float(dtype()) ? abs().eq(INFINITY) : Tensor::zeros(shape(), DType::boolean, device());
}
// x - x is 0 exactly where x is finite (NaN for NaN and both infinities).
Tensor Tensor::isfinite() const {
  return is_float(dtype()) ? (*this - *this).eq(0.0) : Tensor::ones(shape(), DType::boolean, device());
}
Tensor Tensor::sign() const {
  AETHER_CHECK_DTYPE(dtype() != DType::boolean, "sign", "takes no bool tensors");
  const Tensor one = Tensor::ones({}, dtype(), device());
  if (dtype() == DType::uint8) return where(*this > 0.0, one, Tensor::zeros({}, dtype(), device()));
  // x * 0 where x is 0 or NaN: keeps NaN, and the gradient is 0 everywhere (as where's branches give).
  return where(*this > 0.0, one, where(*this < 0.0, -one, *this * Tensor::zeros({}, dtype(), device())));
}
Tensor Tensor::maximum(const Tensor& o) const { return bin(Op::Max, *this, o, "maximum"); }
// Floats: -max(-a, -b), which keeps NaN propagation and Max's tie rule for gradients. Integers and
// bool cannot be negated safely (uint8 0, INT_MIN, bool), so they select instead.
Tensor Tensor::minimum(const Tensor& o) const {
  broadcast_shapes(shape(), o.shape(), "minimum");  // so a mismatch names this op
  const DType t = promote(dtype(), o.dtype());
  const Tensor a = cast(t), b = o.cast(t);  // promote first: -x of uint8 or INT_MIN would wrap
  if (is_float(t)) return -((-a).maximum(-b));
  return where(a.le(b), a, b);
}
Tensor Tensor::maximum(Scalar o) const { return maximum(scalar_like(*this, o)); }
Tensor Tensor::minimum(Scalar o) const { return minimum(scalar_like(*this, o)); }
Tensor Tensor::clamp(Scalar lo, Scalar hi) const { return maximum(lo).minimum(hi); }
Tensor Tensor::pow(double e) const {
  // x^0 = 1 everywhere (NaN and inf too), in x's dtype, with a zero gradient.
  if (e == 0)
    return where(Tensor::ones(shape(), DType::boolean, device()), Tensor::ones({}, dtype(), device()), *this);
  if (e == 1) return *this;
  if (e == 2) return square();
  if (e == 0.5) return sqrt();
  if (e == -1) return reciprocal();
  if (e == std::floor(e) && std::abs(e) < 2147483648.0) {
    // Integer powers by repeated squaring: defined for negative x, exact for integer dtypes.
    Tensor r, base = *this;
    for (uint64_t n = uint64_t(std::abs(e)); n; n >>= 1) {
      if (n & 1) r = r.defined() ? r * base : base;
      if (n > 1) base = base * base;
    }
    return e < 0 ? r.reciprocal() : r;
  }
  return (as_float(*this).log() * e).exp();  // x^e = exp(e ln x), for x > 0
}

// ---- rounding and integer division ------------------------------------------------------------
// Floor is the primitive; the rest are composites of it and Fmod (C's exact fmod), so that they are
// exact in every float dtype (Python's algorithms, which NumPy and PyTorch follow). Integers and
// bool are already whole: the rounding functions return them as they are (PyTorch's rule).
Tensor Tensor::floor() const { return is_float(dtype()) ? prim::unary(Op::Floor, *this) : *this; }
Tensor Tensor::ceil() const { return is_float(dtype()) ? -(-*this).floor() : *this; }
Tensor Tensor::trunc() const { return is_float(dtype()) ? where(*this < 0.0, ceil(), floor()) : *this; }
Tensor Tensor::round() const {
  if (!is_float(dtype())) return *this;
  // Half to even from d = x - floor(x), exact for x >= 0 and x <= -1 (Sterbenz; 16-bit floats compute
  // in float32). In (-1, 0) d may round, onto 0.5 only from above, where the odd floor -1 rounds up
  // to 0 either way: ties are found exactly. (floor(x + 0.5) would round 0.49999997 + 0.5 up to 1.)
  return ops_detail::in_compute(*this, [](const Tensor& x) {
    const Tensor f = x.floor(), d = x - f;
    const Tensor odd = ((f * 0.5).floor() * 2.0).ne(f);
    return where((d > 0.5).logical_or(d.eq(0.5).logical_and(odd)), f + 1.0, f);
  });
}

namespace {
// Both operands aligned for an integer-division op (bool is refused, as in PyTorch), then f on them in
// the compute dtype of a float (16-bit floats in float32, rounded once) or in the integer dtype.
template <typename F>
Tensor division_op(const Tensor& a, const Tensor& b, const char* name, F&& f) {
  auto [x, y] = align(a, b, name);
  AETHER_CHECK_DTYPE(x.dtype() != DType::boolean, name,
                     "takes no bool tensors (cast them to an integer dtype)");
  if (!is_float(x.dtype())) return f(x, y);
  const DType c = ops_detail::compute_dtype(x.dtype());
  return f(x.cast(c), y.cast(c)).cast(x.dtype());
}
// Where fmod's remainder r (the sign of a) and the divisor b differ in sign: Python's % adds b there.
Tensor signs_differ(const Tensor& r, const Tensor& b) { return r.ne(0.0).logical_and((r < 0.0).ne(b < 0.0)); }
}  // namespace

Tensor Tensor::fmod(const Tensor& o) const {
  return division_op(*this, o, "fmod",
                     [](const Tensor& a, const Tensor& b) { return prim::binary(Op::Fmod, a, b); });
}
Tensor Tensor::remainder(const Tensor& o) const {
  return division_op(*this, o, "remainder", [](const Tensor& a, const Tensor& b) {
    const Tensor r = prim::binary(Op::Fmod, a, b);
    return where(signs_differ(r, b), r + b, r);
  });
}
Tensor Tensor::floor_divide(const Tensor& o) const {
  return division_op(*this, o, "floor_divide", [](const Tensor& a, const Tensor& b) {
    const Tensor r = prim::binary(Op::Fmod, a, b);
    if (!is_float(
            a.dtype())) {  // C's division truncates (0 where b = 0, as NumPy's): one less where signs differ
      const Tensor q = prim::binary(Op::Div, a, b);
      return where(signs_differ(r, b), q - Tensor::ones({}, q.dtype(), q.device()), q);
    }
    // Python's float_floor_div: (a - r) / b is within an ulp of a whole number, rounded to it;
    // b = 0 gives a / b (inf or NaN), as NumPy's.
    const Tensor q = (a - r) / b, div = where(signs_differ(r, b), q - 1.0, q);
    const Tensor f = div.floor();
    return where(b.eq(0.0), a / b, where(div - f > 0.5, f + 1.0, f));
  });
}
Tensor floor_divide(Scalar a, const Tensor& b) { return scalar_like(b, a).floor_divide(b); }
Tensor remainder(Scalar a, const Tensor& b) { return scalar_like(b, a).remainder(b); }
Tensor Tensor::fmod(Scalar o) const { return fmod(scalar_like(*this, o)); }
Tensor Tensor::remainder(Scalar o) const { return remainder(scalar_like(*this, o)); }
Tensor Tensor::floor_divide(Scalar o) const { return floor_divide(scalar_like(*this, o)); }

Tensor Tensor::pow(const Tensor& e) const { return bin(Op::Pow, as_float(*this), as_float(e), "pow"); }
Tensor pow(double base, const Tensor& e) { return scalar_like(e, base).pow(e); }

Tensor Tensor::cast(DType dtype) const {
  if (dtype == this->dtype()) return *this;
  return prim::cast(*this, dtype);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  const DType t = promote(a.dtype(), b.dtype());
  return prim::where(cond.cast(DType::boolean).expand(s), a.cast(t).expand(s), b.cast(t).expand(s));
}
Tensor where(const Tensor& cond, const Tensor& a, Scalar b) { return where(cond, a, scalar_like(a, b)); }
Tensor where(const Tensor& cond, Scalar a, const Tensor& b) { return where(cond, scalar_like(b, a), b); }

// ReLU: x <= 0 ? 0 : x. NaN inputs pass through (as in PyTorch). Its backward is the Where rule:
// one select, x <= 0 ? 0 : dy, i.e. out > 0 ? dy : 0; an upstream NaN at an inactive unit gives 0.
// The zero has x's dtype, so relu keeps integer dtypes.
Tensor Tensor::relu() const { return where(*this <= 0.0, Tensor::zeros({}, dtype(), device()), *this); }
Tensor Tensor::sigmoid() const {
  return ops_detail::in_compute(*this, [](const Tensor& x) {
    // Stable form: e = exp(-|x|) never overflows, so neither the value nor the gradient sees inf
    // (1 / (1 + exp(-x)) has a 0 * inf = NaN gradient below about -88 in float32).
    const Tensor e = (-x.abs()).exp();
    const Tensor r = (1.0 + e).reciprocal();
    return where(x >= 0.0, r, e * r);
  });
}
Tensor Tensor::tanh() const {
  return ops_detail::in_compute(*this, [](const Tensor& x) { return (x * 2.0).sigmoid() * 2.0 - 1.0; });
}

}  // namespace aether
