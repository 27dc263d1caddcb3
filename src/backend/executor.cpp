// The one executor (backend/runtime.h): schedule -> memory-aware order -> lower each generated
// kernel to the IR -> render for the device's target -> compile (together; disk-cached) -> run, with
// library calls, views and fallbacks through the device's run_nodes. The same code for every device:
// only DeviceRuntime's calls differ between the CPU and a GPU.
//
// Lowering happens for the whole schedule before anything runs (so the kernels compile together):
// a value stored by an earlier kernel is assumed to be dense, and just before a kernel runs its
// inputs' real views are checked against what it was compiled for (re-lowered if not). A kernel the
// IR cannot express yet runs its nodes through run_nodes (a "fallback"). A library kernel with an
// epilogue (schedule pass library_epilogues) runs as one library call (run_epilogue), or node by
// node when the library refuses.
//
// Memory (backend/liveness.h): the kernels run in an order that frees values early (memory_order),
// and after each kernel the executor drops its own references to the nodes no later kernel uses, so
// an intermediate value is freed after its last reader, not at the end of the whole schedule, and
// its block goes back to the device's block cache for the next kernels.
//
// The plan cache: a graph with the structure of an earlier one (graph_signature, which includes the
// device) reuses its schedule, lowered kernels, programs and liveness, re-bound to the new nodes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "aether/backend/backend.h"
#include "aether/core/error.h"
#include "backend/graph_signature.h"
#include "backend/liveness.h"
#include "backend/runtime.h"
#include "codegen/compiler.h"
#include "codegen/lower.h"
#include "codegen/render.h"
#include "core/config.h"
#include "schedule/schedule.h"

namespace aether {

namespace {

bool same_view(const View& a, const View& b) {
  return a.shape == b.shape && a.strides == b.strides && a.offset == b.offset && a.mask == b.mask;
}

struct Planned {
  std::optional<codegen::Lowered> lowered;
  ProgramPtr program;  // null: not compiled (the kernel runs through run_nodes)
};

void run_generated(DeviceRuntime& rt, const Kernel& k, Planned& p) {
  codegen::Lowered& l = *p.lowered;
  // The inputs must be realized with the views the kernel was compiled for.
  bool views_ok = true;
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    AETHER_CHECK(l.inputs[i]->realized(), "fused", "input ", l.inputs[i]->id, " of kernel ", l.kernel.name,
                 " is not computed");
    views_ok = views_ok && same_view(l.inputs[i]->view, l.views[i]);
  }
  if (!views_ok) {  // re-lower with the real views (rare: a fallback produced a non-dense value)
    std::string why;
    auto relowered = codegen::lower(
        k, [](const Node& n) { return n.realized() ? std::optional<View>(n.view) : std::nullopt; }, &why);
    p.program = nullptr;
    if (relowered) {
      try {
        p.program =
            rt.compile(k.outputs.front()->device.index, {codegen::render(rt.target(), relowered->kernel)})[0];
      } catch (const Error&) {  // a renderer gap
        p.program = nullptr;
      }
      if (p.program) p.lowered = std::move(relowered);
    }
    if (!p.program) {
      codegen::note_fallback();
      return run_unrealized(rt, k.outputs);
    }
  }
  codegen::Lowered& L = *p.lowered;
  const ir::Kernel& K = L.kernel;
  const Device device = L.outputs.front()->device;
  // Buffers in ir::Kernel::bufs order: the outputs and the inputs, as lowering numbered them.
  std::vector<BufferPtr> outs;
  for (const NodePtr& o : L.outputs)
    outs.push_back(std::make_shared<Buffer>(o->device, o->dtype, numel(o->shape), /*zero_fill=*/false));
  std::vector<void*> bufs(K.bufs.size(), nullptr);
  size_t next_out = 0, next_in = 0;
  for (size_t b = 0; b < K.bufs.size(); ++b)
    bufs[b] = K.bufs[b].output ? outs.at(next_out++)->data() : L.inputs.at(next_in++)->buffer->data();
  // Scratch from the device's block cache too (a steady-state step allocates nothing from the system).
  std::optional<Buffer> scratch;  // (scratch_bytes) bytes
  if (p.program->scratch_bytes > 0)
    scratch.emplace(device, DType::uint8, p.program->scratch_bytes, /*zero_fill=*/false);
  rt.launch(device.index, *p.program, bufs, scratch ? scratch->data() : nullptr, K.fparams, K.iparams);
  for (size_t j = 0; j < L.outputs.size(); ++j)
    L.outputs[j]->set_value(outs[j], View::contiguous(L.outputs[j]->shape));
}

// Drops the executor's references held for kernel i, which never runs again: its members,
// outputs, inlined nodes and inputs, and its lowered form.
void release_kernel(Kernel& k, Planned& p) {
  k.nodes = {};
  k.outputs = {};
  k.inlined = {};
  k.inputs = {};
  k.epilogue = {};
  p = Planned{};
}

// Everything a run needs: the schedule (kernels in run order), each kernel's lowered and compiled
// form, and the liveness of the values it refers to.
struct Prepared {
  Schedule s;
  std::vector<Planned> plan;
  Liveness live;
};

Prepared prepare(DeviceRuntime& rt, const std::vector<NodePtr>& targets) {
  Prepared P;
  Schedule& s = P.s;
  ScheduleOptions options;
  options.library = rt.capabilities();  // what the device's library calls absorb
  s = schedule(targets, options);
  reorder_kernels(s, memory_order(s, targets));  // kernel i below: the i-th to run
  const int debug = debug_level();
  if (debug >= 2) std::fprintf(stderr, "aether schedule: %s\n", s.to_json().dump().c_str());

  // Lower and render every generated kernel, then compile them together.
  std::unordered_set<const Node*> stored;
  auto leaf = [&](const Node& n) -> std::optional<View> {
    if (n.realized()) return n.view;
    if (stored.count(&n)) return View::contiguous(n.shape);
    return std::nullopt;
  };
  std::vector<Planned>& plan = P.plan;
  plan.resize(s.kernels.size());
  std::vector<codegen::Rendered> sources;
  std::vector<size_t> source_of;
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const Kernel& k = s.kernels[i];
    if (k.generated()) {
      std::string why;
      plan[i].lowered = codegen::lower(k, leaf, &why);
      std::optional<codegen::Rendered> r;
      if (plan[i].lowered) {
        try {
          r = codegen::render(rt.target(), plan[i].lowered->kernel);
        } catch (const Error& e) {  // a renderer gap: run this kernel through run_nodes, say why
          why = e.what();
          plan[i].lowered.reset();
        }
      }
      if (plan[i].lowered) {
        if (debug >= 3) std::fprintf(stderr, "%s\n", r->source.c_str());
        sources.push_back(std::move(*r));
        source_of.push_back(i);
      } else if (debug >= 1) {
        std::fprintf(stderr, "aether: kernel %zu runs one node at a time: %s\n", i, why.c_str());
      }
    }
    if (k.kind != KernelKind::ViewOnly)
      for (const NodePtr& o : k.outputs) stored.insert(o.get());
  }
  if (!sources.empty()) {
    const auto programs = rt.compile(targets.front()->device.index, sources);
    for (size_t j = 0; j < programs.size(); ++j) plan[source_of[j]].program = programs[j];
  }
  P.live = liveness(s, targets);
  return P;
}

