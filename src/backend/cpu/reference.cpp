// The reference CPU backend: one primitive per kernel, plain loops, OpenMP where trivially safe.
//
// It is the oracle every faster path is tested against, so it favours clarity: every source is
// read through its View (index arithmetic, masks read as 0) in row-major order, every result goes
// to a fresh dense row-major buffer, except
// movement ops, which only make a new View of the source's buffer. Float math runs in the storage
// type's natural precision (float for float32/float16/bfloat16, double for float64) except sums,
// which accumulate in double. Library ops (matmul, conv, pooling) run the naive loops of
// reference_matmul.cpp, reference_conv.cpp and reference_pool.cpp: never oneDNN.
//
// The same code with the library ops on their fast versions (oneDNN for matmul and conv, pool.cpp's
// loops for pooling) is library_backend(): the fused
// executor runs its library kernels, views and fallbacks on it.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "aether/backend/backend.h"
#include "aether/core/error.h"
#include "aether/core/random.h"
#include "aether/graph/collective.h"
#include "kernels.h"
#include "strided.h"

namespace aether {
namespace {

// ---- element types ---------------------------------------------------------------------------------
using cpu::kIsFloatStorage;
// The type arithmetic on T happens in.
template <typename T>
using Compute = std::conditional_t<std::is_same_v<T, double>, double,
                                   std::conditional_t<kIsFloatStorage<T>, float, int64_t>>;

// Converts a computed value to storage type O with defined results everywhere (no UB):
// float -> int truncates toward zero, NaN gives 0, out-of-range saturates; anything -> bool is != 0.
template <typename O, typename C>
O convert(C v) {
  if constexpr (std::is_same_v<O, bool>) {
    return v != C(0);
  } else if constexpr (kIsFloatStorage<O>) {
    if constexpr (std::is_same_v<O, double>)
      return double(v);
    else if constexpr (std::is_same_v<O, float> || std::is_same_v<C, float>)
      return O(float(v));
    else
      return O(float_round_odd(double(v)));  // double or int64 -> 16-bit float: round once
  } else if constexpr (std::is_floating_point_v<C>) {
    if (v != v) return O(0);
    if (v <= C(std::numeric_limits<O>::lowest())) return std::numeric_limits<O>::lowest();
    if (v >= C(std::numeric_limits<O>::max())) return std::numeric_limits<O>::max();
    return O(v);
  } else {
    return O(v);  // int -> int: modular (defined since C++20)
  }
}
template <typename T>
Compute<T> load_as_compute(T v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    return float(v);
  else
    return Compute<T>(v);
}

// Reads element `idx` of a realized node as compute type C (masked-out elements read as 0).
template <typename T>
struct Reader {
  const T* base;
  const View* view;
  Compute<T> operator()(const int64_t* idx) const {
    const int64_t off = view->index(idx);
    return off < 0 ? Compute<T>(0) : load_as_compute(base[off]);
  }
};
template <typename T>
Reader<T> reader(const Node& n) {
  return {n.buffer->as<T>(), &n.view};
}

// Calls f(linear index, multi-index) for every element of `shape`, in parallel chunks.
template <typename F>
void for_each_index(const Shape& shape, F&& f) {
  const int64_t n = numel(shape);
  const int nd = int(shape.size());
  constexpr int64_t kChunk = 4096;
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (nchunks > 1)
  for (int64_t c = 0; c < nchunks; ++c) {
    int64_t idx[kMaxDims] = {0};
    int64_t lin = c * kChunk;
    const int64_t end = std::min(n, lin + kChunk);
    for (int64_t r = lin, d = nd - 1; d >= 0; --d) {
      idx[d] = r % shape[d];
      r /= shape[d];
    }
    for (; lin < end; ++lin) {
      f(lin, idx);
      for (int d = nd - 1; d >= 0; --d) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  }
}

BufferPtr new_buffer(const Node& n) { return std::make_shared<Buffer>(n.device, n.dtype, numel(n.shape)); }
void set_dense(Node& n, BufferPtr buf) { n.set_value(std::move(buf), View::contiguous(n.shape)); }

// ---- elementwise ------------------------------------------------------------------------------------
// out[i] = f(src0[i]) with out and src of the same dtype.
template <typename F>
void unary(Node& n, F f) {
  auto out = new_buffer(n);
  dispatch_dtype(n.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out->as<T>();
    const Node& src = *n.srcs[0];
    const std::array<const View*, 1> views{&src.view};
    if (!cpu::any_masked(views)) {  // fast path: strided rows
      const auto plan = cpu::plan_rows(n.shape, views);
      const T* s = src.buffer->as<T>();
      const int64_t st = plan.inner_stride(0);
      cpu::for_each_row(plan, [&](int64_t o0, int64_t len, const std::array<int64_t, 1>& off) {
        const T* p = s + off[0];
        T* q = o + o0;
        if (st == 1) {
          for (int64_t j = 0; j < len; ++j) q[j] = convert<T>(f(load_as_compute(p[j])));
        } else {
          for (int64_t j = 0; j < len; ++j) q[j] = convert<T>(f(load_as_compute(p[j * st])));
        }
      });
      return;
    }
    auto in = reader<T>(src);
    for_each_index(n.shape, [&](int64_t i, const int64_t* idx) { o[i] = convert<T>(f(in(idx))); });
  });
  set_dense(n, std::move(out));
}

void cast(Node& n) {
  auto out = new_buffer(n);
  const Node& src = *n.srcs[0];
  const std::array<const View*, 1> views{&src.view};
  dispatch_dtype(src.dtype, [&](auto stag) {
    using S = decltype(stag);
    dispatch_dtype(n.dtype, [&](auto otag) {
      using O = decltype(otag);
      O* o = out->as<O>();
      if (!cpu::any_masked(views)) {
        const auto plan = cpu::plan_rows(n.shape, views);
        const S* s = src.buffer->as<S>();
        const int64_t st = plan.inner_stride(0);
        cpu::for_each_row(plan, [&](int64_t o0, int64_t len, const std::array<int64_t, 1>& off) {
          for (int64_t j = 0; j < len; ++j) o[o0 + j] = convert<O>(load_as_compute(s[off[0] + j * st]));
        });
        return;
      }
      auto in = reader<S>(src);
      for_each_index(n.shape, [&](int64_t i, const int64_t* idx) { o[i] = convert<O>(in(idx)); });
    });
  });
  set_dense(n, std::move(out));
}

// out[i] = f(a[i], b[i]); a and b share a dtype; out is that dtype, or bool for the comparisons
// (kBoolResult: graph/primitives.cpp gives their nodes that dtype). Only those two output types are
// instantiated: 8 per op, not the 64 of every (source, output) pair.
template <bool kBoolOut, typename F>
void binary(Node& n, F f) {
  auto out = new_buffer(n);
  const Node &na = *n.srcs[0], &nb = *n.srcs[1];
  AETHER_CHECK_DTYPE(n.dtype == (kBoolOut ? DType::boolean : na.dtype) && nb.dtype == na.dtype, "reference",
                     op_name(n.op), " of ", dtype_name(na.dtype), " and ", dtype_name(nb.dtype),
                     " cannot give ", dtype_name(n.dtype));
  const std::array<const View*, 2> views{&na.view, &nb.view};
  dispatch_dtype(na.dtype, [&](auto tag) {
    using T = decltype(tag);
    using O = std::conditional_t<kBoolOut, bool, T>;
    O* o = out->as<O>();
    if (!cpu::any_masked(views)) {
      const auto plan = cpu::plan_rows(n.shape, views);
      const T *sa = na.buffer->as<T>(), *sb = nb.buffer->as<T>();
      const int64_t ta = plan.inner_stride(0), tb = plan.inner_stride(1);
      cpu::for_each_row(plan, [&](int64_t o0, int64_t len, const std::array<int64_t, 2>& off) {
        const T *pa = sa + off[0], *pb = sb + off[1];
        O* q = o + o0;
        // The common layouts get loops the compiler vectorises: both dense, or one broadcast.
        if (ta == 1 && tb == 1) {
          for (int64_t j = 0; j < len; ++j)
            q[j] = convert<O>(f(load_as_compute(pa[j]), load_as_compute(pb[j])));
        } else if (ta == 1 && tb == 0) {
          const auto vb = load_as_compute(pb[0]);
          for (int64_t j = 0; j < len; ++j) q[j] = convert<O>(f(load_as_compute(pa[j]), vb));
        } else if (ta == 0 && tb == 1) {
          const auto va = load_as_compute(pa[0]);
          for (int64_t j = 0; j < len; ++j) q[j] = convert<O>(f(va, load_as_compute(pb[j])));
        } else {
          for (int64_t j = 0; j < len; ++j)
            q[j] = convert<O>(f(load_as_compute(pa[j * ta]), load_as_compute(pb[j * tb])));
        }
      });
      return;
    }
    auto a = reader<T>(na);
    auto b = reader<T>(nb);
    for_each_index(n.shape, [&](int64_t i, const int64_t* idx) { o[i] = convert<O>(f(a(idx), b(idx))); });
  });
  set_dense(n, std::move(out));
}

void where(Node& n) {
  auto out = new_buffer(n);
  const Node &nc = *n.srcs[0], &na = *n.srcs[1], &nb = *n.srcs[2];
  const std::array<const View*, 3> views{&nc.view, &na.view, &nb.view};
  dispatch_dtype(n.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out->as<T>();
    if (!cpu::any_masked(views)) {
      const auto plan = cpu::plan_rows(n.shape, views);
      const bool* sc = nc.buffer->as<bool>();
      const T *sa = na.buffer->as<T>(), *sb = nb.buffer->as<T>();
      const int64_t tc = plan.inner_stride(0), ta = plan.inner_stride(1), tb = plan.inner_stride(2);
      cpu::for_each_row(plan, [&](int64_t o0, int64_t len, const std::array<int64_t, 3>& off) {
        const bool* pc = sc + off[0];
        const T *pa = sa + off[1], *pb = sb + off[2];
        T* q = o + o0;
        if (tc == 1 && ta == 0 && tb == 1) {  // relu's backward: x <= 0 ? 0 : dy
          const auto va = load_as_compute(pa[0]);
          for (int64_t j = 0; j < len; ++j) q[j] = convert<T>(pc[j] ? va : load_as_compute(pb[j]));
        } else if (tc == 1 && ta == 1 && tb == 0) {
          const auto vb = load_as_compute(pb[0]);
          for (int64_t j = 0; j < len; ++j) q[j] = convert<T>(pc[j] ? load_as_compute(pa[j]) : vb);
        } else {
          for (int64_t j = 0; j < len; ++j)
            q[j] = convert<T>(pc[j * tc] ? load_as_compute(pa[j * ta]) : load_as_compute(pb[j * tb]));
        }
      });
      return;
    }
    auto c = reader<bool>(nc);
    auto a = reader<T>(na);
    auto b = reader<T>(nb);
    for_each_index(n.shape,
                   [&](int64_t i, const int64_t* idx) { o[i] = convert<T>(c(idx) ? a(idx) : b(idx)); });
  });
  set_dense(n, std::move(out));
}

// Integer arithmetic wraps (two's complement) instead of overflowing into UB.
template <typename C>
C wrap_add(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return C(uint64_t(a) + uint64_t(b));
  else
    return a + b;
}
template <typename C>
C wrap_sub(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return C(uint64_t(a) - uint64_t(b));
  else
    return a - b;
}
template <typename C>
C wrap_mul(C a, C b) {
  if constexpr (std::is_integral_v<C>)
    return C(uint64_t(a) * uint64_t(b));
  else
    return a * b;
}
template <typename C>
C safe_div(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == 0) return 0;  // integer division by zero gives 0 (documented), never a trap
    if (b == -1) return C(uint64_t(0) - uint64_t(a));
    return a / b;
  } else {
    return a / b;
  }
}
// C's fmod (exact: a - trunc(a / b) b, the sign of a); integer b = 0 gives 0, like safe_div.
template <typename C>
C safe_fmod(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == 0 || b == -1) return 0;  // -1: INT_MIN % -1 traps
    return a % b;
  } else {
    return std::fmod(a, b);
  }
}
template <typename C>
C nan_max(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a > b ? a : b;
}

