// The fused CPU executor: schedule -> lower each generated kernel to the IR -> render C++ ->
// compile (in parallel, disk-cached) -> run, with library calls (oneDNN), views and fallbacks on
// library_backend() (the reference backend's code with the fast library kernels).
//
// Lowering happens for the whole schedule before anything runs (so the kernels compile in
// parallel): a value stored by an earlier kernel is assumed to be dense, and just before a kernel
// runs its inputs' real views are checked against what it was compiled for (re-lowered if not).
// A kernel the IR cannot express yet runs its nodes on library_backend() (a "fallback").
// A conv library kernel with a post-op chain (schedule pass library_epilogues) runs as one oneDNN
// convolution with post-ops (run_conv_postops), or node by node when oneDNN refuses.
//
// Memory (backend/liveness.h): the kernels run in an order that frees values early (memory_order),
// and after each kernel the executor drops its own references to the nodes no later kernel uses, so
// an intermediate value is freed after its last reader, not at the end of the whole schedule, and
// its block goes back to the host block cache for the next kernels.
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
#include "aether/codegen/compiler.h"
#include "aether/core/error.h"
#include "aether/schedule/schedule.h"
#include "backend/cpu/kernels.h"
#include "backend/graph_signature.h"
#include "backend/liveness.h"
#include "codegen/lower.h"
#include "codegen/render.h"
#include "core/config.h"

