// Micro-benchmarks of single ops through the lazy graph on the reference backend.
// Each iteration builds the op on realized inputs and realizes it (graph + kernel time).
#include <benchmark/benchmark.h>

#include "aether/aether.h"

using namespace aether;

namespace {
Tensor realized_randn(const Shape& s) { return Tensor::randn(s).realize().detach(); }

// out = a + b, (n) float32
void BM_Add(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor a = realized_randn({n}), b = realized_randn({n});
  for (auto _ : state) {
    Tensor c = (a + b).realize();
    benchmark::DoNotOptimize(c.node()->buffer->data());
  }
  state.SetBytesProcessed(state.iterations() * n * 4 * 3);
}
BENCHMARK(BM_Add)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// ReLU backward as the graph builds it: one select, x <= 0 ? 0 : dy; (n) float32
void BM_ReluBackward(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor x = realized_randn({n}), dy = realized_randn({n});
  for (auto _ : state) {
    Tensor dx = where(x <= 0.0, 0.0, dy).realize();
    benchmark::DoNotOptimize(dx.node()->buffer->data());
  }
  state.SetBytesProcessed(state.iterations() * n * 4 * 3);
}
BENCHMARK(BM_ReluBackward)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

// GELU forward (erf form) on the shapes airbench's layers give it: (n, 31, 31, 24) float32 after the
// whitening conv (arg 0; a short channel loop) and (n, 16, 16, 64) (arg 1). Compute-bound: erfc's
// approximation and an exp per element.
void BM_Gelu(benchmark::State& state) {
  const Shape s = state.range(1) ? Shape{state.range(0), 16, 16, 64} : Shape{state.range(0), 31, 31, 24};
  Tensor x = realized_randn(s);
  for (auto _ : state) {
    Tensor y = gelu(x).realize();
    benchmark::DoNotOptimize(y.node()->buffer->data());
  }
  state.SetItemsProcessed(state.iterations() * x.numel());
}
BENCHMARK(BM_Gelu)->Args({128, 0})->Args({128, 1})->Args({1024, 1})->Unit(benchmark::kMillisecond);

// Sum over rows: (n, 256) -> (256)
void BM_SumAxis0(benchmark::State& state) {
  const int64_t n = state.range(0);
  Tensor x = realized_randn({n, 256});
  for (auto _ : state) {
    Tensor s = x.sum({0}).realize();
    benchmark::DoNotOptimize(s.node()->buffer->data());
  }
  state.SetBytesProcessed(state.iterations() * n * 256 * 4);
}
BENCHMARK(BM_SumAxis0)->Arg(4096)->Unit(benchmark::kMillisecond);

// (n, n) x (n, n) float32: oneDNN (arg 1) or the naive loop (arg 0)
void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  set_library_impl(state.range(1) ? LibraryImpl::onednn : LibraryImpl::naive);
  Tensor a = realized_randn({n, n}), b = realized_randn({n, n});
  for (auto _ : state) {
    Tensor c = a.matmul(b).realize();
    benchmark::DoNotOptimize(c.node()->buffer->data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(double(2 * n * n * n) * double(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  set_library_impl(LibraryImpl::onednn);
}
BENCHMARK(BM_Matmul)->Args({256, 1})->Args({256, 0})->Args({1024, 1})->Unit(benchmark::kMillisecond);
}  // namespace
