// 2-D convolution on the CPU with oneDNN (float32 and bfloat16, where this CPU's oneDNN build
// supports them). The naive loops, the oracle these are tested against, are in reference_conv.cpp.
//
// Layouts (see kernels.h): x (N,H,W,C) NHWC, w (O,KH,KW,C/G) OHWI, y (N,OH,OW,O) NHWC, G = groups.
// Output channel o belongs to group g = o / (O/G) and reads input channels [g*C/G, (g+1)*C/G).
// Input row of output row oh and kernel row kh: ih = oh*stride_h - pad_top + kh*dil_h (same for w);
// positions outside [0, H) x [0, W) are padding and read as 0.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "kernels.h"
#include "onednn.h"
#include "widen.h"

namespace aether::cpu {

// ---- oneDNN -------------------------------------------------------------------------------------
namespace {

enum class Pass { fwd, bwd_data, bwd_weight };

// One cached primitive (per pass, dtype, geometry and, for the forward, post-op list). `ok` is
// false when oneDNN cannot do this (dtype, shape, post-ops) on this CPU; the failure is cached too,
// so the caller's fallback is chosen at once next time.
// Activations stay NHWC, but the weights are created with format_tag::any: with plain OHWI weights
// oneDNN falls back to slower kernels (2.6: its reference kernel), with its own blocked layout it
// picks the JIT (brgconv / jit / jit_dw) kernels. The OHWI user weights are reordered to that layout once per
// weights buffer (blocked_weights()). The weight gradient is computed in the backward-weights
// primitive's layout and reordered to OHWI after the call. (Leaving the gradient, and the weights
// the optimizer computes from it, in the primitive's order saved two reorders per conv per step but
// measured no faster, 0.99x / 1.01x of a cifarnet step, and put a layout on every buffer: removed.)
// The scratchpad and the weight gradient's blocked buffer are allocated once and reused; `mu`
// makes calls of one primitive take turns (oneDNN parallelises inside each call).
struct CachedConv {
  bool ok = false;
  dnnl::primitive prim;
  dnnl::memory::desc weights;          // the primitive's weights layout
  bool reorder_weights = false;        // weights differ from the user's OHWI / GOHWI layout
  dnnl::reorder weights_reorder;       // user -> primitive (fwd, bwd_data) or primitive -> user (bwd_weight)
  dnnl::memory::desc scratchpad_desc;  // user-managed scratchpad
  dnnl::memory::desc bias;             // fwd with a Bias post-op: (O)
  std::mutex mu;                       // guards the two buffers below
  std::optional<dnnl::memory> scratchpad;
  std::optional<dnnl::memory> blocked_diff_weights;  // bwd_weight only
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

// A per-channel post-op operand: (O) values as oneDNN's (1,O,1,1).
dnnl::memory::desc channel_desc(dnnl::memory::data_type dt, const ConvGeom& g) {
  return dnnl::memory::desc({1, g.O, 1, 1}, dt, dnnl::memory::format_tag::nchw);
}

std::unique_ptr<CachedConv> make_conv(Pass pass, dnnl::memory::data_type dt, const ConvGeom& g,
                                      const std::vector<ConvPostOp>& ops) {
  using dnnl::algorithm;
  using dnnl::prop_kind;
  const ConvDescs d = conv_descs(dt, g);
  dnnl::engine& eng = onednn_engine();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto c = std::make_unique<CachedConv>();
  try {
    // The forward without post-ops: the backward passes' hint, and the forward itself without them.
    const dnnl::convolution_forward::primitive_desc fwd_pd(
        eng, prop_kind::forward_training, algorithm::convolution_direct, d.src, d.weights_any, d.dst,
        d.strides, d.dilates, d.pad_l, d.pad_r, attr);
    switch (pass) {
      case Pass::fwd: {
        if (ops.empty()) {
          c->prim = dnnl::convolution_forward(fwd_pd);
          c->scratchpad_desc = fwd_pd.scratchpad_desc();
          c->weights = fwd_pd.weights_desc();
          break;
        }
        dnnl::post_ops po;
        bool bias = false;
        for (size_t i = 0; i < ops.size(); ++i) {
          switch (ops[i].kind) {
            case ConvPostOp::Kind::Bias:
              if (i != 0) return c;  // the bias argument is added before every post-op
              bias = true;
              break;
            case ConvPostOp::Kind::Add: po.append_binary(algorithm::binary_add, channel_desc(dt, g)); break;
            case ConvPostOp::Kind::Sub: po.append_binary(algorithm::binary_sub, channel_desc(dt, g)); break;
            case ConvPostOp::Kind::Mul: po.append_binary(algorithm::binary_mul, channel_desc(dt, g)); break;
            case ConvPostOp::Kind::Sum: po.append_sum(1.f); break;
            case ConvPostOp::Kind::Relu: po.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f); break;
          }
        }
        dnnl::primitive_attr pattr;
        pattr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        pattr.set_post_ops(po);
        if (bias) c->bias = dnnl::memory::desc({g.O}, dt, dnnl::memory::format_tag::a);
        const dnnl::convolution_forward::primitive_desc pd(
            eng, prop_kind::forward_training, algorithm::convolution_direct, d.src, d.weights_any, c->bias,
            d.dst, d.strides, d.dilates, d.pad_l, d.pad_r, pattr);
        c->prim = dnnl::convolution_forward(pd);
        c->scratchpad_desc = pd.scratchpad_desc();
        c->weights = pd.weights_desc();
        break;
      }
      case Pass::bwd_data: {
        const dnnl::convolution_backward_data::primitive_desc pd(eng, algorithm::convolution_direct, d.src,
                                                                 d.weights_any, d.dst, d.strides, d.dilates,
                                                                 d.pad_l, d.pad_r, fwd_pd, attr);
        c->prim = dnnl::convolution_backward_data(pd);
        c->scratchpad_desc = pd.scratchpad_desc();
        c->weights = pd.weights_desc();
        break;
      }
      case Pass::bwd_weight: {
        const dnnl::convolution_backward_weights::primitive_desc pd(
            eng, algorithm::convolution_direct, d.src, d.weights_any, d.dst, d.strides, d.dilates, d.pad_l,
            d.pad_r, fwd_pd, attr);
        c->prim = dnnl::convolution_backward_weights(pd);
        c->scratchpad_desc = pd.scratchpad_desc();
        c->weights = pd.diff_weights_desc();
        break;
      }
    }
    c->reorder_weights = c->weights != d.weights;
    if (c->reorder_weights)
      c->weights_reorder =
          pass == Pass::bwd_weight
              ? dnnl::reorder(dnnl::reorder::primitive_desc(eng, c->weights, eng, d.weights))
              : dnnl::reorder(dnnl::reorder::primitive_desc(eng, d.weights, eng, c->weights));
    c->ok = true;
  } catch (const dnnl::error&) {
    c->ok = false;  // unsupported here (e.g. bf16 without AVX-512): the caller runs its fallback
  }
  return c;
}

// ---- weights in the primitive's layout, reordered once per weights buffer ------------------------
// An entry is the blocked copy of the user weights at `src` inside the Buffer `owner`. Buffers are
// written once, before their node is realized, and never again (Tensor::assign and the optimizers
// make new nodes with new buffers), so while `owner` is alive the values at `src` cannot change.
// The weak_ptr identifies the Buffer object by its control block, which no other Buffer can get
// while the weak_ptr exists: a freed buffer whose memory (or even address) is reused by a new one
// never matches, so a stale copy is never used. Entries whose owner died are reused for new weights
// of the same layout (no allocation per training step).
struct BlockedWeights {
  std::weak_ptr<const Buffer> owner;
  const void* src = nullptr;
  dnnl::memory::desc md;
  dnnl::memory mem;
};
constexpr size_t kMaxBlockedWeights = 64;
std::mutex g_weights_mu;
std::vector<BlockedWeights> g_weights;
std::atomic<int64_t> g_weight_reorders{0};
std::atomic<int64_t> g_postop_calls{0};
std::atomic<int64_t> g_widened_calls{0};  // convolutions run on widened 16-bit operands

// Reorders the user weights `user_w` (OHWI) into `dst`, in c's layout.
void reorder_to_primitive(const CachedConv& c, dnnl::memory& user_w, dnnl::memory& dst, dnnl::stream& s) {
  c.weights_reorder.execute(s, user_w, dst);
  ++g_weight_reorders;
}

// The primitive's weights for the user weights `user_w` (at `src`): the cached blocked copy, or a
// new one reordered now. Without an owner, a fresh copy reordered now; likewise for every call when
// the environment sets AETHER_CONV_WEIGHT_CACHE=0 (to measure what the cache saves).
dnnl::memory blocked_weights(const CachedConv& c, dnnl::memory user_w, const void* src,
                             const std::shared_ptr<const Buffer>& owner, dnnl::stream& s) {
  const bool cache_on = config().conv_weight_cache;
  dnnl::engine& eng = onednn_engine();
  if (!owner || !cache_on) {
    dnnl::memory m(c.weights, eng);
    reorder_to_primitive(c, user_w, m, s);
    return m;
  }
  std::lock_guard<std::mutex> lock(g_weights_mu);
  auto same = [&](const std::weak_ptr<const Buffer>& w) {
    return !w.owner_before(owner) && !owner.owner_before(w);
  };
  for (const BlockedWeights& e : g_weights)
    if (e.src == src && e.md == c.weights && !e.owner.expired() && same(e.owner)) return e.mem;
  BlockedWeights* slot = nullptr;
  for (BlockedWeights& e : g_weights)
    if (e.owner.expired() && e.md == c.weights) {
      slot = &e;
      break;
    }
  if (slot == nullptr) {
    if (g_weights.size() >= kMaxBlockedWeights) {  // drop a dead entry, else the oldest
      auto dead =
          std::find_if(g_weights.begin(), g_weights.end(), [](const auto& e) { return e.owner.expired(); });
      g_weights.erase(dead != g_weights.end() ? dead : g_weights.begin());
    }
    g_weights.push_back({{}, nullptr, c.weights, dnnl::memory(c.weights, eng)});
    slot = &g_weights.back();
  }
  slot->owner = owner;
  slot->src = src;
  reorder_to_primitive(c, user_w, slot->mem, s);
  s.wait();  // complete before another thread may read this entry
  return slot->mem;
}

// The cached primitive for these arguments (made on first use; entries live as long as the process).
CachedConv& cached_conv(Pass pass, DType dtype, dnnl::memory::data_type dt, const ConvGeom& g,
                        const std::vector<ConvPostOp>& ops) {
  static std::mutex mu;
  static std::map<std::pair<ConvKey, std::vector<uint8_t>>, std::unique_ptr<CachedConv>> cache;
  std::lock_guard<std::mutex> lock(mu);
  std::vector<uint8_t> kinds;
  for (const ConvPostOp& op : ops) kinds.push_back(uint8_t(op.kind));
  auto key = std::make_pair(conv_key(pass, dtype, g), std::move(kinds));
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(std::move(key), make_conv(pass, dt, g, ops)).first;
  return *it->second;  // entries are never erased: the reference stays valid
}

// Runs `pass` with oneDNN: a and b are the two inputs, out the result, in the op table's order
// (fwd: x, w -> y; bwd_data: dy, w -> dx; bwd_weight: x, dy -> dw); `ops` the forward's post-ops,
// `w_owner` the Buffer holding the OHWI weights (fwd, bwd_data; may be null: then no cached copy).
// False when unsupported.
bool run_conv(Pass pass, DType dtype, const void* a, const void* b, void* out, const ConvGeom& g,
              const std::vector<ConvPostOp>& ops, const std::shared_ptr<const Buffer>& w_owner) {
  note_onednn_call();
  const auto dt = onednn_type(dtype);
  if (!dt) return false;
  const ConvDescs d = conv_descs(*dt, g);
  const dnnl::memory::desc& user_md = d.weights;  // OHWI / GOHWI
  CachedConv& c = cached_conv(pass, dtype, *dt, g, ops);
  if (!c.ok) return false;
  dnnl::engine& eng = onednn_engine();
  auto mem = [&](const dnnl::memory::desc& md, const void* p) {
    return dnnl::memory(md, eng, const_cast<void*>(p));
  };
  std::lock_guard<std::mutex> lock(c.mu);
  dnnl::stream s(eng);
  // The user's weights buffer and what the primitive reads / writes.
  dnnl::memory user_w = mem(user_md, pass == Pass::bwd_weight ? out : b);
  dnnl::memory prim_w = user_w;
  bool unblock_dw = false;  // bwd_weight: reorder the gradient to OHWI after the primitive
  if (pass == Pass::bwd_weight) {
    if (c.reorder_weights) {
      if (!c.blocked_diff_weights) c.blocked_diff_weights = dnnl::memory(c.weights, eng);
      prim_w = *c.blocked_diff_weights;
      unblock_dw = true;
    }
  } else if (c.reorder_weights) {
    prim_w = blocked_weights(c, user_w, b, w_owner, s);
  }
  std::unordered_map<int, dnnl::memory> args;
  switch (pass) {
    case Pass::fwd:
      args = {{DNNL_ARG_SRC, mem(d.src, a)}, {DNNL_ARG_WEIGHTS, prim_w}, {DNNL_ARG_DST, mem(d.dst, out)}};
      for (size_t i = 0, po = 0; i < ops.size(); ++i) {
        switch (ops[i].kind) {
          case ConvPostOp::Kind::Bias: args.emplace(DNNL_ARG_BIAS, mem(c.bias, ops[i].data)); continue;
          case ConvPostOp::Kind::Add:
          case ConvPostOp::Kind::Sub:
          case ConvPostOp::Kind::Mul:
            args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(po)) | DNNL_ARG_SRC_1,
                         mem(channel_desc(*dt, g), ops[i].data));
            break;
          case ConvPostOp::Kind::Sum:
          case ConvPostOp::Kind::Relu: break;
        }
        ++po;
      }
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
  if (c.scratchpad_desc.get_size() > 0) {
    if (!c.scratchpad) c.scratchpad = dnnl::memory(c.scratchpad_desc, eng);
    args.emplace(DNNL_ARG_SCRATCHPAD, *c.scratchpad);
  }
  c.prim.execute(s, args);
  if (unblock_dw) {
    c.weights_reorder.execute(s, prim_w, user_w);
    ++g_weight_reorders;
  }
  s.wait();
  return true;
}

// 16-bit operands on a CPU whose oneDNN has no 16-bit convolution (widen.h): the pass in float32 on
// widened copies, the result rounded back to `dtype`. Element counts per pass as in run_conv's order.
bool run_conv_widened(Pass pass, DType dtype, const void* a, const void* b, void* out, const ConvGeom& g) {
  const int64_t x = g.N * g.H * g.W * g.C, w = g.O * g.KH * g.KW * (g.C / g.arg.groups),
                y = g.N * g.OH * g.OW * g.O;
  const int64_t na = pass == Pass::bwd_data ? y : x, nb = pass == Pass::bwd_weight ? y : w,
                nout = pass == Pass::fwd        ? y
                       : pass == Pass::bwd_data ? x
                                                : w;
  const BufferPtr fa = widen(dtype, a, na), fb = widen(dtype, b, nb);
  const auto fout = std::make_shared<Buffer>(Device::cpu(), DType::float32, nout, /*zero_fill=*/false);
  if (!run_conv(pass, DType::float32, fa->data(), fb->data(), fout->data(), g, {}, nullptr)) return false;
  narrow(dtype, static_cast<const float*>(fout->data()), out, nout);
  ++g_widened_calls;
  return true;
}
// run_conv in `dtype`, or for 16-bit dtypes oneDNN declines here, on widened float32 copies.
bool run_conv_any(Pass pass, DType dtype, const void* a, const void* b, void* out, const ConvGeom& g,
                  const std::shared_ptr<const Buffer>& w_owner) {
  if (run_conv(pass, dtype, a, b, out, g, {}, w_owner)) return true;
  return is_16bit_float(dtype) && run_conv_widened(pass, dtype, a, b, out, g);
}

}  // namespace