// ---- the plan cache -------------------------------------------------------------------------------
// A training step's graph has the same structure every step (graph_signature), so its schedule,
// lowered kernels, compiled functions and liveness are kept, with nodes named by their position in
// the signature's canonical order, and re-bound to the new step's nodes: scheduling, lowering and
// rendering run once per graph structure, not once per step. Kernel parameters (float constants,
// random seeds) are re-read from the new nodes. AETHER_PLAN_CACHE=0 turns the cache off.
struct CachedKernel {
  KernelKind kind = KernelKind::Elementwise;
  std::vector<int> nodes, outputs, inlined;
  Shape shape;
  std::vector<int> reduce_axes;
  std::vector<std::pair<EpilogueOp::Kind, int>> epilogue;  // Kernel::epilogue (operand -1: none)
  bool lowered = false;
  ir::Kernel kernel;
  std::vector<int> inputs, lowered_outputs;  // Lowered::inputs / outputs
  std::vector<View> views;
  std::vector<int> fparam_src;  // position of the Const node giving fparams[j]
  std::vector<int> iparam_src;  // position of the Rand node giving iparams[2j], iparams[2j + 1]
  ProgramPtr program;
};
struct CachedPlan {
  std::vector<uint64_t> words;
  uint64_t hash = 0;
  std::vector<CachedKernel> kernels;
  std::vector<int> inlined;
  std::vector<std::vector<int>> release_after;
  std::vector<int> unused;
};

bool plan_cache_enabled() { return config().plan_cache; }

