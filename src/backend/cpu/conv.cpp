// 2-D convolution on the CPU: the naive loops (the test oracle, every float dtype) and oneDNN
// (float32 and bfloat16, where this CPU's oneDNN build supports them).
//
// Layouts (see kernels.h): x (N,H,W,C) NHWC, w (O,KH,KW,C/G) OHWI, y (N,OH,OW,O) NHWC, G = groups.
// Output channel o belongs to group g = o / (O/G) and reads input channels [g*C/G, (g+1)*C/G).
// Input row of output row oh and kernel row kh: ih = oh*stride_h - pad_top + kh*dil_h (same for w);
// positions outside [0, H) x [0, W) are padding and read as 0.
#include <array>
#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "kernels.h"

namespace aether::cpu {
namespace {

// Arithmetic type of a storage type: double for float64, float for float32/float16/bfloat16.
template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Below this many multiply-adds one thread beats waking a team (tests run many tiny convs).
constexpr int64_t kParallelWork = int64_t(1) << 15;
bool parallel_worth_it(const ConvGeom& g) {
  return g.N * g.OH * g.OW * g.O * g.KH * g.KW * (g.C / g.arg.groups) >= kParallelWork;
}

}  // namespace

// ---- naive loops --------------------------------------------------------------------------------

void conv2d_fwd_naive(DType dtype, const void* x, const void* w, void* y, const ConvGeom& g) {
  dispatch_float(dtype, "conv2d", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* X = static_cast<const T*>(x);   // (N,H,W,C)
    const T* Wt = static_cast<const T*>(w);  // (O,KH,KW,Cg)
    T* Y = static_cast<T*>(y);               // (N,OH,OW,O)
    const Conv2dArg& a = g.arg;
    const int64_t Cg = g.C / a.groups, Og = g.O / a.groups;
    const bool par = parallel_worth_it(g);
#pragma omp parallel for collapse(2) schedule(static) if (par)
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t o = 0; o < g.O; ++o) {
            const int64_t grp = o / Og;
            A acc = 0;
            for (int64_t kh = 0; kh < g.KH; ++kh) {
              const int64_t ih = oh * a.stride_h - a.pad_top + kh * a.dil_h;
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t iw = ow * a.stride_w - a.pad_left + kw * a.dil_w;
                if (iw < 0 || iw >= g.W) continue;
                const T* xp = X + ((n * g.H + ih) * g.W + iw) * g.C + grp * Cg;  // (Cg)
                const T* wp = Wt + ((o * g.KH + kh) * g.KW + kw) * Cg;           // (Cg)
                for (int64_t c = 0; c < Cg; ++c) acc += A(xp[c]) * A(wp[c]);
              }
            }
            Y[((n * g.OH + oh) * g.OW + ow) * g.O + o] = T(acc);
          }
  });
}

// dx[n,ih,iw,ci] = sum over (kh, kw, o in ci's group) of dy[n,oh,ow,o] * w[o,kh,kw,ci % Cg] for every
// output position (oh, ow) whose window puts kernel tap (kh, kw) on (ih, iw). Gathered per dx
// element, so threads never write the same element.
void conv2d_bwd_data_naive(DType dtype, const void* dy, const void* w, void* dx, const ConvGeom& g) {
  dispatch_float(dtype, "conv2d_bwd_data", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* DY = static_cast<const T*>(dy);  // (N,OH,OW,O)
    const T* Wt = static_cast<const T*>(w);   // (O,KH,KW,Cg)
    T* DX = static_cast<T*>(dx);              // (N,H,W,C)
    const Conv2dArg& a = g.arg;
    const int64_t Cg = g.C / a.groups, Og = g.O / a.groups;
    const bool par = parallel_worth_it(g);
#pragma omp parallel for collapse(2) schedule(static) if (par)
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t ih = 0; ih < g.H; ++ih)
        for (int64_t iw = 0; iw < g.W; ++iw)
          for (int64_t ci = 0; ci < g.C; ++ci) {
            const int64_t grp = ci / Cg, c = ci % Cg;
            A acc = 0;
            for (int64_t kh = 0; kh < g.KH; ++kh) {
              const int64_t th = ih + a.pad_top - kh * a.dil_h;  // = oh * stride_h
              if (th < 0 || th % a.stride_h != 0 || th / a.stride_h >= g.OH) continue;
              const int64_t oh = th / a.stride_h;
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t tw = iw + a.pad_left - kw * a.dil_w;  // = ow * stride_w
                if (tw < 0 || tw % a.stride_w != 0 || tw / a.stride_w >= g.OW) continue;
                const int64_t ow = tw / a.stride_w;
                const T* dyp = DY + ((n * g.OH + oh) * g.OW + ow) * g.O;  // (O)
                for (int64_t oo = 0; oo < Og; ++oo) {
                  const int64_t o = grp * Og + oo;
                  acc += A(dyp[o]) * A(Wt[((o * g.KH + kh) * g.KW + kw) * Cg + c]);
                }
              }
            }
            DX[((n * g.H + ih) * g.W + iw) * g.C + ci] = T(acc);
          }
  });
}