// ---- reductions -------------------------------------------------------------------------------------
// out (keepdim shape) = reduce of src over `axes`.
void reduce(Node& n, bool is_max) {
  const Node& src = *n.srcs[0];
  const auto& axes = std::get<Axes>(n.arg);
  Shape rshape(src.shape.size(), 1);  // the reduced sub-space
  for (int a : axes) rshape[a] = src.shape[a];
  const int64_t rcount = numel(rshape);
  const int nd = int(src.shape.size());
  auto out = new_buffer(n);
  const int64_t out_n = numel(n.shape);
  dispatch_dtype(n.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    using Acc = std::conditional_t<std::is_floating_point_v<C>, double, C>;
    const Acc init = is_max ? (std::numeric_limits<Acc>::has_infinity ? -std::numeric_limits<Acc>::infinity()
                                                                      : std::numeric_limits<Acc>::lowest())
                            : Acc(0);
    T* o = out->as<T>();
    if (!src.view.mask && out_n <= 4096 && rcount > 1 && numel(src.shape) > 0) {
      // Fast path for few outputs (batch-norm statistics, bias gradients, losses): walk the input
      // in strided rows; each fixed block of rows accumulates into its own partial outputs, and
      // the partials are combined in block order, so the result does not depend on threads.
      View ov = View::contiguous(n.shape);
      for (int a : axes) ov.strides[size_t(a)] = 0;  // every reduced index lands on one output
      const std::array<const View*, 2> views{&src.view, &ov};
      const auto plan = cpu::plan_rows(src.shape, views);
      const int64_t inner = plan.inner(), rows = numel(plan.shape) / inner;
      const int64_t nblocks = std::min<int64_t>(rows, 64);
      const int64_t per = (rows + nblocks - 1) / nblocks;
      std::vector<Acc> partial(size_t(nblocks * out_n), init);
      const T* s = src.buffer->as<T>();
      const int64_t ti = plan.inner_stride(0), to = plan.inner_stride(1);
      const int nd = int(plan.shape.size());
#pragma omp parallel for schedule(static) if (nblocks > 1)
      for (int64_t b = 0; b < nblocks; ++b) {
        Acc* acc = partial.data() + b * out_n;
        const int64_t r0 = b * per, r1 = std::min(rows, r0 + per);
        for (int64_t r = r0; r < r1; ++r) {
          int64_t oi = 0, oo = 0;  // offsets of row r in the input and in the output
          for (int64_t q = r, d = nd - 2; d >= 0; --d) {
            const int64_t i = q % plan.shape[size_t(d)];
            q /= plan.shape[size_t(d)];
            oi += i * plan.strides[0][size_t(d)];
            oo += i * plan.strides[1][size_t(d)];
          }
          const T* p = s + plan.offsets[0] + oi;
          if (to == 0) {  // the whole row reduces into one output
            Acc a = acc[oo];
            for (int64_t j = 0; j < inner; ++j) {
              const Acc v = Acc(load_as_compute(p[j * ti]));
              a = is_max ? nan_max(a, v) : wrap_add(a, v);
            }
            acc[oo] = a;
          } else {
            for (int64_t j = 0; j < inner; ++j) {
              const Acc v = Acc(load_as_compute(p[j * ti]));
              Acc& a = acc[oo + j * to];
              a = is_max ? nan_max(a, v) : wrap_add(a, v);
            }
          }
        }
      }
      for (int64_t i = 0; i < out_n; ++i) {
        Acc a = partial[size_t(i)];
        for (int64_t b = 1; b < nblocks; ++b) {
          const Acc v = partial[size_t(b * out_n + i)];
          a = is_max ? nan_max(a, v) : wrap_add(a, v);
        }
        o[i] = convert<T>(a);
      }
      return;
    }
    auto in = reader<T>(src);
    for_each_index(n.shape, [&](int64_t i, const int64_t* oidx) {
      int64_t idx[kMaxDims];
      int64_t ridx[kMaxDims] = {0};
      Acc acc = init;
      for (int64_t r = 0; r < rcount; ++r) {
        for (int d = 0; d < nd; ++d) idx[d] = oidx[d] + ridx[d];
        const Acc v = Acc(in(idx));
        acc = is_max ? nan_max(acc, v) : wrap_add(acc, v);
        for (int d = nd - 1; d >= 0; --d) {
          if (++ridx[d] < rshape[d]) break;
          ridx[d] = 0;
        }
      }
      o[i] = convert<T>(acc);
    });
  });
  set_dense(n, std::move(out));
}