// The plan in positions; nullopt when some node is not in the signature or a parameter's source
// cannot be identified (then the graph is simply prepared again next time).
std::optional<CachedPlan> capture(const Prepared& P, const GraphSignature& g) {
  CachedPlan c;
  bool ok = true;
  auto at = [&](const Node* n) {
    auto it = g.pos.find(n);
    if (it == g.pos.end()) {
      ok = false;
      return -1;
    }
    return it->second;
  };
  auto positions = [&](const std::vector<NodePtr>& v) {
    std::vector<int> out;
    for (const NodePtr& n : v) out.push_back(at(n.get()));
    return out;
  };
  for (size_t i = 0; i < P.s.kernels.size(); ++i) {
    const Kernel& k = P.s.kernels[i];
    const Planned& pl = P.plan[i];
    CachedKernel ck;
    ck.kind = k.kind;
    ck.nodes = positions(k.nodes);
    ck.outputs = positions(k.outputs);
    ck.inlined = positions(k.inlined);
    ck.shape = k.shape;
    ck.reduce_axes = k.reduce_axes;
    for (const EpilogueOp& e : k.epilogue)
      ck.epilogue.emplace_back(e.kind, e.operand ? at(e.operand.get()) : -1);
    if (pl.lowered && pl.program) {
      const codegen::Lowered& l = *pl.lowered;
      ck.lowered = true;
      ck.kernel = l.kernel;
      ck.inputs = positions(l.inputs);
      ck.lowered_outputs = positions(l.outputs);
      ck.views = l.views;
      ck.program = pl.program;
      std::vector<const Node*> members;
      for (const NodePtr& n : k.nodes) members.push_back(n.get());
      for (const NodePtr& n : k.inlined) members.push_back(n.get());
      for (double v : l.kernel.fparams) {
        int src = -1;
        for (const Node* n : members)
          if (n->op == Op::Const && is_float(n->dtype) && std::get<double>(n->arg) == v) src = at(n);
        ok = ok && src >= 0;
        ck.fparam_src.push_back(src);
      }
      for (size_t j = 0; j + 1 < l.kernel.iparams.size(); j += 2) {
        int src = -1;
        for (const Node* n : members)
          if (n->op == Op::Rand && std::get<RandArg>(n->arg).seed == l.kernel.iparams[j] &&
              std::get<RandArg>(n->arg).stream == l.kernel.iparams[j + 1])
            src = at(n);
        ok = ok && src >= 0;
        ck.iparam_src.push_back(src);
      }
    }
    c.kernels.push_back(std::move(ck));
  }
  c.inlined = positions(P.s.inlined);
  for (const auto& r : P.live.release_after) {
    c.release_after.emplace_back();
    for (const Node* n : r) c.release_after.back().push_back(at(n));
  }
  for (const Node* n : P.live.unused) c.unused.push_back(at(n));
  if (!ok) return std::nullopt;
  c.words = g.words;
  c.hash = g.hash;
  return c;
}

// The cached plan bound to the nodes of a graph with the same signature.
Prepared instantiate(const CachedPlan& c, const GraphSignature& g) {
  auto node = [&](int p) { return g.order[size_t(p)]; };
  auto nodes = [&](const std::vector<int>& v) {
    std::vector<NodePtr> out;
    out.reserve(v.size());
    for (int p : v) out.push_back(node(p));
    return out;
  };
  Prepared P;
  P.plan.resize(c.kernels.size());
  for (size_t i = 0; i < c.kernels.size(); ++i) {
    const CachedKernel& ck = c.kernels[i];
    Kernel k;
    k.kind = ck.kind;
    k.nodes = nodes(ck.nodes);
    k.outputs = nodes(ck.outputs);
    k.inlined = nodes(ck.inlined);
    k.shape = ck.shape;
    k.reduce_axes = ck.reduce_axes;
    for (const auto& [kind, p] : ck.epilogue) k.epilogue.push_back({kind, p >= 0 ? node(p) : nullptr});
    P.s.kernels.push_back(std::move(k));
    if (!ck.lowered) continue;
    codegen::Lowered l;
    l.kernel = ck.kernel;
    for (size_t j = 0; j < ck.fparam_src.size(); ++j)
      l.kernel.fparams[j] = std::get<double>(g.order[size_t(ck.fparam_src[j])]->arg);
    for (size_t j = 0; j < ck.iparam_src.size(); ++j) {
      const auto& r = std::get<RandArg>(g.order[size_t(ck.iparam_src[j])]->arg);
      l.kernel.iparams[2 * j] = r.seed;
      l.kernel.iparams[2 * j + 1] = r.stream;
    }
    l.inputs = nodes(ck.inputs);
    l.outputs = nodes(ck.lowered_outputs);
    l.views = ck.views;
    P.plan[i].lowered = std::move(l);
    P.plan[i].program = ck.program;
  }
  P.s.inlined = nodes(c.inlined);
  for (const auto& r : c.release_after) {
    P.live.release_after.emplace_back();
    for (int p : r) P.live.release_after.back().push_back(g.order[size_t(p)].get());
  }
  for (int p : c.unused) P.live.unused.push_back(g.order[size_t(p)].get());
  return P;
}

constexpr size_t kPlanCacheSize = 16;
std::mutex g_plans_mu;
std::list<CachedPlan> g_plans;  // most recently used first
int64_t g_plan_hits = 0, g_plan_misses = 0;

