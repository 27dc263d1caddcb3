// aether/graph/tensor.h - Tensor: a handle to a value in the lazy graph, with autograd.
//
// A Tensor is cheap to copy (it is a shared handle). Operations record graph nodes and return at
// once; nothing is computed until a value is needed: realize(), item(), to_vector(), or printing.
//
// Shapes and layout: shapes are row-major, up to 8 dims. Conv nets use NHWC activations
// (N, H, W, C) and OHWI weights (out channels, kernel h, kernel w, in channels / groups); see
// aether/ops/nn.h. A user thinking in NCHW maps (N, C, H, W) to (N, H, W, C) with
// x.permute({0, 2, 3, 1}).
//
// Broadcasting follows NumPy: shapes align on the right, size-1 dims stretch. Binary ops promote
// dtypes with aether::promote (see dtype.h).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aether/core/device.h"
#include "aether/core/dtype.h"
#include "aether/core/error.h"
#include "aether/core/scalar.h"
#include "aether/core/shape.h"
#include "aether/graph/node.h"

namespace aether {

struct GradFn;
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // an empty handle: using it throws aether::Error
  explicit Tensor(NodePtr node);

  // ---- creation -------------------------------------------------------------------------------
  // Without a device, tensors are created on default_device() (the CPU unless AETHER_DEVICE says).
  static Tensor zeros(const Shape& shape, DType dtype = DType::float32, Device device = default_device());
  static Tensor ones(const Shape& shape, DType dtype = DType::float32, Device device = default_device());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::float32,
                     Device device = default_device());
  static Tensor scalar(double value, DType dtype = DType::float32);
  // [start, stop) in steps of `step`, like numpy.arange.
  static Tensor arange(double start, double stop, double step = 1, DType dtype = DType::float32);
  static Tensor arange(int64_t n, DType dtype = DType::int64) { return arange(0, double(n), 1, dtype); }
  static Tensor eye(int64_t n, int64_t m = -1, DType dtype = DType::float32);
  // Random tensors use the global Philox generator (aether/core/random.h): manual_seed(s) fixes
  // every later draw, independently of the thread count.
  static Tensor rand(const Shape& shape, DType dtype = DType::float32);   // uniform [0, 1)
  static Tensor randn(const Shape& shape, DType dtype = DType::float32);  // standard normal
  static Tensor uniform(const Shape& shape, double low, double high, DType dtype = DType::float32);
  static Tensor randint(int64_t low, int64_t high, const Shape& shape, DType dtype = DType::int64);
  // Copies `data` (numel(shape) elements of T) into a new buffer.
  template <typename T>
  static Tensor from_vector(const std::vector<T>& data, const Shape& shape);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& data) {
    return from_vector(data, Shape{int64_t(data.size())});
  }
  static Tensor from_blob(const void* data, const Shape& shape, DType dtype);  // copies
  // A host tensor over memory that `owner` keeps alive (row-major, numel(shape) elements of dtype),
  // without a copy: NumPy arrays from Python. Never written by aether; the caller's later writes
  // show in values not yet computed from it. Lands on the CPU whatever the default device.
  static Tensor from_external(void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> owner);
  static Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
  static Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }

  // ---- properties -----------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int ndim() const { return int(shape().size()); }
  int64_t size(int64_t axis) const;
  int64_t numel() const { return aether::numel(shape()); }
  DType dtype() const;
  Device device() const;
  const NodePtr& node() const;
  std::string str() const;  // "Tensor(shape=(2, 3), dtype=float32, device=cpu)"
  bool same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- realization ----------------------------------------------------------------------------
  // Computes this tensor (and what it needs) now. Returns *this.
  const Tensor& realize() const;
  bool is_realized() const;
  template <typename T>
  T item() const;  // the value of a one-element tensor, converted to T
  template <typename T>
  std::vector<T> to_vector() const;            // all elements in row-major order, converted to T
  void copy_to(void* dst, DType dtype) const;  // numel() elements of `dtype` into dst

  // ---- autograd --------------------------------------------------------------------------------
  bool requires_grad() const;
  Tensor& set_requires_grad(bool on = true);  // only on leaves (tensors that no op produced)
  // Gradient accumulated by backward() (empty Tensor when none yet).
  Tensor grad() const;
  void zero_grad();
  // Replaces the accumulated gradient (e.g. after clipping); `g` must have this tensor's shape.
  void set_grad(const Tensor& g);
  // Reverse mode from this tensor. A non-scalar needs an explicit upstream gradient `dy`.
  // The backward graph is freed afterwards unless retain_graph is true.
  void backward(const Tensor& dy = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same value, no history
  // Replaces this tensor's value (keeping its identity and requires_grad), e.g. for optimizers.
  // `value` must have the same shape; its dtype is cast to this tensor's dtype.
  void assign(const Tensor& value);
  const std::shared_ptr<GradFn>& grad_fn() const;
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

  // ---- elementwise (broadcasting) --------------------------------------------------------------
  Tensor operator-() const;
  Tensor neg() const { return -*this; }
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor abs() const;
  Tensor sign() const;  // -1, 0 or 1 in x's dtype (NaN stays NaN); its gradient is 0
  // Bool tests of each element (integers are never NaN or infinite): NumPy's isnan, isinf, isfinite.
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor isfinite() const;
  Tensor square() const;
  Tensor pow(double exponent) const;  // integer exponents by repeated squaring (exact for integers)
  // x^e elementwise, broadcast, as C's pow (a negative x needs an integer e, else NaN); integer and
  // bool operands compute in float32. Gradients for both (PyTorch's rules at x = 0 and e = 0).
  Tensor pow(const Tensor& exponent) const;
  // Rounding to whole numbers (integers and bool are returned as they are). round: ties to even.
  Tensor floor() const;
  Tensor ceil() const;
  Tensor trunc() const;  // toward zero
  Tensor round() const;
  // Division's integer part and remainder, broadcast, exact in every float dtype; bool is refused.
  // floor_divide is Python's // (rounds down), remainder Python's % (the divisor's sign: NumPy's
  // remainder), fmod C's (the dividend's sign). Integers: 0 where o = 0 (NumPy's value); floats:
  // // gives a / 0 (inf or NaN), % and fmod NaN. A scalar is in the tensor's float dtype, else float32.
  Tensor floor_divide(const Tensor& o) const;
  Tensor remainder(const Tensor& o) const;
  Tensor fmod(const Tensor& o) const;
  Tensor floor_divide(Scalar o) const;
  Tensor remainder(Scalar o) const;
  Tensor fmod(Scalar o) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor maximum(Scalar o) const;  // a number: the scalar rule below (an int keeps an int tensor int)
  Tensor minimum(Scalar o) const;
  Tensor clamp(Scalar lo, Scalar hi) const;
  // Truth values (x != 0, NaN is true), bool results, broadcast: NumPy's logical_not/and/or/xor.
  Tensor logical_not() const;
  Tensor logical_and(const Tensor& o) const;
  Tensor logical_or(const Tensor& o) const;
  Tensor logical_xor(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;  // bool results
  Tensor le(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor eq(Scalar o) const;  // against a number (integers compare exactly; a float with ints in float32)
  Tensor ne(Scalar o) const;
  Tensor cast(DType dtype) const;  // no-op when already of that dtype
  Tensor to(DType dtype) const { return cast(dtype); }
  Tensor to(Device device) const;

  // ---- activations (composites of primitives) ---------------------------------------------------
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;

  // ---- reductions (axes empty = all) ------------------------------------------------------------
  Tensor sum(const std::vector<int64_t>& axes = {}, bool keepdim = false) const;
  // The product (NumPy's prod; 1 over no elements): integers and bools in int64 (wrapping), floats in
  // their dtype; the last of the running products (cumprod), so its gradient is exact at zeros.
  Tensor prod(const std::vector<int64_t>& axes = {}, bool keepdim = false) const;
  Tensor max(const std::vector<int64_t>& axes = {}, bool keepdim = false) const;
  Tensor min(const std::vector<int64_t>& axes = {}, bool keepdim = false) const;
  Tensor mean(const std::vector<int64_t>& axes = {}, bool keepdim = false) const;
  // Variance with `correction` (0: population, 1: unbiased).
  Tensor var(const std::vector<int64_t>& axes = {}, bool keepdim = false, int correction = 0) const;
  Tensor std(const std::vector<int64_t>& axes = {}, bool keepdim = false,
             int correction = 0) const;                                           // sqrt(var)
  Tensor any(const std::vector<int64_t>& axes = {}, bool keepdim = false) const;  // bool: some element != 0
  Tensor all(const std::vector<int64_t>& axes = {}, bool keepdim = false) const;  // bool: no element == 0
  // log(sum(exp(x))) without overflow: the maximum is taken out first (rows of -inf give -inf, a +inf
  // gives +inf); floats in their compute dtype, integers as float32. Its gradient is the softmax.
  Tensor logsumexp(const std::vector<int64_t>& axes = {}, bool keepdim = false) const;
  Tensor argmax(int64_t axis, bool keepdim = false) const;  // int64 indices, first maximum wins
  Tensor argmin(int64_t axis, bool keepdim = false) const;  // int64 indices, first minimum wins

  // ---- movement (views; never copy, except reshape when it must) --------------------------------
  Tensor reshape(const Shape& shape) const;  // one dim may be -1
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor permute(const std::vector<int64_t>& perm) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor t() const { return transpose(-2, -1); }  // swaps the last two dims
  Tensor expand(const Shape& shape) const;        // NumPy broadcast to `shape`
  Tensor broadcast_to(const Shape& shape) const { return expand(shape); }
  // Elements start, start+step, ... < stop along `axis` (negative start/stop count from the end,
  // like Python; step >= 1, or negative for a reversed slice).
  Tensor slice(int64_t axis, int64_t start, int64_t stop, int64_t step = 1) const;
  Tensor pad(const std::vector<std::pair<int64_t, int64_t>>& pads) const;  // zeros, per dim
  Tensor flip(const std::vector<int64_t>& axes) const;
  Tensor squeeze(std::optional<int64_t> axis = std::nullopt) const;
  Tensor unsqueeze(int64_t axis) const;
  Tensor contiguous() const;  // a copy into a dense row-major buffer (only if not already)
  Tensor clone() const;       // a new tensor of the same value (a copy; the gradient passes through)
  // The elements at integer `indices` along `axis` (NumPy's take): shape[:axis] + indices.shape +
  // shape[axis+1:]. Negative indices count from the end; one outside [-n, n) is an error (kind
  // index) when the result is computed. A copy (the Gather primitive), not a view; its gradient sums
  // the rows of repeated indices.
  Tensor take(const Tensor& indices, int64_t axis = 0) const;
  // NumPy's take_along_axis (PyTorch's gather): `indices` has this tensor's ndim and broadcasts with
  // it in the other dims; along `axis`, result[.., k, ..] = this[.., indices[.., k, ..], ..]. Negative
  // indices and errors as take's; a copy (Gather), with take's gradient.
  Tensor take_along_axis(const Tensor& indices, int64_t axis) const;
  // PyTorch's index_add, as a new tensor: this float tensor plus `values` added along `axis` at
  // `indices` (1-D integers; negative from the end; repeats add up, in order). values has this
  // tensor's shape with indices' length along axis. The ScatterAdd primitive; the values' gradient
  // is a take of the result's.
  Tensor index_add(int64_t axis, const Tensor& indices, const Tensor& values) const;

  // ---- along one axis (src/ops/along_axis.cpp) --------------------------------------------------
  // Running sums (NumPy's cumsum): the same shape; floats in their dtype (summed in double: float64
  // as NumPy does, the others rounded once per sum), integers and bools in int64 (wrapping).
  Tensor cumsum(int64_t axis) const;
  // Running products (NumPy's cumprod), with cumsum's dtypes; the gradient divides by nothing, so it
  // is exact where elements are 0.
  Tensor cumprod(int64_t axis) const;
  // The int64 positions that sort each line along `axis`, stably (equal values keep their order). NaN
  // is the largest value: last ascending (NumPy's place), first descending (PyTorch's).
  Tensor argsort(int64_t axis = -1, bool descending = false) const;
  // {sorted values, their positions (argsort)}; the values' gradient goes back to where each came from.
  std::pair<Tensor, Tensor> sort(int64_t axis = -1, bool descending = false) const;
  // {the k largest (smallest) values along `axis`, in order, and their positions}; ties keep the
  // earlier position first. 0 <= k <= the axis's size.
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t axis = -1, bool largest = true) const;

  Tensor matmul(const Tensor& o) const;

 private:
  TensorImpl& checked() const;
  std::shared_ptr<TensorImpl> impl_;
};

// Number operands (aether/core/scalar.h): with a float tensor, a number of its dtype; with an integer
// or bool tensor, an integer of its dtype where the value fits (int32 + 1 stays int32; bools never)
// else int64, and a float float32 (NumPy's and PyTorch's rules for Python numbers).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, Scalar b);

Tensor pow(double base, const Tensor& exponent);  // base^e elementwise: Tensor(base).pow(e)
Tensor floor_divide(Scalar a, const Tensor& b);   // a // b elementwise
Tensor remainder(Scalar a, const Tensor& b);      // a % b elementwise
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor matmul(const Tensor& a, const Tensor& b);  // (..., M, K) x (..., K, N), batch dims broadcast
// NumPy's einsum: "ij,jk->ik", "bhqd,bhkd->bhqk", "...ij->...ji", "ii->i" (a diagonal), "ii" (a trace);
// without "->" the output is NumPy's (the letters used once, in ASCII order, after '...'). Size-1 dims
// broadcast. Made of matmul, products, sums and views (src/ops/einsum.cpp), so it is differentiable.
Tensor einsum(const std::string& subscripts, const std::vector<Tensor>& operands);
Tensor cat(const std::vector<Tensor>& tensors, int64_t axis = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t axis = 0);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Realizes several tensors in one schedule.
void realize(const std::vector<Tensor>& tensors);

// ---- autograd mode -------------------------------------------------------------------------------
bool grad_enabled();
// While alive, ops record no history (like torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// ---- internals shared with the graph layer ---------------------------------------------------------
struct TensorImpl {
  NodePtr node;
  bool requires_grad = false;
  std::shared_ptr<GradFn> grad_fn;   // set on tensors produced by a differentiable op
  std::shared_ptr<TensorImpl> grad;  // accumulated gradient (leaves)
};

}  // namespace aether