// ---- sources ------------------------------------------------------------------------------------------
void constant(Node& n) {
  auto buf = std::make_shared<Buffer>(n.device, n.dtype, 1);
  const double v = std::get<double>(n.arg);
  dispatch_dtype(n.dtype, [&](auto tag) {
    using T = decltype(tag);
    buf->as<T>()[0] = convert<T>(v);
  });
  View view;
  view.shape = n.shape;
  view.strides.assign(n.shape.size(), 0);
  n.set_value(std::move(buf), std::move(view));
}

void rand_uniform(Node& n) {
  const auto r = std::get<RandArg>(n.arg);
  auto out = new_buffer(n);
  const int64_t count = numel(n.shape);
  if (n.dtype == DType::float64) {
    double* o = out->as<double>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < count; ++i) o[i] = philox_uniform_f64(r.seed, r.stream, uint64_t(i));
  } else {
    dispatch_dtype(n.dtype, [&](auto tag) {
      using T = decltype(tag);
      T* o = out->as<T>();
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < count; ++i) {
        // Keep exactly as many random bits as T's significand holds, so every value is exact
        // and below 1: 24 for float32, 11 for float16, 8 for bfloat16 (ints get 0).
        constexpr int bits = std::is_same_v<T, half> ? 11 : std::is_same_v<T, bfloat16> ? 8 : 24;
        const uint32_t r32 = philox_bits(r.seed, r.stream, uint64_t(i))[0] >> (32 - bits);
        o[i] = convert<T>(float(r32) * (1.0f / float(1u << bits)));
      }
    });
  }
  set_dense(n, std::move(out));
}

