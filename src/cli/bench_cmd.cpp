// `aether bench <name>`: timed runs of a few workloads on real tensors, with the fused executor (the
// default), the reference backend (--unfused) or both alternately (--compare); a small table, or
// one JSON object with --json. Benchmarks:
//   stream         copy bandwidth and FMA peak of this machine (the ceilings for the others)
//   bn-relu        BatchNorm2d training + ReLU, forward and backward (GB/s over the fused schedule's bytes)
//   relu-backward  dx = where(out <= 0, 0, dy)  (GB/s over 2 reads + 1 write)
//   conv           3x3 'same' conv2d forward, and forward + backward (data and weight gradients)
//   step           one training step of a preset model on random CIFAR-shaped data
// --device cuda runs bn-relu, relu-backward, conv and step on a GPU (data and model moved there
// first; every timed run ends with a device synchronisation).
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/backend/cuda.h"
#include "aether/dist/communicator.h"
#include "aether/dist/nccl.h"
#include "aether/model/model.h"
#include "aether/model/presets.h"
#include "aether/optim/optimizer.h"
#include "args.h"
#include "bench_util.h"
#include "commands.h"
#include "schedule/schedule.h"

namespace aether::cli {
namespace {
using bench::Measured;
using bench::strf;

struct BenchArgs {
  std::string name;
  int runs = 10;
  int warmup = 2;
  int threads = 0;  // 0: OpenMP's default
  bool unfused = false;
  bool compare = false;
  bool json = false;
  std::string shape;  // "" : the benchmark's default
  int64_t channels = 64;
  std::string model = "cifarnet";
  int64_t batch = 256;
  bool breakdown = false;
  int64_t mib = 256;
  std::string device = "cpu";         // bn-relu, relu-backward, conv, step: "cpu", "cuda", "cuda:N"
  std::string precision = "float32";  // step: the model's precision (Model::set_precision)
  std::string communicator;           // step: "" (none), "gloo" or "nccl": a data-parallel world of one
  // The numeric options as given (checked into the fields above by check_numbers).
  TextArg runs_text, warmup_text, threads_text, channels_text, batch_text, mib_text;
};

// Reads the numeric options given; bounds in README ("The command line").
void check_numbers(BenchArgs& a) {
  read_int("bench", a.runs_text, a.runs, 1, 1'000'000);
  read_int("bench", a.warmup_text, a.warmup, 0, 1'000'000);
  read_int("bench", a.threads_text, a.threads, 0, 4096);
  read_int("bench", a.channels_text, a.channels, 1, 65'536);
  read_int("bench", a.batch_text, a.batch, 1, 65'536);
  read_int("bench", a.mib_text, a.mib, 1, 4096);
}

// The benchmark's device, and a wait for its queued work (GPU work is asynchronous).
Device device_of(const BenchArgs& a) { return Device::parse(a.device); }
void sync(const Device& d) {
  if (d.type == DeviceType::cuda) cuda_synchronize(d.index);
}

const std::vector<std::string> kBenchNames = {"stream", "bn-relu", "relu-backward", "conv", "step"};

bench::RunPlan plan_of(const BenchArgs& a) { return {a.warmup, a.runs, a.unfused, a.compare}; }

std::string run_line(const BenchArgs& a) {
  return strf("%d threads, %d timed runs after %d warm-up, %s", omp_get_max_threads(), a.runs, a.warmup,
              a.compare ? "fused and unfused alternately" : bench::mode_name(plan_of(a)));
}

// JSON of one measurement: timing, throughput `unit` (= work / median / 1e9) and, when comparing,
// the unfused figures and the ratio of medians unfused / fused.
nlohmann::ordered_json measured_json(const Measured& m, double work, const std::string& unit) {
  nlohmann::ordered_json j = bench::timing_json(m.main);
  j[unit] = work / (m.main.median_ms * 1e-3) / 1e9;
  if (m.unfused) {
    j["fused_median_ms"] = m.main.median_ms;
    j["unfused_median_ms"] = m.unfused->median_ms;
    j["speedup"] = m.unfused->median_ms / m.main.median_ms;
    j["unfused_" + unit] = work / (m.unfused->median_ms * 1e-3) / 1e9;
    j["unfused"] = bench::timing_json(*m.unfused);
  }
  return j;
}

// Table rows (one per executor) of one measurement; `rates`: (column title, work per run) pairs,
// shown as work / median / 1e9.
std::string measured_table(const Measured& m, const BenchArgs& a,
                           const std::vector<std::pair<std::string, double>>& rates) {
  std::vector<std::vector<std::string>> rows = {{"executor", "median ms", "min ms", "max ms", "runs"}};
  for (const auto& r : rates) rows[0].push_back(r.first);
  auto row = [&](const std::string& name, const bench::Timing& t) {
    std::vector<std::string> r = {name, strf("%.2f", t.median_ms), strf("%.2f", t.min_ms),
                                  strf("%.2f", t.max_ms), std::to_string(t.runs)};
    for (const auto& rate : rates) r.push_back(strf("%.2f", rate.second / (t.median_ms * 1e-3) / 1e9));
    rows.push_back(r);
  };
  row(a.compare ? "fused" : bench::mode_name(plan_of(a)), m.main);
  if (m.unfused) row("unfused", *m.unfused);
  std::string s = bench::format_table(rows);
  if (m.unfused) s += strf("unfused / fused: %.2fx (medians)\n", m.unfused->median_ms / m.main.median_ms);
  return s;
}

// Appends the keys of `more` to `j`.
void merge(nlohmann::ordered_json& j, const nlohmann::ordered_json& more) {
  for (const auto& [k, v] : more.items()) j[k] = v;
}

std::string shape_str(const Shape& s) { return to_string(s); }
nlohmann::json shape_json(const Shape& s) { return nlohmann::json(std::vector<int64_t>(s.begin(), s.end())); }

// ---- stream --------------------------------------------------------------------------------------
int run_stream(const BenchArgs& a) {
  const bench::StreamResult r = bench::measure_stream(a.mib * 1024 * 1024, a.warmup, a.runs);
  if (a.json) {
    nlohmann::ordered_json j = {
        {"benchmark", "stream"}, {"threads", r.threads}, {"array_bytes", r.array_bytes}};
    merge(j, bench::timing_json(r.copy));
    j["gb_per_s"] = r.copy_gb_per_s;
    j["copy_gb_per_s"] = r.copy_gb_per_s;
    j["fma_gflop_per_s"] = r.fma_gflop_per_s;
    j["copy_best_gb_per_s"] = 2.0 * double(r.array_bytes) / (r.copy.min_ms * 1e-3) / 1e9;  // fastest run
    j["fma_best_gflop_per_s"] = 2.0 * double(r.fma_per_run) / (r.fma.min_ms * 1e-3) / 1e9;
    j["fma_median_ms"] = r.fma.median_ms;
    j["fma_per_run"] = r.fma_per_run;
    j["code"] = r.code;
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  std::printf(
      "bench stream: copy of two %s float32 arrays (bytes = read + write) and independent FMA chains\n",
      bench::human_bytes(r.array_bytes).c_str());
  std::printf("%d threads, %d timed runs after %d warm-up; code %s\n\n", r.threads, a.runs, a.warmup,
              r.code.c_str());
  std::vector<std::vector<std::string>> rows = {{"test", "median ms", "min ms", "max ms", "runs", "rate"}};
  rows.push_back({"copy", strf("%.2f", r.copy.median_ms), strf("%.2f", r.copy.min_ms),
                  strf("%.2f", r.copy.max_ms), std::to_string(r.copy.runs),
                  strf("%.1f GB/s", r.copy_gb_per_s)});
  rows.push_back({"fma", strf("%.2f", r.fma.median_ms), strf("%.2f", r.fma.min_ms),
                  strf("%.2f", r.fma.max_ms), std::to_string(r.fma.runs),
                  strf("%.1f GFLOP/s", r.fma_gflop_per_s)});
  std::printf("%s", bench::format_table(rows).c_str());
  return 0;
}

// ---- bn-relu -------------------------------------------------------------------------------------
// out = relu(batch_norm(x)) in training mode, and dx, dw, db for upstream gradient dy; returns
// out, new running mean, new running var, dx, dw, db (all lazy).
std::vector<Tensor> bn_relu_graph(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm,
                                  const Tensor& rv, const Tensor& dy) {
  const BatchNormResult bn = batch_norm(x, w, b, rm, rv, /*training=*/true);
  const Tensor out = bn.out.relu();
  const std::vector<Tensor> g = gradients(out, {x, w, b}, dy);
  return {out, bn.new_running_mean, bn.new_running_var, g[0], g[1], g[2]};
}

int run_bn_relu(const BenchArgs& a) {
  const Shape shape = bench::parse_shape(a.shape.empty() ? "256,32,32,32" : a.shape, 4, "--shape (N,H,W,C)");
  const int64_t c = shape[3];
  const Device dev = device_of(a);
  // x, dy (N,H,W,C); w, b, running mean, running var (C): realized leaves.
  Tensor x = Tensor::randn(shape).realize().to(dev);
  Tensor w = Tensor::uniform({c}, 0.5, 1.5).realize().to(dev);
  Tensor b = Tensor::uniform({c}, -0.5, 0.5).realize().to(dev);
  const Tensor rm = Tensor::zeros({c}).realize().to(dev), rv = Tensor::ones({c}).realize().to(dev);
  const Tensor dy = Tensor::randn(shape).realize().to(dev);
  x.set_requires_grad();
  w.set_requires_grad();
  b.set_requires_grad();
  const Schedule s = schedule(bn_relu_graph(x, w, b, rm, rv, dy));
  const Measured m = bench::measure(
      [&] {
        realize(bn_relu_graph(x, w, b, rm, rv, dy));
        sync(dev);
      },
      plan_of(a));
  const double moved = double(s.bytes_moved), least = double(s.bytes_min);
  if (a.json) {
    nlohmann::ordered_json j = {{"benchmark", "bn-relu"},
                                {"device", dev.str()},
                                {"shape", shape_json(shape)},
                                {"threads", omp_get_max_threads()},
                                {"mode", a.compare ? "compare" : bench::mode_name(plan_of(a))}};
    merge(j, measured_json(m, moved, "gb_per_s"));
    j["bytes_moved"] = s.bytes_moved;
    j["bytes_min"] = s.bytes_min;
    j["effective_gb_per_s"] = least / (m.main.median_ms * 1e-3) / 1e9;  // over bytes_min
    j["kernel_count"] = s.kernel_count;
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  std::printf(
      "bench bn-relu: BatchNorm2d training (running stats) + ReLU, forward and backward (dx, dw, db)\n");
  std::printf("x %s float32 NHWC; %s\n", shape_str(shape).c_str(), run_line(a).c_str());
  std::printf("fused schedule: %d generated kernels, bytes moved %s, bytes min %s (%.2fx)\n\n",
              s.kernel_count, bench::human_bytes(s.bytes_moved).c_str(),
              bench::human_bytes(s.bytes_min).c_str(), least > 0 ? moved / least : 0.0);
  std::printf("%s", measured_table(m, a, {{"GB/s (moved)", moved}, {"GB/s (min)", least}}).c_str());
  return 0;
}

// ---- relu-backward -------------------------------------------------------------------------------
int run_relu_backward(const BenchArgs& a) {
  const Shape shape = bench::parse_shape(a.shape.empty() ? "256,32,32,32" : a.shape, 4, "--shape (N,H,W,C)");
  const Device dev = device_of(a);
  Tensor out, dy;
  {
    NoGradGuard no_grad;
    out = Tensor::randn(shape).relu().realize().to(dev);  // (N,H,W,C), half zeros
    dy = Tensor::randn(shape).realize().to(dev);          // (N,H,W,C)
  }
  // ReLU's gradient rule (grad.cpp, Where): where(x <= 0, 0, dy); out <= 0 exactly where x <= 0.
  auto graph = [&] { return where(out <= 0.0, 0.0, dy); };
  const Schedule s = schedule(std::vector<Tensor>{graph()});
  const Measured m = bench::measure(
      [&] {
        graph().realize();
        sync(dev);
      },
      plan_of(a));
  const double bytes = 3.0 * double(numel(shape)) * 4;  // read out, dy; write dx
  if (a.json) {
    nlohmann::ordered_json j = {{"benchmark", "relu-backward"},
                                {"device", dev.str()},
                                {"shape", shape_json(shape)},
                                {"threads", omp_get_max_threads()},
                                {"mode", a.compare ? "compare" : bench::mode_name(plan_of(a))}};
    merge(j, measured_json(m, bytes, "gb_per_s"));
    j["bytes"] = int64_t(bytes);
    j["kernel_count"] = s.kernel_count;
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  std::printf("bench relu-backward: dx = where(out <= 0, 0, dy), bytes = 2 reads + 1 write (%s)\n",
              bench::human_bytes(int64_t(bytes)).c_str());
  std::printf("out, dy %s float32; %s\nfused schedule: %d generated kernels, bytes moved %s\n\n",
              shape_str(shape).c_str(), run_line(a).c_str(), s.kernel_count,
              bench::human_bytes(s.bytes_moved).c_str());
  std::printf("%s", measured_table(m, a, {{"GB/s", bytes}}).c_str());
  return 0;
}

// ---- conv ----------------------------------------------------------------------------------------
int run_conv(const BenchArgs& a) {
  const Shape shape = bench::parse_shape(a.shape.empty() ? "64,32,32,64" : a.shape, 4, "--shape (N,H,W,C)");
  AETHER_CHECK(a.channels > 0, "bench", "--channels must be positive, got ", a.channels);
  const int64_t n = shape[0], h = shape[1], wd = shape[2], c = shape[3], o = a.channels;
  Conv2dOptions opt;
  opt.padding = "same";
  const Device dev = device_of(a);
  // x (N,H,W,C), w (O,3,3,C), dy (N,H,W,O): realized leaves.
  const Tensor x = Tensor::randn(shape).realize().to(dev);
  const Tensor w = (Tensor::randn({o, 3, 3, c}) * (1.0 / std::sqrt(9.0 * double(c)))).realize().to(dev);
  const Tensor dy = Tensor::randn({n, h, wd, o}).realize().to(dev);
  Tensor xg = x.detach(), wg = w.detach();
  xg.set_requires_grad();
  wg.set_requires_grad();
  const double flop = 2.0 * double(n * h * wd * o * c) * 9;  // one pass
  const Measured fwd = bench::measure(
      [&] {
        NoGradGuard no_grad;
        conv2d(x, w, Tensor(), opt).realize();
        sync(dev);
      },
      plan_of(a));
  const Measured both = bench::measure(
      [&] {
        const Tensor y = conv2d(xg, wg, Tensor(), opt);
        const std::vector<Tensor> g = gradients(y, {xg, wg}, dy);
        realize({y, g[0], g[1]});
        sync(dev);
      },
      plan_of(a));
  if (a.json) {
    nlohmann::ordered_json j = {{"benchmark", "conv"},
                                {"device", dev.str()},
                                {"shape", shape_json(shape)},
                                {"channels", o},
                                {"threads", omp_get_max_threads()},
                                {"mode", a.compare ? "compare" : bench::mode_name(plan_of(a))}};
    merge(j, measured_json(fwd, flop, "gflop_per_s"));  // the forward pass
    j["flop_per_pass"] = flop;
    j["forward_backward"] = measured_json(both, 3 * flop, "gflop_per_s");
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  std::printf("bench conv: conv2d 3x3 'same', no bias, x %s NHWC -> %lld channels (%.2f GFLOP per pass)\n",
              shape_str(shape).c_str(), static_cast<long long>(o), flop / 1e9);
  std::printf("%s\n\nforward:\n%s", run_line(a).c_str(), measured_table(fwd, a, {{"GFLOP/s", flop}}).c_str());
  std::printf("\nforward + backward (y, dx, dw: 3 passes):\n%s",
              measured_table(both, a, {{"GFLOP/s", 3 * flop}}).c_str());
  return 0;
}

// ---- step ----------------------------------------------------------------------------------------
// One training step as Model::train does it (src/model/model_train.cpp), on fixed random data.
int run_step(const BenchArgs& a) {
  AETHER_CHECK(a.batch > 0, "bench", "--batch must be positive, got ", a.batch);
  const Shape image{32, 32, 3};
  const Preset p = make_preset(a.model, image, 10);
  AETHER_CHECK(p.config.loss == "cross_entropy", "bench", "preset ", a.model, " uses loss ", p.config.loss,
               "; bench step supports cross_entropy");
  Model model;
  for (auto& l : p.network->children()) model.add(l.second);
  model.configure(p.config).finalize(image);
  const Device dev = device_of(a);
  model.to(dev);  // parameters, buffers, optimizer state
  nn::Sequential& net = model.network();
  optim::Optimizer& opt = *model.optimizer();
  const Tensor x = Tensor::randn({a.batch, 32, 32, 3}).realize().to(dev);  // (B,32,32,3), normalised
  const Tensor labels = Tensor::randint(0, 10, {a.batch}, DType::int64).realize().to(dev);  // (B)
  // A constant rate: the preset's peak / 25 (one-cycle's starting rate); random labels diverge at the peak.
  const double lr = p.config.lr / 25;
  double last_loss = 0;
  model.set_precision(a.precision);
  // --communicator: the data-parallel step (Model::train_step) of a world of one on Gloo or NCCL:
  // every gradient bucket packed, all-reduced through the communicator and unpacked.
  std::unique_ptr<dist::Communicator> comm;
  if (a.communicator == "gloo") comm = dist::Communicator::create(dist::Options{});
  if (a.communicator == "nccl") comm = dist::create_nccl(dist::Options{});
  AETHER_CHECK(a.communicator.empty() || comm, "bench", "--communicator must be gloo or nccl, got '",
               a.communicator, "'");
  auto step = [&] {
    net.train();
    opt.set_lr(lr);
    if (comm) {
      last_loss = model.train_step(*comm, x, labels, 1.0).first;
      return;
    }
    // Forward, loss, backward, clipping, accuracy and the update, recorded as Model::train records
    // them (in the model's precision); parameters, optimizer state, buffers, loss and accuracy: one realize.
    const Model::Step s = model.record_train_step(x, labels);
    realize(s.tensors);
    opt.zero_grad();
    last_loss = s.loss.item<double>();
  };
  const Measured m = bench::measure(step, plan_of(a));
  // Memory of one more (steady-state) step: the high-water mark of live tensor bytes, reset just
  // before it (so it includes what lives between steps: parameters, optimizer state, the data), and
  // the system allocations it made for tensor storage (0 once the host block cache is warm).
  // Also the conv weights and gradients reordered between layouts in that step (backend.h).
  int64_t peak_bytes = 0, held_bytes = 0, system_allocs = 0, reorders = 0;
  {
    const bool was = fusion_enabled();
    set_fusion(!a.unfused);
    const Buffer::AllocStats before = Buffer::alloc_stats();
    const int64_t reorders_before = conv_weight_reorders();
    held_bytes = before.live_bytes;
    Buffer::reset_peak_bytes();
    step();
    peak_bytes = Buffer::peak_bytes();
    system_allocs = Buffer::alloc_stats().system_allocs - before.system_allocs;
    reorders = conv_weight_reorders() - reorders_before;
    set_fusion(was);
  }
  std::string breakdown;
  if (a.breakdown) {
    const bool was = fusion_enabled();
    set_fusion(!a.unfused);
    reset_op_profile();
    set_profiling(true);
    constexpr int kProfiledSteps = 5;  // the table is per step, summed over these (less noise than one)
    for (int i = 0; i < kProfiledSteps; ++i) step();
    set_profiling(false);
    set_fusion(was);
    // The limits each line is measured against: this machine's copy bandwidth and FMA peak, now.
    const bench::StreamResult lim = bench::measure_stream(int64_t(64) << 20, 1, 5);
    breakdown = bench::strf(
                    "machine limits now: copy %.1f GB/s, FMA %.1f GFLOP/s (as aether bench stream); "
                    "per step, over %d profiled steps\n",
                    lim.copy_gb_per_s, lim.fma_gflop_per_s, kProfiledSteps) +
                op_profile_report(lim.copy_gb_per_s, lim.fma_gflop_per_s, kProfiledSteps);
    reset_op_profile();
  }
  const double images = double(a.batch);
  if (a.json) {
    nlohmann::ordered_json j = {{"benchmark", "step"},
                                {"device", dev.str()},
                                {"model", p.name},
                                {"batch", a.batch},
                                {"precision", a.precision},
                                {"communicator", a.communicator.empty() ? "none" : a.communicator},
                                {"threads", omp_get_max_threads()},
                                {"mode", a.compare ? "compare" : bench::mode_name(plan_of(a))}};
    merge(j, bench::timing_json(m.main));
    j["images_per_s"] = images / (m.main.median_ms * 1e-3);
    if (m.unfused) {
      j["fused_median_ms"] = m.main.median_ms;
      j["unfused_median_ms"] = m.unfused->median_ms;
      j["speedup"] = m.unfused->median_ms / m.main.median_ms;
      j["unfused_images_per_s"] = images / (m.unfused->median_ms * 1e-3);
      j["unfused"] = bench::timing_json(*m.unfused);
    }
    j["last_loss"] = last_loss;
    j["peak_bytes"] = peak_bytes;
    j["held_bytes"] = held_bytes;
    j["system_allocs_per_step"] = system_allocs;
    j["conv_weight_reorders_per_step"] = reorders;
    if (a.breakdown) j["breakdown"] = breakdown;
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  std::printf("bench step: one training step of %s (%s, lr %g, %s%s) on random (%lld, 32, 32, 3) images\n",
              p.name.c_str(), p.config.optimizer.c_str(), lr, a.precision.c_str(),
              a.communicator.empty() ? "" : (", all-reduced on " + a.communicator).c_str(),
              static_cast<long long>(a.batch));
  std::printf("%s\n\n", run_line(a).c_str());
  // images/s is a rate over the median; the table helper divides work by 1e9, so scale it back.
  std::printf("%s", measured_table(m, a, {{"images/s", images * 1e9}}).c_str());
  std::printf("loss after the last step: %.4f\n", last_loss);
  std::printf("peak tensor memory in a step: %s (%s held between steps); system allocations per step: %lld\n",
              bench::human_bytes(peak_bytes).c_str(), bench::human_bytes(held_bytes).c_str(),
              static_cast<long long>(system_allocs));
  std::printf("conv weights and weight gradients reordered between layouts per step: %lld\n",
              static_cast<long long>(reorders));
  if (a.breakdown)
    std::printf("\nper-kernel time per step (%s):\n%s", bench::mode_name(plan_of(a)), breakdown.c_str());
  return 0;
}

int run_bench(BenchArgs& a, const std::map<std::string, CLI::Option*>& given) {
  check_numbers(a);
  std::string known;
  for (const auto& n : kBenchNames) known += (known.empty() ? "" : ", ") + n;
  bool found = false;
  for (const auto& n : kBenchNames) found = found || n == a.name;
  AETHER_CHECK(found, "bench", "unknown benchmark '", a.name, "' (known: ", known, ")");
  // Options that only some benchmarks take.
  const std::map<std::string, std::vector<std::string>> takes = {
      {"--shape", {"bn-relu", "relu-backward", "conv"}},
      {"--channels", {"conv"}},
      {"--model", {"step"}},
      {"--batch", {"step"}},
      {"--breakdown", {"step"}},
      {"--precision", {"step"}},
      {"--communicator", {"step"}},
      {"--mib", {"stream"}},
      {"--device", {"bn-relu", "relu-backward", "conv", "step"}},
      {"--compare", {"bn-relu", "relu-backward", "conv", "step"}},
      {"--unfused", {"bn-relu", "relu-backward", "conv", "step"}}};
  for (const auto& [opt, names] : takes) {
    bool ok = given.at(opt)->count() == 0;
    for (const auto& n : names) ok = ok || n == a.name;
    AETHER_CHECK(ok, "bench", opt, " does not apply to '", a.name, "'");
  }
  AETHER_CHECK(!(a.compare && a.unfused), "bench", "--compare runs both executors; drop --unfused");
  AETHER_CHECK(a.runs >= 1 && a.warmup >= 0, "bench", "need --runs >= 1 and --warmup >= 0");
  if (a.threads > 0) omp_set_num_threads(a.threads);
  if (a.name == "stream") return run_stream(a);
  if (a.name == "bn-relu") return run_bn_relu(a);
  if (a.name == "relu-backward") return run_relu_backward(a);
  if (a.name == "conv") return run_conv(a);
  return run_step(a);
}
}  // namespace

void register_bench(CLI::App& app) {
  static BenchArgs a;
  static std::map<std::string, CLI::Option*> given;
  std::string names;
  for (const auto& n : kBenchNames) names += (names.empty() ? "" : ", ") + n;
  auto* cmd = app.add_subcommand("bench", "Time a workload: fused executor vs reference, GB/s, GFLOP/s");
  cmd->add_option("name", a.name, "a benchmark: " + names)->required();
  add_text_option(*cmd, "--runs", a.runs_text, "timed runs, 1..1000000 (default 10)", "INT");
  add_text_option(*cmd, "--warmup", a.warmup_text, "untimed runs first, 0..1000000 (default 2)", "INT");
  add_text_option(*cmd, "--threads", a.threads_text, "OpenMP threads, 0..4096 (0, the default: OpenMP's)",
                  "INT");
  given["--unfused"] =
      cmd->add_flag("--unfused", a.unfused, "run the reference backend (one primitive per kernel)");
  given["--compare"] =
      cmd->add_flag("--compare", a.compare, "fused and unfused alternately; print both and the ratio");
  cmd->add_flag("--json", a.json, "print one JSON object");
  given["--device"] =
      cmd->add_option("--device", a.device, "bn-relu, relu-backward, conv, step: cpu, cuda or cuda:N")
          ->capture_default_str();
  given["--shape"] = cmd->add_option("--shape", a.shape,
                                     "N,H,W,C (bn-relu, relu-backward: 256,32,32,32; conv: 64,32,32,64)");
  add_text_option(*cmd, "--channels", a.channels_text, "conv output channels, 1..65536 (default 64)", "INT");
  given["--channels"] = a.channels_text.option;
  given["--model"] =
      cmd->add_option("--model", a.model, "step: a preset (" + preset_list() + ")")->capture_default_str();
  add_text_option(*cmd, "--batch", a.batch_text, "step: batch size, 1..65536 (default 256)", "INT");
  given["--batch"] = a.batch_text.option;
  given["--breakdown"] =
      cmd->add_flag("--breakdown", a.breakdown, "step: per-kernel time per step, over 5 profiled steps");
  given["--precision"] =
      cmd->add_option("--precision", a.precision, "step: float32, bfloat16 or float16 (fp32, bf16, fp16)")
          ->capture_default_str();
  given["--communicator"] = cmd->add_option(
      "--communicator", a.communicator, "step: time the data-parallel step of a world of one: gloo or nccl");
  add_text_option(*cmd, "--mib", a.mib_text, "stream: MiB per array, 1..4096 (default 256)", "INT");
  given["--mib"] = a.mib_text.option;
  cmd->callback([] { exit_code() = run_bench(a, given); });
}

}  // namespace aether::cli
