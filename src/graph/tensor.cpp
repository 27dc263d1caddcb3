// Tensor handles: creation, properties, realization and copying data in and out.
#include "aether/graph/tensor.h"

#include <cmath>
#include <cstring>
#include <numbers>
#include <ostream>
#include <sstream>

#include "aether/core/random.h"
#include "aether/graph/autograd.h"
#include "aether/graph/primitives.h"
#include "aether/graph/realize.h"
#include "core/device_memory.h"  // copies between devices

namespace aether {

Tensor::Tensor(NodePtr node) : impl_(std::make_shared<TensorImpl>()) {
  AETHER_CHECK(node != nullptr, "Tensor", "null node");
  impl_->node = std::move(node);
}

TensorImpl& Tensor::checked() const {
  if (!impl_) throw Error("Tensor: use of an empty tensor (default-constructed or moved-from)");
  return *impl_;
}

// ---- creation -----------------------------------------------------------------------------------------
Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  return prim::constant(value, shape, dtype, device);
}
Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  return full(shape, 0.0, dtype, device);
}
Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}
Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::from_blob(const void* data, const Shape& shape, DType dtype) {
  check_shape(shape, "from_blob");
  auto buf = std::make_shared<Buffer>(Device::cpu(), dtype, aether::numel(shape));
  if (buf->nbytes() > 0) {
    AETHER_CHECK(data != nullptr, "from_blob", "null data pointer for ", aether::numel(shape), " elements");
    std::memcpy(buf->data(), data, size_t(buf->nbytes()));
  }
  Tensor t(make_load(std::move(buf), View::contiguous(shape)));
  const Device device = default_device();  // host data lands on the default device
  return device.type == DeviceType::cpu ? t : t.to(device);
}

Tensor Tensor::from_external(void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> owner) {
  check_shape(shape, "from_external");
  auto buf = std::make_shared<Buffer>(dtype, aether::numel(shape), data, std::move(owner));
  return Tensor(make_load(std::move(buf), View::contiguous(shape)));
}

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& data, const Shape& shape) {
  check_shape(shape, "from_vector");
  AETHER_CHECK(int64_t(data.size()) == aether::numel(shape), "from_vector", "got ", data.size(),
               " values for shape ", to_string(shape), " (", aether::numel(shape), " elements)");
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> is packed
    std::vector<uint8_t> bytes(data.begin(), data.end());
    return from_blob(bytes.data(), shape, DType::boolean);
  } else {
    return from_blob(data.data(), shape, dtype_of<T>());
  }
}

Tensor Tensor::arange(double start, double stop, double step, DType dtype) {
  AETHER_CHECK(step != 0 && std::isfinite(start) && std::isfinite(stop) && std::isfinite(step), "arange",
               "bad range start=", start, " stop=", stop, " step=", step);
  const int64_t n = std::max<int64_t>(0, int64_t(std::ceil((stop - start) / step)));
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + double(i) * step;
  return from_vector(v, {n}).cast(dtype).detach().realize();
}

Tensor Tensor::eye(int64_t n, int64_t m, DType dtype) {
  if (m < 0) m = n;
  AETHER_CHECK(n >= 0, "eye", "negative size ", n);
  std::vector<double> v(size_t(n * m), 0.0);
  for (int64_t i = 0; i < std::min(n, m); ++i) v[size_t(i * m + i)] = 1.0;
  return from_vector(v, {n, m}).cast(dtype).detach().realize();
}

Tensor Tensor::rand(const Shape& shape, DType dtype) {
  return prim::rand(shape, dtype, current_seed(), next_random_stream());
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, DType dtype) {
  return rand(shape, dtype) * (high - low) + low;
}

Tensor Tensor::randn(const Shape& shape, DType dtype) {
  AETHER_CHECK_DTYPE(is_float(dtype), "randn", "expected a float dtype, got ", dtype_name(dtype));
  // Box-Muller on two independent uniform draws; computed in float32/float64, then cast.
  const DType t = dtype == DType::float64 ? DType::float64 : DType::float32;
  const Tensor u1 = rand(shape, t), u2 = rand(shape, t);
  const Tensor r = ((1.0 - u1).log() * -2.0).sqrt();  // 1 - u1 is in (0, 1]
  return (r * (u2 * (2 * std::numbers::pi)).cos()).cast(dtype);
}

Tensor Tensor::randint(int64_t low, int64_t high, const Shape& shape, DType dtype) {
  AETHER_CHECK(high > low, "randint", "empty range [", low, ", ", high, ")");
  AETHER_CHECK_DTYPE(is_int(dtype), "randint", "expected an integer dtype, got ", dtype_name(dtype));
  const Tensor u = rand(shape, DType::float64);
  // Truncate u * n (>= 0, so truncation is floor) before adding low: truncating u * n + low toward
  // zero would fold (-1, 0) onto 0 and almost never give `low` when low < 0. The minimum guards
  // u * n rounding up to n.
  const double n = double(high - low);
  const Tensor k = (u * n).cast(DType::int64).minimum(Tensor::scalar(n - 1, DType::int64));
  return (k + Tensor::scalar(double(low), DType::int64)).cast(dtype);
}

// ---- properties -----------------------------------------------------------------------------------------
const Shape& Tensor::shape() const { return checked().node->shape; }
DType Tensor::dtype() const { return checked().node->dtype; }
Device Tensor::device() const { return checked().node->device; }
const NodePtr& Tensor::node() const { return checked().node; }
int64_t Tensor::size(int64_t axis) const { return shape()[normalize_axis(axis, ndim(), "size")]; }