// ---- movement: a new View of the source's buffer -------------------------------------------------------
// A dense row-major copy of a realized node's value (used when a view cannot express the result,
// and to feed library calls).
BufferPtr dense_copy(const Node& src) {
  auto out = std::make_shared<Buffer>(src.device, src.dtype, numel(src.shape));
  dispatch_dtype(src.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* base = src.buffer->as<T>();
    T* o = out->as<T>();
    for_each_index(src.shape, [&](int64_t i, const int64_t* idx) {
      const int64_t off = src.view.index(idx);
      o[i] = off < 0 ? T{} : base[off];
    });
  });
  return out;
}

void movement(Node& n) {
  const Node& src = *n.srcs[0];
  const View& v = src.view;
  switch (n.op) {
    case Op::Reshape: {
      if (auto nv = v.reshape(n.shape)) {
        n.set_value(src.buffer, *nv);
      } else {  // the dims cannot be regrouped in place: copy once, then view
        n.set_value(dense_copy(src), View::contiguous(n.shape));
      }
      return;
    }
    case Op::Permute: {
      const auto& ax = std::get<Axes>(n.arg);
      n.set_value(src.buffer, v.permute(ax));
      return;
    }
    case Op::Expand: n.set_value(src.buffer, v.expand(n.shape)); return;
    case Op::Slice: {
      const auto& s = std::get<SliceArg>(n.arg);
      n.set_value(src.buffer, v.slice(s.start, s.stop, s.step));
      return;
    }
    case Op::Pad: {
      const auto& p = std::get<PadArg>(n.arg);
      n.set_value(src.buffer, v.pad(p.before, p.after));
      return;
    }
    case Op::Flip: {
      const auto& ax = std::get<Axes>(n.arg);
      n.set_value(src.buffer, v.flip(ax));
      return;
    }
      AETHER_SOURCE_OPS(AETHER_OP_CASE)
      AETHER_ELEMENTWISE_OPS(AETHER_OP_CASE)
      AETHER_REDUCE_OPS(AETHER_OP_CASE)
      AETHER_LIBRARY_OPS(AETHER_OP_CASE)
      throw Error(detail::cat("reference: ", op_name(n.op), " is not a movement op"));
  }
}

