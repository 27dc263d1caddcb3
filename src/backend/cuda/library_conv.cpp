// 2-D convolution on the GPU: forward, data gradient and weight gradient through cuDNN (the legacy
// convolution API of cuDNN 9), with a direct CUDA kernel for what cuDNN cannot run.
//
// Layouts as on the CPU: x (N,H,W,C) and y (N,OH,OW,O) are NHWC tensors, w (O,KH,KW,C/G) is cuDNN's
// NHWC filter format (KRSC = OHWI), groups through cudnnSetConvolutionGroupCount, dilation and
// stride in the convolution descriptor, CUDNN_CROSS_CORRELATION (no kernel flip, like the CPU).
//
// Padding. cuDNN pads symmetrically. With pad_top != pad_bottom or pad_left != pad_right the
// input is padded explicitly into the workspace, xp (N, H+pt+pb, W+pl+pr, C), and cuDNN runs with
// no padding: the forward and weight gradient read xp; the data gradient writes dxp and its
// interior (rows pt.., columns pl..) is copied to dx. Every output position sees exactly the CPU's
// window, so the values are the same convolution, not an approximation.
//
// Precision: float32 with CUDNN_FMA_MATH (no TF32: full float32 products, like the CPU), float64 in
// float64, float16 / bfloat16 with float32 compute and tensor-op math. The algorithm is chosen once
// per (device, pass, dtype, geometry) by cuDNN's heuristics (cudnnGet*Algorithm_v7: host-side only,
// so the first call may even happen while a CUDA graph is being captured), the fastest one whose
// workspace fits kMaxWorkspace, and cached with its descriptors. When cuDNN reports the case as not
// supported (no algorithm, a rejected descriptor, or a NOT_SUPPORTED status from the call itself),
// the direct kernel of library_kernels.cpp computes it instead (slow but exact); set
// AETHER_CUDA_VERBOSE=1 to be told once per shape.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "backend/cuda/lazy_libs.h"
#include "backend/cuda/library.h"
#include "core/config.h"
#include "library_common.h"