bool conv2d_fwd_onednn(DType dtype, const void* x, const void* w, void* y, const ConvGeom& g,
                       const std::shared_ptr<const Buffer>& w_owner) {
  return run_conv_any(Pass::fwd, dtype, x, w, y, g, w_owner);
}
bool conv2d_fwd_postops_onednn(DType dtype, const void* x, const void* w, void* y, const ConvGeom& g,
                               const std::vector<ConvPostOp>& ops,
                               const std::shared_ptr<const Buffer>& w_owner) {
  const bool ok = run_conv(Pass::fwd, dtype, x, w, y, g, ops, w_owner);
  g_postop_calls += ok;
  return ok;
}
bool conv2d_bwd_data_onednn(DType dtype, const void* dy, const void* w, void* dx, const ConvGeom& g,
                            const std::shared_ptr<const Buffer>& w_owner) {
  return run_conv_any(Pass::bwd_data, dtype, dy, w, dx, g, w_owner);
}
bool conv2d_bwd_weight_onednn(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g) {
  return run_conv_any(Pass::bwd_weight, dtype, x, dy, dw, g, nullptr);
}
int64_t conv_weight_reorders() { return g_weight_reorders.load(); }
int64_t conv_postop_calls() { return g_postop_calls.load(); }
int64_t conv_widened_calls() { return g_widened_calls.load(); }

}  // namespace aether::cpu