// ---- library ops ---------------------------------------------------------------------------------------
// The source's elements as a dense row-major array (no copy when the view already is one).
struct Dense {
  BufferPtr keep;
  const void* ptr;
};
Dense in_place(const Node& src) {  // the view's first element, in its buffer
  return {src.buffer, src.first_element()};
}
Dense dense(const Node& src) {
  if (src.view.is_contiguous()) return in_place(src);
  auto c = dense_copy(src);
  return {c, c->data()};
}

// Whether a (B,R,C) operand's view is each batch's matrix stored transposed, batches dense: strides
// (R*C, 1, R), the layout of x.transpose(-2, -1) for a row-major x (B,C,R). oneDNN reads it in place.
bool transposed_matrices(const View& v) {
  if (v.mask || v.ndim() != 3) return false;
  const int64_t b = v.shape[0], r = v.shape[1], c = v.shape[2];  // (a single row or column is not)
  return r > 1 && c > 1 && v.strides[1] == 1 && v.strides[2] == r && (b == 1 || v.strides[0] == r * c);
}

// Library ops run the oracle loops, or with `fast` (library_backend()) oneDNN where it takes them,
// reading transposed views in place (a linear layer's x @ w^T, its backward's x^T @ dy).
void matmul(Node& n, bool fast) {
  const bool use_onednn = fast && library_impl() == LibraryImpl::onednn;
  const Node &a = *n.srcs[0], &b = *n.srcs[1];
  const int64_t B = a.shape[0], M = a.shape[1], K = a.shape[2], N = b.shape[2];
  // (B,M,N): every element written, except when there is nothing to sum (K == 0): then the zeros
  const bool empty = B * M * N == 0 || K == 0;
  auto out = std::make_shared<Buffer>(n.device, n.dtype, B * M * N, /*zero_fill=*/empty);
  if (empty) return set_dense(n, std::move(out));  // oneDNN traps on empty shapes
  const bool ta = use_onednn && transposed_matrices(a.view), tb = use_onednn && transposed_matrices(b.view);
  Dense da = ta ? in_place(a) : dense(a), db = tb ? in_place(b) : dense(b);
  if (use_onednn && cpu::matmul_onednn(n.dtype, da.ptr, db.ptr, out->data(), B, M, K, N, ta, tb))
    return set_dense(n, std::move(out));
  if (ta) da = dense(a);  // the loops read row-major operands
  if (tb) db = dense(b);
  cpu::matmul_naive(n.dtype, da.ptr, db.ptr, out->data(), B, M, K, N);
  set_dense(n, std::move(out));
}

