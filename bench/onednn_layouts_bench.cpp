// Which weights layout each of oneDNN's three training passes runs fast with, on this CPU, for the
// convolutions of the cifarnet step (batch 64 or AETHER_BENCH_BATCH, NHWC activations, 3x3, stride 1, pad 1,
// float32).
//
// aether keeps conv weights OHWI and hands oneDNN a blocked copy (cached per weights buffer, so
// evaluation and prediction reorder once). In training the weights change every step, and the
// passes want different layouts (with AVX-512, oneDNN 2.6, measured before aether moved to 3.2: forward
// Acdb64a/Acdb32a from brgconv, backward-data ABcd16a16b, backward-weights ABcd16b16a): no single layout kept
// across steps serves all three, because the backward-data pass given another layout falls back to oneDNN's
// reference kernel (skipped below with that reason). These benchmarks measure that, and what a
// weights reorder costs:
//   build/test/bench/onednn_layouts_bench --benchmark_filter=Conv      # time per pass and layout
//   build/test/bench/onednn_layouts_bench --benchmark_filter=Reorder   # OHWI -> each pass's layout
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <dnnl.hpp>
#include <string>
#include <unordered_map>

namespace {

using dnnl::memory;
using tag = memory::format_tag;

struct Layer {
  int64_t C, O, H;  // input channels, output channels, height = width
};
// cifarnet's distinct convolutions (src/model/presets.cpp).
constexpr Layer kLayers[] = {{3, 32, 32},   {32, 64, 32},  {64, 64, 16}, {64, 128, 16},
                             {128, 128, 8}, {128, 256, 8}, {256, 256, 4}};
// The batch: 64, or AETHER_BENCH_BATCH.
const int64_t kBatch = [] {
  const char* e = std::getenv("AETHER_BENCH_BATCH");
  return e ? std::max<int64_t>(1, std::atoll(e)) : int64_t(64);
}();

// Weights layouts tried: 0 = oneDNN's own choice for the pass (format_tag::any), then fixed ones.
constexpr tag kLayouts[] = {tag::any, tag::ohwi, tag::OIhw16i16o /* ABcd16b16a */,
                            tag::OIhw16o16i /* ABcd16a16b */};
const char* const kLayoutNames[] = {"any", "ohwi", "ABcd16b16a", "ABcd16a16b"};
const char* const kPassNames[] = {"fwd", "bwd_data", "bwd_weights"};

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

struct Descs {
  memory::desc src, dst, w_any;
  memory::dims strides{1, 1}, dil{0, 0}, pad{1, 1};
};
Descs descs(const Layer& l) {
  const auto f32 = memory::data_type::f32;
  return {memory::desc({kBatch, l.C, l.H, l.H}, f32, tag::nhwc),
          memory::desc({kBatch, l.O, l.H, l.H}, f32, tag::nhwc),
          memory::desc({l.O, l.C, 3, 3}, f32, tag::any)};
}
memory::desc weights(const Layer& l, tag t) {
  return memory::desc({l.O, l.C, 3, 3}, memory::data_type::f32, t);
}

dnnl::convolution_forward::primitive_desc fwd_pd(const Descs& d, const memory::desc& w) {
  return {engine(),
          dnnl::prop_kind::forward_training,
          dnnl::algorithm::convolution_direct,
          d.src,
          w,
          d.dst,
          d.strides,
          d.dil,
          d.pad,
          d.pad};
}

// One pass (range 0: fwd / bwd_data / bwd_weights) of layer range(1) with weights layout range(2).
void BM_Conv(benchmark::State& state) {
  const int pass = int(state.range(0));
  const Layer& l = kLayers[state.range(1)];
  const Descs d = descs(l);
  const memory::desc w = state.range(2) == 0 ? d.w_any : weights(l, kLayouts[state.range(2)]);
  dnnl::stream s(engine());
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  std::string impl;
  try {
    const auto fpd = fwd_pd(d, pass == 0 ? w : d.w_any);  // the backward passes' hint: oneDNN's own forward
    memory src(d.src, engine()), dst(d.dst, engine());
    if (pass == 0) {
      prim = dnnl::convolution_forward(fpd);
      impl = fpd.impl_info_str();
      args = {
          {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, memory(fpd.weights_desc(), engine())}, {DNNL_ARG_DST, dst}};
    } else if (pass == 1) {
      const dnnl::convolution_backward_data::primitive_desc pd(engine(), dnnl::algorithm::convolution_direct,
                                                               d.src, w, d.dst, d.strides, d.dil, d.pad,
                                                               d.pad, fpd);
      prim = dnnl::convolution_backward_data(pd);
      impl = pd.impl_info_str();
      args = {{DNNL_ARG_DIFF_DST, dst},
              {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), engine())},
              {DNNL_ARG_DIFF_SRC, src}};
    } else {
      const dnnl::convolution_backward_weights::primitive_desc pd(
          engine(), dnnl::algorithm::convolution_direct, d.src, w, d.dst, d.strides, d.dil, d.pad, d.pad,
          fpd);
      prim = dnnl::convolution_backward_weights(pd);
      impl = pd.impl_info_str();
      args = {{DNNL_ARG_SRC, src},
              {DNNL_ARG_DIFF_DST, dst},
              {DNNL_ARG_DIFF_WEIGHTS, memory(pd.diff_weights_desc(), engine())}};
    }
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN refuses: ") + e.what()).c_str());
    return;
  }
  state.SetLabel(std::string(kPassNames[pass]) + " w=" + kLayoutNames[state.range(2)] + " " + impl);
  if (impl.rfind("ref", 0) == 0) {  // minutes per call at these sizes: not worth timing
    state.SkipWithError(("only oneDNN's reference kernel (" + impl + ") takes this layout").c_str());
    return;
  }
  for (auto _ : state) {
    prim.execute(s, args);
    s.wait();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * kBatch * l.H * l.H * l.O * l.C * 9 * double(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Conv)
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2, 3, 4, 5, 6}, {0, 1, 2, 3}})
    ->ArgNames({"pass", "layer", "layout"})
    ->Unit(benchmark::kMillisecond);

// OHWI weights of layer range(0) reordered into the layout pass range(1) chooses: the per-step cost
// of plain weights in training (the weight gradient's reorder back to OHWI costs the same).
void BM_Reorder(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  const Descs d = descs(l);
  const auto fpd = fwd_pd(d, d.w_any);
  memory::desc target = fpd.weights_desc();
  if (state.range(1) == 1)
    target =
        dnnl::convolution_backward_data::primitive_desc(engine(), dnnl::algorithm::convolution_direct, d.src,
                                                        d.w_any, d.dst, d.strides, d.dil, d.pad, d.pad, fpd)
            .weights_desc();
  if (state.range(1) == 2)
    target = dnnl::convolution_backward_weights::primitive_desc(engine(), dnnl::algorithm::convolution_direct,
                                                                d.src, d.w_any, d.dst, d.strides, d.dil,
                                                                d.pad, d.pad, fpd)
                 .diff_weights_desc();
  memory from(weights(l, tag::ohwi), engine()), to(target, engine());
  dnnl::reorder r(from, to);
  dnnl::stream s(engine());
  state.SetLabel(kPassNames[state.range(1)]);
  for (auto _ : state) {
    r.execute(s, from, to);
    s.wait();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 2 * l.O * l.C * 9 * 4);
}
BENCHMARK(BM_Reorder)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {0, 1, 2}})
    ->ArgNames({"layer", "pass"})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