namespace aether::cuda {
namespace {

using lib::dname;

constexpr size_t kMaxWorkspace = size_t(1) << 30;
constexpr size_t kAlign = 256;  // workspace sub-buffers start at multiples of this

enum class Pass { fwd, bwd_data, bwd_weight };
const char* pass_name(Pass p) {
  switch (p) {
    case Pass::fwd: return "conv2d";
    case Pass::bwd_data: return "conv2d_bwd_data";
    case Pass::bwd_weight: return "conv2d_bwd_weight";
  }
  return "";
}

std::string describe(Pass pass, DType dtype, const ConvGeom& g) {
  const Conv2dArg& a = g.arg;
  return detail::cat(pass_name(pass), " (cuda): x (", g.N, ",", g.H, ",", g.W, ",", g.C, ") w (", g.O, ",",
                     g.KH, ",", g.KW, ",", a.groups > 0 ? g.C / a.groups : 0, ") y (", g.N, ",", g.OH, ",",
                     g.OW, ",", g.O, ") ", dname(dtype), ", stride ", a.stride_h, "x", a.stride_w, ", pad (t",
                     a.pad_top, ",l", a.pad_left, ",b", a.pad_bottom, ",r", a.pad_right, "), dilation ",
                     a.dil_h, "x", a.dil_w, ", groups ", a.groups);
}

bool verbose() { return config().cuda_verbose; }

bool is_not_supported(cudnnStatus_t s) {
  return (int(s) >= 3000 && int(s) < 4000) || (int(s) >= 2000 && int(s) < 3000);
}

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct Plan {
  bool cudnn = false;   // false: the direct kernel
  bool padded = false;  // asymmetric padding: through xp / dxp in the workspace
  lib::PadParams pad{};
  size_t pad_bytes = 0;  // of xp / dxp, rounded up to kAlign
  cudnnDataType_t dt = CUDNN_DATA_FLOAT;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;  // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t of the pass
  size_t ws = 0;
};

// A cuDNN failure while planning: why the direct kernel is used.
struct Unsupported {
  std::string why;
};
void need(cudnnStatus_t s, const char* call) {
  if (s == CUDNN_STATUS_SUCCESS) return;
  char last[512] = {0};
  AE_LAZY(cudnnGetLastErrorString)(last, sizeof last);
  throw Unsupported{detail::cat(call, ": ", AE_LAZY(cudnnGetErrorString)(s),
                                last[0] ? std::string(" (") + last + ")" : "")};
}

// The heuristics' fastest algorithm with a usable status, math type and workspace.
template <typename Perf>
bool choose(const Perf* perf, int n, bool fp32, Plan* p) {
  for (int i = 0; i < n; ++i) {
    const Perf& r = perf[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kMaxWorkspace) continue;
    if (fp32 && (r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;  // TF32: not full float32
    p->algo = int(r.algo);
    need(AE_LAZY(cudnnSetConvolutionMathType)(p->conv, r.mathType), "cudnnSetConvolutionMathType");
    return true;
  }
  return false;
}

int to_int(int64_t v) {
  if (v < 0 || v > INT32_MAX) throw Unsupported{detail::cat("size ", v, " does not fit cuDNN's int")};
  return int(v);
}

// Builds the cuDNN plan; throws Unsupported when cuDNN cannot do it.
void plan_cudnn(cudnnHandle_t h, Pass pass, DType dtype, const ConvGeom& g, Plan* p) {
  const Conv2dArg& a = g.arg;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_TENSOR_OP_MATH;
  switch (dtype) {
    case DType::float32: p->dt = CUDNN_DATA_FLOAT, math = CUDNN_FMA_MATH; break;
    case DType::float64:
      p->dt = CUDNN_DATA_DOUBLE, compute = CUDNN_DATA_DOUBLE, math = CUDNN_DEFAULT_MATH;
      break;
    case DType::float16: p->dt = CUDNN_DATA_HALF; break;
    case DType::bfloat16: p->dt = CUDNN_DATA_BFLOAT16; break;
    case DType::int32:
    case DType::int64:
    case DType::uint8:
    case DType::boolean: throw Unsupported{"not a float dtype"};
  }
  const int64_t H = p->padded ? p->pad.HP : g.H, W = p->padded ? p->pad.WP : g.W;
  const int64_t ph = p->padded ? 0 : a.pad_top, pw = p->padded ? 0 : a.pad_left;
  need(AE_LAZY(cudnnCreateTensorDescriptor)(&p->x), "cudnnCreateTensorDescriptor");
  need(AE_LAZY(cudnnCreateTensorDescriptor)(&p->y), "cudnnCreateTensorDescriptor");
  need(AE_LAZY(cudnnCreateFilterDescriptor)(&p->w), "cudnnCreateFilterDescriptor");
  need(AE_LAZY(cudnnCreateConvolutionDescriptor)(&p->conv), "cudnnCreateConvolutionDescriptor");
  need(AE_LAZY(cudnnSetTensor4dDescriptor)(p->x, CUDNN_TENSOR_NHWC, p->dt, to_int(g.N), to_int(g.C),
                                           to_int(H), to_int(W)),
       "AE_LAZY(cudnnSetTensor4dDescriptor)(x)");
  need(AE_LAZY(cudnnSetTensor4dDescriptor)(p->y, CUDNN_TENSOR_NHWC, p->dt, to_int(g.N), to_int(g.O),
                                           to_int(g.OH), to_int(g.OW)),
       "AE_LAZY(cudnnSetTensor4dDescriptor)(y)");
  need(AE_LAZY(cudnnSetFilter4dDescriptor)(p->w, p->dt, CUDNN_TENSOR_NHWC, to_int(g.O),
                                           to_int(g.C / a.groups), to_int(g.KH), to_int(g.KW)),
       "cudnnSetFilter4dDescriptor");
  need(AE_LAZY(cudnnSetConvolution2dDescriptor)(p->conv, to_int(ph), to_int(pw), to_int(a.stride_h),
                                                to_int(a.stride_w), to_int(a.dil_h), to_int(a.dil_w),
                                                CUDNN_CROSS_CORRELATION, compute),
       "cudnnSetConvolution2dDescriptor");
  need(AE_LAZY(cudnnSetConvolutionGroupCount)(p->conv, to_int(a.groups)), "cudnnSetConvolutionGroupCount");
  need(AE_LAZY(cudnnSetConvolutionMathType)(p->conv, math), "cudnnSetConvolutionMathType");
  // cuDNN's output shape must be ours.
  int on = 0, oc = 0, oh = 0, ow = 0;
  need(AE_LAZY(cudnnGetConvolution2dForwardOutputDim)(p->conv, p->x, p->w, &on, &oc, &oh, &ow),
       "cudnnGetConvolution2dForwardOutputDim");
  if (on != g.N || oc != g.O || oh != g.OH || ow != g.OW)
    throw Unsupported{
        detail::cat("cuDNN's output shape (", on, ",", oc, ",", oh, ",", ow, ") is not (N,O,OH,OW)")};
  const bool fp32 = dtype == DType::float32;
  bool found = false;
  size_t ws = 0;
  switch (pass) {
    case Pass::fwd: {
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
      int n = 0;
      need(AE_LAZY(cudnnGetConvolutionForwardAlgorithm_v7)(h, p->x, p->w, p->conv, p->y, int(perf.size()), &n,
                                                           perf.data()),
           "cudnnGetConvolutionForwardAlgorithm_v7");
      found = choose(perf.data(), n, fp32, p);
      if (found)
        need(AE_LAZY(cudnnGetConvolutionForwardWorkspaceSize)(h, p->x, p->w, p->conv, p->y,
                                                              cudnnConvolutionFwdAlgo_t(p->algo), &ws),
             "cudnnGetConvolutionForwardWorkspaceSize");
      break;
    }
    case Pass::bwd_data: {
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
      int n = 0;
      need(AE_LAZY(cudnnGetConvolutionBackwardDataAlgorithm_v7)(h, p->w, p->y, p->conv, p->x,
                                                                int(perf.size()), &n, perf.data()),
           "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      found = choose(perf.data(), n, fp32, p);
      if (found)
        need(AE_LAZY(cudnnGetConvolutionBackwardDataWorkspaceSize)(
                 h, p->w, p->y, p->conv, p->x, cudnnConvolutionBwdDataAlgo_t(p->algo), &ws),
             "cudnnGetConvolutionBackwardDataWorkspaceSize");
      break;
    }
    case Pass::bwd_weight: {
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
      int n = 0;
      need(AE_LAZY(cudnnGetConvolutionBackwardFilterAlgorithm_v7)(h, p->x, p->y, p->conv, p->w,
                                                                  int(perf.size()), &n, perf.data()),
           "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      found = choose(perf.data(), n, fp32, p);
      if (found)
        need(AE_LAZY(cudnnGetConvolutionBackwardFilterWorkspaceSize)(
                 h, p->x, p->y, p->conv, p->w, cudnnConvolutionBwdFilterAlgo_t(p->algo), &ws),
             "cudnnGetConvolutionBackwardFilterWorkspaceSize");
      break;
    }
  }
  if (!found) throw Unsupported{"cuDNN's heuristics offer no usable algorithm"};
  p->ws = ws;
  p->cudnn = true;
}

void destroy_descriptors(Plan* p) {
  if (p->x) AE_LAZY(cudnnDestroyTensorDescriptor)(p->x);
  if (p->y) AE_LAZY(cudnnDestroyTensorDescriptor)(p->y);
  if (p->w) AE_LAZY(cudnnDestroyFilterDescriptor)(p->w);
  if (p->conv) AE_LAZY(cudnnDestroyConvolutionDescriptor)(p->conv);
  p->x = p->y = nullptr;
  p->w = nullptr;
  p->conv = nullptr;
  p->cudnn = false;
}

void fall_back(Plan* p, const std::string& what, const std::string& why) {
  destroy_descriptors(p);
  if (verbose())
    std::fprintf(stderr, "aether: %s: cuDNN cannot run it (%s); using the direct kernel\n", what.c_str(),
                 why.c_str());
}

Plan make_plan(cudnnHandle_t h, Pass pass, DType dtype, const ConvGeom& g, const std::string& what) {
  const Conv2dArg& a = g.arg;
  Plan p;
  p.padded = a.pad_top != a.pad_bottom || a.pad_left != a.pad_right;
  if (p.padded) {
    p.pad = {g.N,       g.H,       g.W, g.C, g.H + a.pad_top + a.pad_bottom, g.W + a.pad_left + a.pad_right,
             a.pad_top, a.pad_left};
    p.pad_bytes = round_up(size_t(p.pad.N * p.pad.HP * p.pad.WP * p.pad.C * dtype_size(dtype)));
  }
  try {
    plan_cudnn(h, pass, dtype, g, &p);
  } catch (const Unsupported& u) {
    fall_back(&p, what, u.why);
  }
  return p;
}

using Key = std::vector<int64_t>;
Key key_of(int device, Pass pass, DType dtype, const ConvGeom& g) {
  const Conv2dArg& a = g.arg;
  return {device,    int64_t(pass), int64_t(dtype), g.N,         g.H,     g.W,        g.C,
          g.O,       g.KH,          g.KW,           g.OH,        g.OW,    a.stride_h, a.stride_w,
          a.pad_top, a.pad_left,    a.pad_bottom,   a.pad_right, a.dil_h, a.dil_w,    a.groups};
}

// Runs the direct kernel of `pass`: in0, in1 -> out in the op table's order.
void run_direct(cudaStream_t stream, Pass pass, DType dtype, const void* in0, const void* in1, void* out,
                const ConvGeom& g, const std::string& what) {
  const Conv2dArg& a = g.arg;
  lib::ConvParams cp{g.N,  g.H,        g.W,        g.C,       g.O,        g.KH,    g.KW,    g.OH,
                     g.OW, a.stride_h, a.stride_w, a.pad_top, a.pad_left, a.dil_h, a.dil_w, a.groups};
  lib::Kern k = lib::Kern::conv_fwd;
  int64_t n = 0;
  switch (pass) {
    case Pass::fwd: k = lib::Kern::conv_fwd, n = g.N * g.OH * g.OW * g.O; break;
    case Pass::bwd_data: k = lib::Kern::conv_bwd_data, n = g.N * g.H * g.W * g.C; break;
    case Pass::bwd_weight: k = lib::Kern::conv_bwd_weight, n = g.O * g.KH * g.KW * (g.C / a.groups); break;
  }
  const void* fn = lib::kernel(dtype, k, pass_name(pass));
  void* a0 = const_cast<void*>(in0);
  void* a1 = const_cast<void*>(in1);
  void* args[] = {&a0, &a1, &out, &cp};  // cudaLaunchKernel takes the address of each argument
  lib::launch(fn, n, args, stream, what);
}

// Runs one pass: fwd (x, w -> y), bwd_data (dy, w -> dx), bwd_weight (x, dy -> dw).
void run(cudaStream_t stream, Pass pass, DType dtype, const void* in0, const void* in1, void* out,
         const ConvGeom& g) {
  const Conv2dArg& a = g.arg;
  auto what = [&] { return describe(pass, dtype, g); };
  AETHER_CHECK_DTYPE(dtype == DType::float32 || dtype == DType::float64 || dtype == DType::float16 ||
                         dtype == DType::bfloat16,
                     what(), "expected a float dtype");
  AETHER_CHECK(a.groups >= 1 && g.C % a.groups == 0 && g.O % a.groups == 0, what(),
               "groups must divide the input and output channels");
  AETHER_CHECK(a.stride_h >= 1 && a.stride_w >= 1 && a.dil_h >= 1 && a.dil_w >= 1 && a.pad_top >= 0 &&
                   a.pad_left >= 0 && a.pad_bottom >= 0 && a.pad_right >= 0,
               what(), "strides and dilations must be >= 1 and paddings >= 0");
  AETHER_CHECK(g.N >= 0 && g.H >= 0 && g.W >= 0 && g.C >= 0 && g.O >= 0 && g.KH >= 0 && g.KW >= 0 &&
                   g.OH == conv_out_size(g.H, g.KH, a.stride_h, a.pad_top, a.pad_bottom, a.dil_h) &&
                   g.OW == conv_out_size(g.W, g.KW, a.stride_w, a.pad_left, a.pad_right, a.dil_w),
               what(), "inconsistent geometry (OH, OW do not follow from the input, kernel and padding)");
  // Empty outputs, and empty sums (which are zeros).
  const int64_t esize = dtype_size(dtype);
  int64_t out_numel = 0;
  bool empty_sum = false;
  switch (pass) {
    case Pass::fwd:
      out_numel = g.N * g.OH * g.OW * g.O;
      empty_sum = g.C == 0 || g.KH == 0 || g.KW == 0;
      break;
    case Pass::bwd_data:
      out_numel = g.N * g.H * g.W * g.C;
      empty_sum = g.O == 0 || g.OH == 0 || g.OW == 0 || g.KH == 0 || g.KW == 0;
      break;
    case Pass::bwd_weight:
      out_numel = g.O * g.KH * g.KW * (g.C / a.groups);
      empty_sum = g.N == 0 || g.OH == 0 || g.OW == 0;
      break;
  }
  if (out_numel == 0) return;
  if (empty_sum) {
    AETHER_LIB_CHECK(cudaMemsetAsync(out, 0, size_t(out_numel * esize), stream), what());
    return;
  }
  const int device = lib::current_device();
  lib::Handles& h = lib::handles(device);
  // The device's cudnn_mu guards its handle's stream and its plans (keys hold the device); map_mu
  // guards the map itself (always taken second).
  std::lock_guard<std::mutex> lock(h.cudnn_mu);
  static std::mutex map_mu;
  static auto* plans = new std::map<Key, Plan>();  // never destroyed (descriptors outlive teardown)
  const Key key = key_of(device, pass, dtype, g);
  Plan* found = nullptr;
  {
    std::lock_guard<std::mutex> map_lock(map_mu);
    auto it = plans->find(key);
    if (it == plans->end()) it = plans->emplace(key, make_plan(h.cudnn, pass, dtype, g, what())).first;
    found = &it->second;  // std::map nodes do not move
  }
  Plan& p = *found;
  if (!p.cudnn) return run_direct(stream, pass, dtype, in0, in1, out, g, what());

  char* ws = static_cast<char*>(workspace(stream, p.pad_bytes + p.ws));  // [xp or dxp | cuDNN's]
  void* padded = p.padded ? ws : nullptr;
  void* cudnn_ws = p.ws > 0 ? ws + p.pad_bytes : nullptr;
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const bool f64 = dtype == DType::float64;
  const void* one = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  if (p.padded && pass != Pass::bwd_data) {  // xp (N,HP,WP,C) from x (in0 for fwd and bwd_weight)
    void* src = const_cast<void*>(in0);
    void* args[] = {&src, &padded, &p.pad};
    lib::launch(lib::kernel(dtype, lib::Kern::pad, pass_name(pass)), p.pad.N * p.pad.HP * p.pad.WP * p.pad.C,
                args, stream, what());
  }
  AETHER_LIB_CHECK(AE_LAZY(cudnnSetStream)(h.cudnn, stream), what());
  cudnnStatus_t s = CUDNN_STATUS_SUCCESS;
  const char* call = "";
  switch (pass) {
    case Pass::fwd:
      call = "cudnnConvolutionForward";
      s = AE_LAZY(cudnnConvolutionForward)(h.cudnn, one, p.x, p.padded ? padded : in0, p.w, in1, p.conv,
                                           cudnnConvolutionFwdAlgo_t(p.algo), cudnn_ws, p.ws, zero, p.y, out);
      break;
    case Pass::bwd_data:
      call = "cudnnConvolutionBackwardData";
      s = AE_LAZY(cudnnConvolutionBackwardData)(h.cudnn, one, p.w, in1, p.y, in0, p.conv,
                                                cudnnConvolutionBwdDataAlgo_t(p.algo), cudnn_ws, p.ws, zero,
                                                p.x, p.padded ? padded : out);
      break;
    case Pass::bwd_weight:
      call = "cudnnConvolutionBackwardFilter";
      s = AE_LAZY(cudnnConvolutionBackwardFilter)(h.cudnn, one, p.x, p.padded ? padded : in0, p.y, in1,
                                                  p.conv, cudnnConvolutionBwdFilterAlgo_t(p.algo), cudnn_ws,
                                                  p.ws, zero, p.w, out);
      break;
  }
  if (is_not_supported(s)) {  // rejected at run time: the direct kernel from now on
    char last[512] = {0};
    AE_LAZY(cudnnGetLastErrorString)(last, sizeof last);
    fall_back(&p, what(), detail::cat(call, ": ", AE_LAZY(cudnnGetErrorString)(s), " ", last));
    return run_direct(stream, pass, dtype, in0, in1, out, g, what());
  }
  if (!lib::ok(s)) lib::fail(s, call, what());
  if (p.padded && pass == Pass::bwd_data) {  // dx = the interior of dxp
    void* args[] = {&padded, &out, &p.pad};
    lib::launch(lib::kernel(dtype, lib::Kern::crop, pass_name(pass)), g.N * g.H * g.W * g.C, args, stream,
                what());
  }
}

}  // namespace

void conv2d_fwd(cudaStream_t stream, DType dtype, const void* x, const void* w, void* y, const ConvGeom& g) {
  run(stream, Pass::fwd, dtype, x, w, y, g);
}
void conv2d_bwd_data(cudaStream_t stream, DType dtype, const void* dy, const void* w, void* dx,
                     const ConvGeom& g) {
  run(stream, Pass::bwd_data, dtype, dy, w, dx, g);
}
void conv2d_bwd_weight(cudaStream_t stream, DType dtype, const void* x, const void* dy, void* dw,
                       const ConvGeom& g) {
  run(stream, Pass::bwd_weight, dtype, x, dy, dw, g);
}

}  // namespace aether::cuda