ConvGeom conv_geom(const Shape& x, const Shape& w, const Shape& y, const Conv2dArg& arg) {
  return {x[0], x[1], x[2], x[3], w[0], w[1], w[2], y[1], y[2], arg};
}
PoolGeom pool_geom(const Shape& x, const Shape& y, const Pool2dArg& arg) {
  return {x[0], x[1], x[2], x[3], y[1], y[2], arg};
}

void library(Node& n, bool fast) {
  const bool use_onednn = fast && library_impl() == LibraryImpl::onednn;
  // Every library kernel writes each output element, so the block is not zero-filled first.
  auto out = std::make_shared<Buffer>(n.device, n.dtype, numel(n.shape), /*zero_fill=*/false);
  const DType t = n.dtype;
  switch (n.op) {
    case Op::Conv2d: {  // srcs: x, w
      const auto g = conv_geom(n.srcs[0]->shape, n.srcs[1]->shape, n.shape, std::get<Conv2dArg>(n.arg));
      auto x = dense(*n.srcs[0]), w = dense(*n.srcs[1]);
      if (!(use_onednn && cpu::conv2d_fwd_onednn(t, x.ptr, w.ptr, out->data(), g, w.keep)))
        cpu::conv2d_fwd_naive(t, x.ptr, w.ptr, out->data(), g);
      break;
    }
    case Op::Conv2dBwdData: {  // srcs: dy, w; node shape = x shape
      const auto g = conv_geom(n.shape, n.srcs[1]->shape, n.srcs[0]->shape, std::get<Conv2dArg>(n.arg));
      auto dy = dense(*n.srcs[0]), w = dense(*n.srcs[1]);
      if (!(use_onednn && cpu::conv2d_bwd_data_onednn(t, dy.ptr, w.ptr, out->data(), g, w.keep)))
        cpu::conv2d_bwd_data_naive(t, dy.ptr, w.ptr, out->data(), g);
      break;
    }
    case Op::Conv2dBwdWeight: {  // srcs: x, dy; node shape = w shape
      const auto g = conv_geom(n.srcs[0]->shape, n.shape, n.srcs[1]->shape, std::get<Conv2dArg>(n.arg));
      auto x = dense(*n.srcs[0]), dy = dense(*n.srcs[1]);
      if (!(use_onednn && cpu::conv2d_bwd_weight_library(t, x.ptr, dy.ptr, out->data(), g)))
        cpu::conv2d_bwd_weight_naive(t, x.ptr, dy.ptr, out->data(), g);
      break;
    }
    case Op::MaxPool2d: {
      const auto g = pool_geom(n.srcs[0]->shape, n.shape, std::get<Pool2dArg>(n.arg));
      auto x = dense(*n.srcs[0]);
      if (fast)
        cpu::maxpool2d_fwd(t, x.ptr, out->data(), g);
      else
        cpu::maxpool2d_fwd_naive(t, x.ptr, out->data(), g);
      break;
    }
    case Op::MaxPool2dBwd: {  // srcs: x, dy
      const auto g = pool_geom(n.srcs[0]->shape, n.srcs[1]->shape, std::get<Pool2dArg>(n.arg));
      auto x = dense(*n.srcs[0]), dy = dense(*n.srcs[1]);
      if (fast)
        cpu::maxpool2d_bwd(t, x.ptr, dy.ptr, out->data(), g);
      else
        cpu::maxpool2d_bwd_naive(t, x.ptr, dy.ptr, out->data(), g);
      break;
    }
    case Op::AvgPool2d: {
      const auto g = pool_geom(n.srcs[0]->shape, n.shape, std::get<Pool2dArg>(n.arg));
      auto x = dense(*n.srcs[0]);
      if (fast)
        cpu::avgpool2d_fwd(t, x.ptr, out->data(), g);
      else
        cpu::avgpool2d_fwd_naive(t, x.ptr, out->data(), g);
      break;
    }
    case Op::AllReduce: {  // src: x (any shape) -> its sum over the group's ranks
      auto x = dense(*n.srcs[0]);
      const size_t bytes = size_t(numel(n.shape)) * dtype_size(t);
      if (bytes > 0) std::memcpy(out->data(), x.ptr, bytes);
      run_all_reduce(std::get<CollectiveArg>(n.arg).group, out->data(), size_t(numel(n.shape)), t);
      break;
    }
    case Op::AvgPool2dBwd: {  // src: dy; node shape = x shape
      const auto g = pool_geom(n.shape, n.srcs[0]->shape, std::get<Pool2dArg>(n.arg));
      auto dy = dense(*n.srcs[0]);
      if (fast)
        cpu::avgpool2d_bwd(t, dy.ptr, out->data(), g);
      else
        cpu::avgpool2d_bwd_naive(t, dy.ptr, out->data(), g);
      break;
    }
    case Op::Gather: {  // srcs: x (B,N,D), idx (B,M) -> (B,M,D)
      auto x = dense(*n.srcs[0]), idx = dense(*n.srcs[1]);
      const Shape& xs = n.srcs[0]->shape;
      cpu::gather_rows(t, x.ptr, static_cast<const int64_t*>(idx.ptr), out->data(),
                       {xs[0], xs[1], n.shape[1], n.shape[2]});
      break;
    }
    case Op::ScatterAdd: {  // srcs: dy (B,M,D), idx (B,M) -> (B,N,D)
      auto dy = dense(*n.srcs[0]), idx = dense(*n.srcs[1]);
      cpu::scatter_add_rows(t, dy.ptr, static_cast<const int64_t*>(idx.ptr), out->data(),
                            {n.shape[0], n.shape[1], n.srcs[0]->shape[1], n.shape[2]});
      break;
    }
    case Op::Cumsum: {  // src: x (N,L) -> (N,L)
      auto x = dense(*n.srcs[0]);
      cpu::cumsum_rows(t, x.ptr, out->data(), n.shape[0], n.shape[1]);
      break;
    }
    case Op::Cumprod: {  // src: x (N,L) -> (N,L)
      auto x = dense(*n.srcs[0]);
      cpu::cumprod_rows(t, x.ptr, out->data(), n.shape[0], n.shape[1]);
      break;
    }
    case Op::CumprodBwd: {  // srcs: x (N,L), dy (N,L) -> dx (N,L)
      auto x = dense(*n.srcs[0]), dy = dense(*n.srcs[1]);
      cpu::cumprod_bwd_rows(t, x.ptr, dy.ptr, out->data(), n.shape[0], n.shape[1]);
      break;
    }
    case Op::Argsort: {  // src: x (N,L) -> (N,K) int64
      auto x = dense(*n.srcs[0]);
      const auto& a = std::get<SortArg>(n.arg);
      cpu::argsort_rows(n.srcs[0]->dtype, x.ptr, static_cast<int64_t*>(out->data()), n.shape[0],
                        n.srcs[0]->shape[1], a.k, a.descending);
      break;
    }
    case Op::Matmul:  // computed by matmul()
      AETHER_SOURCE_OPS(AETHER_OP_CASE)
      AETHER_ELEMENTWISE_OPS(AETHER_OP_CASE)
      AETHER_REDUCE_OPS(AETHER_OP_CASE)
      AETHER_MOVEMENT_OPS(AETHER_OP_CASE)
      throw Error(detail::cat("reference: ", op_name(n.op), " is not a library op"));
  }
  set_dense(n, std::move(out));
}