// dw[o,kh,kw,c] = sum over (n, oh, ow) of dy[n,oh,ow,o] * x[n,ih,iw,grp*Cg + c].
void conv2d_bwd_weight_naive(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g) {
  dispatch_float(dtype, "conv2d_bwd_weight", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* X = static_cast<const T*>(x);    // (N,H,W,C)
    const T* DY = static_cast<const T*>(dy);  // (N,OH,OW,O)
    T* DW = static_cast<T*>(dw);              // (O,KH,KW,Cg)
    const Conv2dArg& a = g.arg;
    const int64_t Cg = g.C / a.groups, Og = g.O / a.groups;
    const bool par = parallel_worth_it(g);
#pragma omp parallel for collapse(2) schedule(static) if (par)
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw)
          for (int64_t c = 0; c < Cg; ++c) {
            const int64_t ci = (o / Og) * Cg + c;
            A acc = 0;
            for (int64_t n = 0; n < g.N; ++n)
              for (int64_t oh = 0; oh < g.OH; ++oh) {
                const int64_t ih = oh * a.stride_h - a.pad_top + kh * a.dil_h;
                if (ih < 0 || ih >= g.H) continue;
                for (int64_t ow = 0; ow < g.OW; ++ow) {
                  const int64_t iw = ow * a.stride_w - a.pad_left + kw * a.dil_w;
                  if (iw < 0 || iw >= g.W) continue;
                  acc += A(DY[((n * g.OH + oh) * g.OW + ow) * g.O + o]) *
                         A(X[((n * g.H + ih) * g.W + iw) * g.C + ci]);
                }
              }
            DW[((o * g.KH + kh) * g.KW + kw) * Cg + c] = T(acc);
          }
  });
}