std::string Tensor::str() const {
  if (!impl_) return "Tensor(empty)";
  return detail::cat("Tensor(shape=", to_string(shape()), ", dtype=", dtype_name(dtype()),
                     ", device=", device().str(), requires_grad() ? ", requires_grad" : "", ")");
}

// ---- realization -----------------------------------------------------------------------------------------
const Tensor& Tensor::realize() const {
  realize_nodes({node()});
  return *this;
}
void realize(const std::vector<Tensor>& tensors) {
  std::vector<NodePtr> nodes;
  for (const auto& t : tensors) nodes.push_back(t.node());
  realize_nodes(nodes);
}
bool Tensor::is_realized() const { return node()->realized(); }

void Tensor::copy_to(void* dst, DType dtype) const {
  Tensor src = detach();
  if (dtype != this->dtype()) src = prim::cast(src, dtype);
  src.realize();
  if (!src.node()->view.is_contiguous()) src = prim::unary(Op::Copy, src).realize();
  const Node& n = *src.node();
  const int64_t bytes = numel() * dtype_size(dtype);
  if (bytes <= 0) return;
  const char* from = n.first_element();
  if (n.buffer->on_host()) return (void)std::memcpy(dst, from, size_t(bytes));
  DeviceMemory* m = device_memory(n.buffer->device().type);
  AETHER_CHECK(m, "copy_to", str(), " is not in host memory and its device has no backend");
  m->copy(Device::cpu(), dst, n.buffer->device(), from, size_t(bytes));  // D2H, waits
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(static_cast<size_t>(numel()));
    copy_to(bytes.data(), DType::boolean);
    return std::vector<bool>(bytes.begin(), bytes.end());
  } else {
    std::vector<T> out(static_cast<size_t>(numel()));
    copy_to(out.data(), dtype_of<T>());
    return out;
  }
}

template <typename T>
T Tensor::item() const {
  AETHER_CHECK(numel() == 1, "item", "expected a one-element tensor, got shape ", to_string(shape()));
  return to_vector<T>()[0];
}

#define AETHER_X(name, str, type, bytes)                                             \
  template Tensor Tensor::from_vector<type>(const std::vector<type>&, const Shape&); \
  template std::vector<type> Tensor::to_vector<type>() const;                        \
  template type Tensor::item<type>() const;
AETHER_DTYPES(AETHER_X)
#undef AETHER_X

// ---- autograd plumbing
// --------------------------------------------------------------------------------------
bool Tensor::requires_grad() const { return checked().requires_grad; }
Tensor& Tensor::set_requires_grad(bool on) {
  auto& impl = checked();
  AETHER_CHECK(!impl.grad_fn, "set_requires_grad",
               "only leaf tensors can change requires_grad; this one was "
               "computed by ",
               op_name(impl.grad_fn->op), " (use detach())");
  AETHER_CHECK_DTYPE(!on || is_float(dtype()), "set_requires_grad",
                     "only float tensors can require grad, got ", dtype_name(dtype()));
  impl.requires_grad = on;
  return *this;
}
Tensor Tensor::grad() const {
  auto& impl = checked();
  return impl.grad ? Tensor(impl.grad->node) : Tensor();
}
void Tensor::zero_grad() { checked().grad.reset(); }
void Tensor::set_grad(const Tensor& g) {
  auto& impl = checked();
  AETHER_CHECK(g.shape() == shape(), "set_grad", "gradient has shape ", to_string(g.shape()), ", expected ",
               to_string(shape()));
  impl.grad = g.detach().impl();
}
Tensor Tensor::detach() const { return Tensor(node()); }
const std::shared_ptr<GradFn>& Tensor::grad_fn() const { return checked().grad_fn; }

void Tensor::assign(const Tensor& value) {
  auto& impl = checked();
  AETHER_CHECK(value.shape() == shape(), "assign", "value has shape ", to_string(value.shape()),
               ", expected ", to_string(shape()));
  AETHER_CHECK(value.device() == device(), "assign", "value is on ", value.device().str(), ", expected ",
               device().str());
  impl.node = value.cast(dtype()).node();
  impl.grad_fn.reset();
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  // The copy is made by the memory of the device that is not the host (D2D: the destination's).
  const DeviceType other = device.type != DeviceType::cpu ? device.type : this->device().type;
  DeviceMemory* m = device_memory(other);
  if (!m)
    throw Error(detail::cat("to: cannot move ", str(), " to ", device.str(), ": ", device_unavailable(other)),
                ErrorKind::runtime);
  // Realize where the value is, make it dense there, then one H2D / D2H / D2D copy of its bytes. The
  // result is a new leaf (no history), like detach().
  try {
    Tensor src = detach().realize();
    if (!src.node()->view.is_contiguous()) src = prim::unary(Op::Copy, src).realize();
    const Node& n = *src.node();
    auto buf = std::make_shared<Buffer>(device, dtype(), numel(), /*zero_fill=*/false);
    const size_t bytes = size_t(numel() * dtype_size(dtype()));
    if (bytes > 0) m->copy(device, buf->data(), n.buffer->device(), n.first_element(), bytes);
    return Tensor(make_load(std::move(buf), View::contiguous(shape())));
  } catch (const Error& e) {
    throw Error(detail::cat("to: cannot move ", str(), " to ", device.str(), ": ", e.what()), e.kind());
  }
}

}  // namespace aether