// ---- dispatch: one case per primitive (a new op fails to compile until handled here) --------------------
void execute_node(Node& n, bool fast) {
  switch (n.op) {
    case Op::Load: AETHER_CHECK(n.realized(), "reference", "Load node ", n.id, " has no buffer"); return;
    case Op::Const: return constant(n);
    case Op::Rand: return rand_uniform(n);
    case Op::Cast:
      return cast(n);
      // The elementwise rows' reference expressions (aether/graph/op.h), in the compute type.
#define AETHER_X(name, kind, nsrc, props, ref, ...) \
  case Op::name: return unary(n, [](auto a) { return ref; });
      AETHER_UNARY_OPS(AETHER_X)
#undef AETHER_X
#define AETHER_X(name, kind, nsrc, props, ref, ...) \
  case Op::name: return binary<((props)&kBoolResult) != 0>(n, [](auto a, auto b) { return ref; });
      AETHER_BINARY_OPS(AETHER_X)
#undef AETHER_X
    case Op::Where: return where(n);
    case Op::ReduceSum: return reduce(n, false);
    case Op::ReduceMax: return reduce(n, true);
    case Op::Reshape:
    case Op::Permute:
    case Op::Expand:
    case Op::Slice:
    case Op::Pad:
    case Op::Flip: return movement(n);
    case Op::Matmul: return matmul(n, fast);
    case Op::Conv2d:
    case Op::Conv2dBwdData:
    case Op::Conv2dBwdWeight:
    case Op::MaxPool2d:
    case Op::MaxPool2dBwd:
    case Op::AvgPool2d:
    case Op::AvgPool2dBwd:
    case Op::AllReduce:
    case Op::Gather:
    case Op::ScatterAdd:
    case Op::Cumsum:
    case Op::Cumprod:
    case Op::CumprodBwd:
    case Op::Argsort: return library(n, fast);
  }
}