// ---- oneDNN -------------------------------------------------------------------------------------
namespace {

enum class Pass { fwd, bwd_data, bwd_weight };

dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// One cached primitive. `ok` is false when oneDNN cannot do this (dtype, shape) on this CPU; the
// failure is cached too, so the naive loop is chosen at once next time.
// Activations stay NHWC, but the weights are created with format_tag::any: with plain OHWI weights
// oneDNN 2.6 falls back to its slow reference kernel, with its own blocked layout it picks the JIT
// (brgemm / jit / jit_dw) kernels. The OHWI user weights are reordered to (or, for the weight
// gradient, from) that layout on each call.
struct CachedConv {
  bool ok = false;
  dnnl::primitive prim;
  dnnl::memory::desc scratchpad;  // user-managed scratchpad: safe to run one primitive concurrently
  dnnl::memory::desc weights;     // the primitive's weights layout
  bool reorder_weights = false;   // weights differ from the user's OHWI / GOHWI layout
  dnnl::reorder weights_reorder;  // user -> primitive (fwd, bwd_data) or primitive -> user (bwd_weight)
};

using ConvKey = std::array<int64_t, 20>;
ConvKey conv_key(Pass pass, DType dtype, const ConvGeom& g) {
  const Conv2dArg& a = g.arg;
  return {int64_t(pass), int64_t(dtype), g.N,         g.H,     g.W,        g.C,        g.O,
          g.KH,          g.KW,           g.OH,        g.OW,    a.stride_h, a.stride_w, a.pad_top,
          a.pad_left,    a.pad_bottom,   a.pad_right, a.dil_h, a.dil_w,    a.groups};
}

// Memory descriptors. oneDNN's logical dims are always (N,C,H,W) and (O,I,KH,KW), or
// (G,O/G,I/G,KH,KW) with groups; the format tags say the buffers are NHWC and OHWI / GOHWI.
// `weights` is the user's layout; `weights_any` lets the primitive choose its own.
struct ConvDescs {
  dnnl::memory::desc src, weights, weights_any, dst;
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
};
ConvDescs conv_descs(dnnl::memory::data_type dt, const ConvGeom& g) {
  using tag = dnnl::memory::format_tag;
  const Conv2dArg& a = g.arg;
  ConvDescs d;
  d.src = dnnl::memory::desc({g.N, g.C, g.H, g.W}, dt, tag::nhwc);
  d.dst = dnnl::memory::desc({g.N, g.O, g.OH, g.OW}, dt, tag::nhwc);
  const dnnl::memory::dims wdims =
      a.groups == 1 ? dnnl::memory::dims{g.O, g.C, g.KH, g.KW}
                    : dnnl::memory::dims{a.groups, g.O / a.groups, g.C / a.groups, g.KH, g.KW};
  d.weights = dnnl::memory::desc(wdims, dt, a.groups == 1 ? tag::ohwi : tag::gohwi);
  d.weights_any = dnnl::memory::desc(wdims, dt, tag::any);
  d.strides = {a.stride_h, a.stride_w};
  d.dilates = {a.dil_h - 1, a.dil_w - 1};  // oneDNN counts the gaps: 0 = dense
  d.pad_l = {a.pad_top, a.pad_left};
  d.pad_r = {a.pad_bottom, a.pad_right};
  return d;
}

CachedConv make_conv(Pass pass, dnnl::memory::data_type dt, const ConvGeom& g) {
  using dnnl::algorithm;
  using dnnl::prop_kind;
  const ConvDescs d = conv_descs(dt, g);
  dnnl::engine& eng = cpu_engine();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  CachedConv c;
  try {
    const dnnl::convolution_forward::desc fwd(prop_kind::forward_training, algorithm::convolution_direct,
                                              d.src, d.weights_any, d.dst, d.strides, d.dilates, d.pad_l,
                                              d.pad_r);
    const dnnl::convolution_forward::primitive_desc fwd_pd(fwd, attr, eng);
    switch (pass) {
      case Pass::fwd:
        c.prim = dnnl::convolution_forward(fwd_pd);
        c.scratchpad = fwd_pd.scratchpad_desc();
        c.weights = fwd_pd.weights_desc();
        break;
      case Pass::bwd_data: {
        const dnnl::convolution_backward_data::desc bd(algorithm::convolution_direct, d.src, d.weights_any,
                                                       d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
        const dnnl::convolution_backward_data::primitive_desc pd(bd, attr, eng, fwd_pd);
        c.prim = dnnl::convolution_backward_data(pd);
        c.scratchpad = pd.scratchpad_desc();
        c.weights = pd.weights_desc();
        break;
      }
      case Pass::bwd_weight: {
        const dnnl::convolution_backward_weights::desc bd(algorithm::convolution_direct, d.src, d.weights_any,
                                                          d.dst, d.strides, d.dilates, d.pad_l, d.pad_r);
        const dnnl::convolution_backward_weights::primitive_desc pd(bd, attr, eng, fwd_pd);
        c.prim = dnnl::convolution_backward_weights(pd);
        c.scratchpad = pd.scratchpad_desc();
        c.weights = pd.diff_weights_desc();
        break;
      }
    }
    c.reorder_weights = c.weights != d.weights;
    if (c.reorder_weights)
      c.weights_reorder = pass == Pass::bwd_weight
                              ? dnnl::reorder(dnnl::reorder::primitive_desc(eng, c.weights, eng, d.weights))
                              : dnnl::reorder(dnnl::reorder::primitive_desc(eng, d.weights, eng, c.weights));
    c.ok = true;
  } catch (const dnnl::error&) {
    c.ok = false;  // unsupported here (e.g. bf16 without AVX-512): the caller runs the naive loop
  }
  return c;
}

// Runs `pass` with oneDNN: a and b are the two inputs, out the result, in the op table's order
// (fwd: x, w -> y; bwd_data: dy, w -> dx; bwd_weight: x, dy -> dw). False when unsupported.
bool run_conv(Pass pass, DType dtype, const void* a, const void* b, void* out, const ConvGeom& g) {
  dnnl::memory::data_type dt = dnnl::memory::data_type::undef;
  switch (dtype) {
    case DType::float32: dt = dnnl::memory::data_type::f32; break;
    case DType::bfloat16: dt = dnnl::memory::data_type::bf16; break;
    case DType::float16:
    case DType::float64:
    case DType::int32:
    case DType::int64:
    case DType::uint8:
    case DType::boolean: return false;
  }
  static std::mutex mu;
  static std::map<ConvKey, CachedConv> cache;
  CachedConv c;
  {
    std::lock_guard<std::mutex> lock(mu);
    const ConvKey key = conv_key(pass, dtype, g);
    auto it = cache.find(key);
    if (it == cache.end()) it = cache.emplace(key, make_conv(pass, dt, g)).first;
    c = it->second;
  }
  if (!c.ok) return false;
  const ConvDescs d = conv_descs(dt, g);
  dnnl::engine& eng = cpu_engine();
  auto mem = [&](const dnnl::memory::desc& md, const void* p) {
    return dnnl::memory(md, eng, const_cast<void*>(p));
  };
  dnnl::stream s(eng);
  // The user's weights buffer (w, or dw for bwd_weight) and what the primitive reads / writes.
  dnnl::memory user_w = mem(d.weights, pass == Pass::bwd_weight ? out : b);
  dnnl::memory prim_w = c.reorder_weights ? dnnl::memory(c.weights, eng) : user_w;
  if (c.reorder_weights && pass != Pass::bwd_weight) c.weights_reorder.execute(s, user_w, prim_w);
  std::unordered_map<int, dnnl::memory> args;
  switch (pass) {
    case Pass::fwd:
      args = {{DNNL_ARG_SRC, mem(d.src, a)}, {DNNL_ARG_WEIGHTS, prim_w}, {DNNL_ARG_DST, mem(d.dst, out)}};
      break;
    case Pass::bwd_data:
      args = {{DNNL_ARG_DIFF_DST, mem(d.dst, a)},
              {DNNL_ARG_WEIGHTS, prim_w},
              {DNNL_ARG_DIFF_SRC, mem(d.src, out)}};
      break;
    case Pass::bwd_weight:
      args = {
          {DNNL_ARG_SRC, mem(d.src, a)}, {DNNL_ARG_DIFF_DST, mem(d.dst, b)}, {DNNL_ARG_DIFF_WEIGHTS, prim_w}};
      break;
  }
  if (c.scratchpad.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(c.scratchpad, eng));
  c.prim.execute(s, args);
  if (c.reorder_weights && pass == Pass::bwd_weight) c.weights_reorder.execute(s, prim_w, user_w);
  s.wait();
  return true;
}

}  // namespace

bool conv2d_fwd_onednn(DType dtype, const void* x, const void* w, void* y, const ConvGeom& g) {
  return run_conv(Pass::fwd, dtype, x, w, y, g);
}
bool conv2d_bwd_data_onednn(DType dtype, const void* dy, const void* w, void* dx, const ConvGeom& g) {
  return run_conv(Pass::bwd_data, dtype, dy, w, dx, g);
}
bool conv2d_bwd_weight_onednn(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g) {
  return run_conv(Pass::bwd_weight, dtype, x, dy, dw, g);
}

}  // namespace aether::cpu