namespace aether {

Backend& library_backend();  // backend/cpu/reference.cpp

namespace {

bool same_view(const View& a, const View& b) {
  return a.shape == b.shape && a.strides == b.strides && a.offset == b.offset && a.mask == b.mask;
}

// Runs the unrealized ancestors of `targets` (and the targets) on library_backend(): the
// reference backend's code, with library ops on oneDNN / pool.cpp.
void reference_realize(const std::vector<NodePtr>& targets) {
  const std::vector<Node*> order = unrealized_in_order(targets);
  if (!order.empty()) library_backend().execute(order);
}

bool is_zero_const(const Node* n) {
  while (n && op_kind(n->op) == OpKind::Movement && !n->realized()) n = n->srcs[0].get();
  const double* d = n ? std::get_if<double>(&n->arg) : nullptr;
  return n && n->op == Op::Const && d && *d == 0.0;
}

const char* elements(const Node& n) {
  return static_cast<const char*>(n.buffer->data()) + n.view.offset * dtype_size(n.dtype);
}

// A library kernel holding a float32 Conv2d and its post-op chain (schedule pass library_epilogues):
// one oneDNN convolution with post-ops writing the chain's last node. False (nothing computed but
// the kernel's inputs) when anything is not as expected or oneDNN refuses: the caller then runs
// the nodes one at a time on the reference backend.
bool run_conv_postops(const Kernel& k) {
  if (library_impl() != LibraryImpl::onednn || k.outputs.size() != 1) return false;
  const NodePtr& conv = k.nodes[0];
  if (conv->op != Op::Conv2d || conv->dtype != DType::float32) return false;
  struct Step {
    cpu::ConvPostOp::Kind kind;
    NodePtr operand;  // null for Relu
  };
  std::vector<Step> steps;
  const Node* prev = conv.get();
  const Node* cmp = nullptr;  // ReLU's y <= 0, waiting for its where()
  for (size_t i = 1; i < k.nodes.size(); ++i) {
    const Node& m = *k.nodes[i];
    if (op_kind(m.op) == OpKind::Movement) continue;  // a view of an operand
    if (m.op == Op::CmpLe && !cmp && m.srcs[0].get() == prev && is_zero_const(m.srcs[1].get())) {
      cmp = &m;
      continue;
    }
    using K = cpu::ConvPostOp::Kind;
    if (m.op == Op::Where && cmp && m.srcs[0].get() == cmp && is_zero_const(m.srcs[1].get()) &&
        m.srcs[2].get() == prev) {
      steps.push_back({K::Relu, nullptr});
      cmp = nullptr;
    } else if (m.op == Op::Max && m.srcs[0].get() == prev && is_zero_const(m.srcs[1].get())) {
      steps.push_back({K::Relu, nullptr});
    } else if (m.op == Op::Max && m.srcs[1].get() == prev && is_zero_const(m.srcs[0].get())) {
      steps.push_back({K::Relu, nullptr});
    } else if ((m.op == Op::Add || m.op == Op::Mul) && (m.srcs[0].get() == prev || m.srcs[1].get() == prev)) {
      steps.push_back({m.op == Op::Add ? K::Add : K::Mul, m.srcs[m.srcs[0].get() == prev ? 1 : 0]});
    } else if (m.op == Op::Sub && m.srcs[0].get() == prev) {
      steps.push_back({K::Sub, m.srcs[1]});
    } else {
      return false;
    }
    prev = &m;
  }
  if (cmp || prev != k.outputs[0].get()) return false;
  // Inputs: x, w and the operands, as realized values (views of stored buffers).
  std::vector<NodePtr> need{conv->srcs[0], conv->srcs[1]};
  for (const Step& st : steps)
    if (st.operand) need.push_back(st.operand);
  reference_realize(need);
  const Node &x = *conv->srcs[0], &w = *conv->srcs[1];
  if (!x.view.is_contiguous() || !w.view.is_contiguous()) return false;
  // y (N,OH,OW,O); per-channel operands seen as (O) with strides (0,0,0,1).
  const Shape& ys = conv->shape;
  std::vector<cpu::ConvPostOp> ops;
  const Node* residual = nullptr;
  for (const Step& st : steps) {
    if (!st.operand) {
      ops.push_back({st.kind, nullptr});
      continue;
    }
    const Node& o = *st.operand;
    if (o.dtype != DType::float32 || o.shape != ys) return false;
    const View& v = o.view;
    const bool channel = v.ndim() == 4 && v.strides[0] == 0 && v.strides[1] == 0 && v.strides[2] == 0 &&
                         (v.strides[3] == 1 || ys[3] == 1) && !v.mask;
    if (channel) {
      const bool bias = st.kind == cpu::ConvPostOp::Kind::Add && ops.empty();
      ops.push_back({bias ? cpu::ConvPostOp::Kind::Bias : st.kind, elements(o)});
    } else if (st.kind == cpu::ConvPostOp::Kind::Add && !residual && o.view.is_contiguous()) {
      residual = &o;  // the sum post-op adds what y holds before the conv writes it
      ops.push_back({cpu::ConvPostOp::Kind::Sum, nullptr});
    } else {
      return false;
    }
  }
  const Node& out = *k.outputs[0];
  // y (N,OH,OW,O)
  auto y = std::make_shared<Buffer>(out.device, out.dtype, numel(out.shape), /*zero_fill=*/false);
  if (residual) std::memcpy(y->data(), elements(*residual), size_t(y->nbytes()));
  const cpu::ConvGeom g{x.shape[0], x.shape[1], x.shape[2], x.shape[3], w.shape[0], w.shape[1],
                        w.shape[2], ys[1], ys[2], std::get<Conv2dArg>(conv->arg)};
  if (!cpu::conv2d_fwd_postops_onednn(conv->dtype, elements(x), elements(w), y->data(), g, ops, w.buffer))
    return false;
  k.outputs[0]->set_value(std::move(y), View::contiguous(out.shape));
  return true;
}

struct Planned {
  std::optional<codegen::Lowered> lowered;
  std::string source;
  codegen::CompiledKernel compiled;
};

void run_generated(const Kernel& k, Planned& p) {
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
    auto relowered =
        codegen::lower(k, [](const Node& n) { return n.realized() ? std::optional<View>(n.view) : std::nullopt; }, &why);
    if (relowered) {
      auto c = codegen::compile_kernels({codegen::render_cpp(relowered->kernel)});
      if (c[0].fn) {
        p.lowered = std::move(relowered);
        p.compiled = c[0];
      } else {
        p.compiled.fn = nullptr;
      }
    } else {
      p.compiled.fn = nullptr;
    }
    if (!p.compiled.fn) {
      codegen::note_fallback();
      return reference_realize(k.outputs);
    }
  }
  codegen::Lowered& L = *p.lowered;
  std::vector<void*> bufs;
  std::vector<BufferPtr> outs;
  for (const NodePtr& o : L.outputs) {
    outs.push_back(std::make_shared<Buffer>(o->device, o->dtype, numel(o->shape), /*zero_fill=*/false));
    bufs.push_back(outs.back()->data());
  }
  for (const NodePtr& in : L.inputs) bufs.push_back(in->buffer->data());
  // Scratch from the host block cache too (a steady-state step allocates nothing from the system).
  std::optional<Buffer> scratch;  // (scratch_bytes) bytes
  if (p.compiled.scratch_bytes > 0)
    scratch.emplace(Device::cpu(), DType::uint8, p.compiled.scratch_bytes, /*zero_fill=*/false);
  p.compiled.fn(bufs.data(), scratch ? scratch->data() : nullptr, L.kernel.fparams.data(),
                reinterpret_cast<const unsigned long long*>(L.kernel.iparams.data()));
  for (size_t j = 0; j < L.outputs.size(); ++j) L.outputs[j]->set_value(outs[j], View::contiguous(L.outputs[j]->shape));
}

// Drops the executor's references held for kernel i, which never runs again: its members,
// outputs, inlined nodes and inputs, and its lowered form.
void release_kernel(Kernel& k, Planned& p) {
  k.nodes = {};
  k.outputs = {};
  k.inlined = {};
  k.inputs = {};
  p = Planned{};
}

}  // namespace