// What one node moves and computes, for the profile: bytes read and written (0 for views), and the
// FLOPs of matmul and convolution (2 per multiply-add).
std::pair<double, double> node_cost(const Node& n) {
  if (op_kind(n.op) == OpKind::Movement) return {0.0, 0.0};
  double bytes = double(numel(n.shape) * int64_t(dtype_size(n.dtype)));
  for (const auto& src : n.srcs) bytes += double(numel(src->shape) * int64_t(dtype_size(src->dtype)));
  auto window = [](const Shape& w) { return double(w[1] * w[2] * w[3]); };  // w (O,KH,KW,C/groups)
  double flops = 0;
  switch (n.op) {
    case Op::Matmul:
      flops = 2.0 * double(numel(n.shape)) * double(n.srcs[0]->shape.back());
      break;                                                                                  // (.., M, K)
    case Op::Conv2d: flops = 2.0 * double(numel(n.shape)) * window(n.srcs[1]->shape); break;  // y * window
    case Op::Conv2dBwdData:
      flops = 2.0 * double(numel(n.srcs[0]->shape)) * window(n.srcs[1]->shape);
      break;                                                                                           // dy
    case Op::Conv2dBwdWeight: flops = 2.0 * double(numel(n.srcs[1]->shape)) * window(n.shape); break;  // dy
    case Op::MaxPool2d:  // comparisons and additions: counted as bytes only
    case Op::MaxPool2dBwd:
    case Op::AvgPool2d:
    case Op::AvgPool2dBwd:
    case Op::AllReduce:
    case Op::Gather:
    case Op::ScatterAdd:
    case Op::Cumsum:
    case Op::Cumprod:
    case Op::CumprodBwd:
    case Op::Argsort:
      AETHER_SOURCE_OPS(AETHER_OP_CASE)
      AETHER_ELEMENTWISE_OPS(AETHER_OP_CASE)
      AETHER_REDUCE_OPS(AETHER_OP_CASE)
      AETHER_MOVEMENT_OPS(AETHER_OP_CASE)
      break;
  }
  return {bytes, flops};
}

class ReferenceBackend final : public Backend {
 public:
  explicit ReferenceBackend(bool fast) : fast_(fast) {}
  const char* name() const override { return fast_ ? "cpu-library" : "cpu-reference"; }
  Device device() const override { return Device::cpu(); }
  void execute(const std::vector<Node*>& nodes) override {
    for (Node* n : nodes) {
      for (const auto& s : n->srcs)
        AETHER_CHECK(s->realized(), "reference", "source ", s->id, " of ", op_name(n->op), " node ", n->id,
                     " is not realized (nodes out of order)");
      if (profiling_enabled()) {
        const auto [bytes, flops] = node_cost(*n);  // before: a computed node drops its sources
        const auto t0 = std::chrono::steady_clock::now();
        execute_node(*n, fast_);
        record_op_time(op_name(n->op),
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                       numel(n->shape), bytes, flops);
      } else {
        execute_node(*n, fast_);
      }
    }
  }

 private:
  bool fast_;
};

}  // namespace

Backend& reference_backend() {
  static ReferenceBackend b(/*fast=*/false);
  return b;
}

Backend& library_backend() {
  static ReferenceBackend b(/*fast=*/true);
  return b;
}

}  // namespace aether