// Runs a prepared plan: each kernel in order, releasing what no later kernel needs.
void run(DeviceRuntime& rt, Prepared& P, const std::vector<NodePtr>& targets) {
  Schedule& s = P.s;
  std::vector<Planned>& plan = P.plan;
  const Liveness& live = P.live;
  const int debug = debug_level();
  // Liveness: after kernel i, the nodes no later kernel refers to. Kernel i's own references go with
  // release_kernel(); the schedule's list of inlined nodes is the only other holder to clear.
  std::unordered_map<const Node*, size_t> inlined_at;
  for (size_t j = 0; j < s.inlined.size(); ++j) inlined_at.emplace(s.inlined[j].get(), j);
  auto drop_inlined = [&](const std::vector<const Node*>& nodes) {
    for (const Node* n : nodes) {
      auto it = inlined_at.find(n);
      if (it != inlined_at.end()) s.inlined[it->second].reset();
    }
  };
  drop_inlined(live.unused);
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const Kernel& k = s.kernels[i];
    const auto t0 = std::chrono::steady_clock::now();
    std::string name;
    bool ran_generated = false, fused_conv = false;
    double moved = 0;  // bytes the generated kernel read and wrote (its buffers, once each)
    if (k.generated() && plan[i].lowered && plan[i].program) {
      name = plan[i].lowered->kernel.name;
      if (profiling_enabled())
        for (const ir::Buf& b : plan[i].lowered->kernel.bufs)
          moved += double(b.numel * int64_t(dtype_size(b.dtype)));
      run_generated(rt, k, plan[i]);
      ran_generated = plan[i].program != nullptr;
    } else {
      if (k.generated()) codegen::note_fallback();
      name = k.generated() ? "reference" : op_name(k.nodes.back()->op);
      fused_conv = k.kind == KernelKind::Library && !k.epilogue.empty() && rt.run_epilogue(k);
      if (fused_conv) name = "Conv2d+postops";
      if (!fused_conv)
        run_unrealized(rt, k.kind == KernelKind::ViewOnly || k.outputs.empty() ? k.nodes : k.outputs);
    }
    if (debug >= 1 || profiling_enabled()) {
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (debug >= 1)
        std::fprintf(stderr, "aether kernel %3zu %-10s %-44s %9.3f ms\n", i, kernel_kind_name(k.kind),
                     name.c_str(), sec * 1e3);
      // Library calls, views and fallbacks ran through run_nodes, which records each node.
      if (profiling_enabled() && (ran_generated || fused_conv))
        record_op_time(name.c_str(), sec, numel(k.shape), moved, 0);
    }
    release_kernel(s.kernels[i], plan[i]);
    drop_inlined(live.release_after[i]);
    if (debug >= 2)
      std::fprintf(stderr, "aether kernel %3zu released %zu nodes; live tensor bytes %lld\n", i,
                   live.release_after[i].size(), static_cast<long long>(Buffer::live_bytes()));
  }
  // Targets that are views of stored values (or realized by no kernel) are made real here.
  run_unrealized(rt, targets);
}

}  // namespace

void run_unrealized(DeviceRuntime& rt, const std::vector<NodePtr>& targets) {
  const std::vector<Node*> order = unrealized_in_order(targets);
  if (!order.empty()) rt.run_nodes(order);
}

void execute(DeviceRuntime& rt, const std::vector<NodePtr>& targets) {
  if (targets.empty()) return;
  if (!rt.can_compile()) return run_unrealized(rt, targets);  // no compiler: one primitive per kernel
  if (!plan_cache_enabled()) {
    Prepared P = prepare(rt, targets);
    return run(rt, P, targets);
  }
  GraphSignature g = graph_signature(targets);
  std::optional<Prepared> P;
  {
    std::lock_guard<std::mutex> lock(g_plans_mu);
    for (auto it = g_plans.begin(); it != g_plans.end(); ++it)
      if (it->hash == g.hash && it->words == g.words) {
        g_plans.splice(g_plans.begin(), g_plans, it);
        P = instantiate(g_plans.front(), g);
        ++g_plan_hits;
        break;
      }
  }
  if (!P) {
    {
      std::lock_guard<std::mutex> lock(g_plans_mu);
      ++g_plan_misses;
    }
    P = prepare(rt, targets);
    if (auto c = capture(*P, g)) {
      std::lock_guard<std::mutex> lock(g_plans_mu);
      g_plans.push_front(std::move(*c));
      if (g_plans.size() > kPlanCacheSize) g_plans.pop_back();
    }
  }
  g = {};  // its node list would keep every value of the graph alive to the end of the run
  run(rt, *P, targets);
}

PlanCacheStats plan_cache_stats() {
  std::lock_guard<std::mutex> lock(g_plans_mu);
  return {g_plan_hits, g_plan_misses, int64_t(g_plans.size())};
}

void plan_cache_clear() {
  std::lock_guard<std::mutex> lock(g_plans_mu);
  g_plans.clear();
}

}  // namespace aether