bool fused_executor_available() { return codegen::host_compiler_available(); }

namespace {

// Everything a run needs: the schedule (kernels in run order), each kernel's lowered and compiled
// form, and the liveness of the values it refers to.
struct Prepared {
  Schedule s;
  std::vector<Planned> plan;
  Liveness live;
};

Prepared prepare(const std::vector<NodePtr>& targets) {
  Prepared P;
  Schedule& s = P.s;
  s = schedule(targets);
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
  std::vector<std::string> sources;
  std::vector<size_t> source_of;
  for (size_t i = 0; i < s.kernels.size(); ++i) {
    const Kernel& k = s.kernels[i];
    if (k.generated()) {
      std::string why;
      plan[i].lowered = codegen::lower(k, leaf, &why);
      if (plan[i].lowered) {
        try {
          plan[i].source = codegen::render_cpp(plan[i].lowered->kernel);
        } catch (const Error& e) {  // a renderer gap: run this kernel on the reference, say why
          why = e.what();
          plan[i].lowered.reset();
        }
      }
      if (plan[i].lowered) {
        if (debug >= 3) std::fprintf(stderr, "%s\n", plan[i].source.c_str());
        sources.push_back(plan[i].source);
        source_of.push_back(i);
      } else if (debug >= 1) {
        std::fprintf(stderr, "aether: kernel %zu runs on the reference backend: %s\n", i, why.c_str());
      }
    }
    if (k.kind != KernelKind::ViewOnly)
      for (const NodePtr& o : k.outputs) stored.insert(o.get());
  }
  const auto compiled = codegen::compile_kernels(sources);
  for (size_t j = 0; j < compiled.size(); ++j) plan[source_of[j]].compiled = compiled[j];
  for (Planned& pl : plan) pl.source = {};
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
  bool lowered = false;
  ir::Kernel kernel;
  std::vector<int> inputs, lowered_outputs;  // Lowered::inputs / outputs
  std::vector<View> views;
  std::vector<int> fparam_src;  // position of the Const node giving fparams[j]
  std::vector<int> iparam_src;  // position of the Rand node giving iparams[2j], iparams[2j + 1]
  codegen::CompiledKernel compiled;
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
    if (pl.lowered && pl.compiled.fn) {
      const codegen::Lowered& l = *pl.lowered;
      ck.lowered = true;
      ck.kernel = l.kernel;
      ck.inputs = positions(l.inputs);
      ck.lowered_outputs = positions(l.outputs);
      ck.views = l.views;
      ck.compiled = pl.compiled;
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
    P.plan[i].compiled = ck.compiled;
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
void run(Prepared& P, const std::vector<NodePtr>& targets) {
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
    if (k.generated() && plan[i].lowered && plan[i].compiled.fn) {
      name = plan[i].lowered->kernel.name;
      if (profiling_enabled())
        for (const ir::Buf& b : plan[i].lowered->kernel.bufs) moved += double(b.numel * int64_t(dtype_size(b.dtype)));
      run_generated(k, plan[i]);
      ran_generated = plan[i].compiled.fn != nullptr;
    } else {
      if (k.generated()) codegen::note_fallback();
      name = k.generated() ? "reference" : op_name(k.nodes.back()->op);
      fused_conv = k.kind == KernelKind::Library && k.nodes.size() > 1 && run_conv_postops(k);
      if (fused_conv) name = "Conv2d+postops";
      if (!fused_conv)
        reference_realize(k.kind == KernelKind::ViewOnly || k.outputs.empty() ? k.nodes : k.outputs);
    }
    if (debug >= 1 || profiling_enabled()) {
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (debug >= 1)
        std::fprintf(stderr, "aether kernel %3zu %-10s %-44s %9.3f ms\n", i, kernel_kind_name(k.kind), name.c_str(),
                     sec * 1e3);
      // Library calls, views and fallbacks ran on the reference backend, which records each node.
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
  reference_realize(targets);
}


}  // namespace

void fused_execute(const std::vector<NodePtr>& targets) {
  if (!plan_cache_enabled()) {
    Prepared P = prepare(targets);
    return run(P, targets);
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
    P = prepare(targets);
    if (auto c = capture(*P, g)) {
      std::lock_guard<std::mutex> lock(g_plans_mu);
      g_plans.push_front(std::move(*c));
      if (g_plans.size() > kPlanCacheSize) g_plans.pop_back();
    }
  }
  g = {};  // its node list would keep every value of the graph alive to the end of the run
  run(*P, targets);
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
