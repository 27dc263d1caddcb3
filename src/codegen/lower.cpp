// Lowering: a scheduled kernel's nodes -> kernel IR. Every value is evaluated at an index (one
// affine expression per dim of the node's shape, in the kernel's loop variables): movement ops map
// the index (index arithmetic, never copies), leaves become loads through their view, elementwise
// ops become ALU instructions, and a reduce kernel's reduces become accumulations plus an epilogue.
#include "lower.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <unordered_map>

#include "aether/core/error.h"

namespace aether::codegen {
namespace {

using ir::Affine;
using ir::Guard;
using ir::Inst;
using ir::InstKind;
using Index = std::vector<Affine>;

struct Unsupported {
  std::string why;
};

// (L / q) % s as an affine expression when the division is exact over the iteration extent (the
// reshape merges or splits dims on aligned boundaries); nullopt otherwise.
std::optional<Affine> div_mod(const Affine& l, int64_t q, int64_t s, const Shape& extent) {
  const int rank = int(l.k.size());
  if (s == 1) return Affine::constant(0, rank);
  Affine hi = Affine::constant(0, rank), lo = Affine::constant(0, rank);
  for (int v = 0; v < rank; ++v) {
    if (l.k[size_t(v)] % q == 0)
      hi.k[size_t(v)] = l.k[size_t(v)] / q;
    else
      lo.k[size_t(v)] = l.k[size_t(v)];
  }
  int64_t cq = l.c / q, cr = l.c % q;
  if (cr < 0) cr += q, cq -= 1;
  lo.c = cr;
  if (lo.min(extent) < 0 || lo.max(extent) >= q) return std::nullopt;
  hi.c = cq;
  // hi % s: terms that are multiples of s vanish; the rest must stay within [0, s).
  for (auto& k : hi.k)
    if (k % s == 0) k = 0;
  hi.c = ((hi.c % s) + s) % s;
  if (hi.min(extent) < 0 || hi.max(extent) >= s) return std::nullopt;
  return hi;
}

class Lowerer {
 public:
  // `full`: the iteration shape, k.shape or (elementwise kernels) a refinement of it.
  Lowerer(const Kernel& k, const LeafView& leaf, Shape full)
      : k_(k), leaf_(leaf), full_(std::move(full)), rank_(int(full_.size())) {}

  Lowered run() {
    ir::Kernel& K = out_.kernel;
    K.full = full_;
    K.name = k_.kind == KernelKind::Reduce ? "r" : "e";
    for (const auto& n : k_.nodes) {
      if (K.name.size() > 40) break;
      if (op_kind(n->op) != OpKind::Movement) K.name += std::string("_") + op_name(n->op);
    }
    for (const NodePtr& o : k_.outputs) {  // outputs first: buf j stores outputs[j]
      out_.outputs.push_back(o);
      K.bufs.push_back({o->dtype, numel(o->shape), true});
    }
    if (k_.kind == KernelKind::Reduce) {
      K.reduce_axes = k_.reduce_axes;
      std::vector<const Node*> reduces;
      for (const NodePtr& n : k_.nodes) {
        if (n->op != Op::ReduceSum && n->op != Op::ReduceMax) continue;
        const Node& src = *n->srcs[0];
        if (src.shape != k_.shape || std::get<Axes>(n->arg) != k_.reduce_axes || src.dtype != n->dtype)
          throw Unsupported{"a reduce of another shape, axes or dtype than its kernel's"};
        reduces.push_back(n.get());
      }
      if (reduces.empty()) throw Unsupported{"a reduce kernel without a reduce"};
      phase(&K.body, K.full);
      // One accumulation per distinct summand. A sum's factors that do not vary along the reduce
      // axes (a per-channel scale, a negation) move to the epilogue: sum(-(dy * s)) over (N,H,W) is
      // -s * sum(dy), the same accumulation as a sibling sum(dy) (BatchNorm's backward).
      std::vector<int> accumulated;  // per slot: the body instruction it accumulates
      for (const Node* n : reduces) {
        ReduceOf r;
        r.core = eval(n->srcs[0], vars(), {});
        if (n->op == Op::ReduceSum) peel_invariant_factors(r);
        int slot = -1;
        for (size_t j = 0; j < accumulated.size(); ++j)
          if (accumulated[j] == r.core && K.reductions[j].op == n->op && K.reductions[j].dtype == n->dtype)
            slot = int(j);
        if (slot < 0) {
          slot = int(K.reductions.size());
          K.reductions.push_back({n->op, n->dtype});
          accumulated.push_back(r.core);
          Inst acc;
          acc.kind = InstKind::Accum;
          acc.dtype = n->dtype;
          acc.srcs = {r.core};
          acc.slot = slot;
          K.body.push_back(acc);
        }
        r.slot = slot;
        reduce_of_[n] = r;
      }
      phase(&K.epilogue, K.reduced_shape());
    } else {
      phase(&K.body, K.full);
    }
    const Shape out_shape = K.is_reduce() ? K.reduced_shape() : K.full;
    for (size_t j = 0; j < out_.outputs.size(); ++j) {
      const NodePtr& o = out_.outputs[j];
      if (numel(out_shape) == 0) continue;  // nothing to store
      // An output of another shape with as many elements (e.g. a mean without keepdim) is the
      // same dense values: its index is the linear position in the kernel's output shape.
      if (numel(o->shape) != numel(out_shape))
        throw Unsupported{detail::cat("an output of another size than the kernel's (", op_name(o->op), " ",
                                      to_string(o->shape), " in a kernel over ", to_string(k_.shape), ")")};
      Index oidx = vars();
      if (o->shape != out_shape) {
        const Affine lin = dense_offset(vars(), out_shape);
        const Shape st = contiguous_strides(o->shape);
        oidx.clear();
        for (size_t d = 0; d < o->shape.size(); ++d) {
          auto a = div_mod(lin, st[d], o->shape[d], extent_);
          if (!a) throw Unsupported{"an output whose shape does not regroup the kernel's"};
          oidx.push_back(*a);
        }
      }
      const int v = eval(o, oidx, {});
      Inst st;
      st.kind = InstKind::Store;
      st.dtype = o->dtype;
      st.srcs = {v};
      st.buf = int(j);
      st.offset = dense_offset(vars(), out_shape);
      list_->push_back(st);
    }
    drop_unused(K.body);
    drop_unused(K.epilogue);
    return std::move(out_);
  }

 private:
  void phase(std::vector<Inst>* list, const Shape& extent) {
    list_ = list;
    extent_ = extent;
    epilogue_ = list != &out_.kernel.body;
    memo_.clear();
  }
  Index vars() const {
    Index idx;
    for (int v = 0; v < rank_; ++v) idx.push_back(Affine::var(v, rank_));
    return idx;
  }
  Affine dense_offset(const Index& idx, const Shape& shape) const {
    const Shape st = contiguous_strides(shape);
    Affine off = Affine::constant(0, rank_);
    for (size_t d = 0; d < idx.size(); ++d) off = off + idx[d].scaled(st[d]);
    return off;
  }
  int emit(Inst in, const std::string& key) {
    if (!key.empty()) {
      auto it = memo_.find(key);
      if (it != memo_.end()) return it->second;
    }
    list_->push_back(std::move(in));
    const int id = int(list_->size()) - 1;
    if (!key.empty()) memo_[key] = id;
    return id;
  }
  // Float constants other than 0 and 1 (learning rates, momenta, 1/n) are run-time parameters.
  int constant(DType t, double v) {
    Inst c;
    c.kind = InstKind::Const;
    c.dtype = t;
    c.value = v;
    // The exact bits: a decimal key (6 digits) merged 0.1 with 1 - 0.9 = 0.09999999999999998.
    const std::string key = detail::cat("c", int(t), ":", std::bit_cast<uint64_t>(v));
    if (is_float(t) && v == v && v != 0 && v != 1 && !memo_.count(key)) {
      auto& fp = out_.kernel.fparams;
      auto it = std::find(fp.begin(), fp.end(), v);
      c.param = int(it - fp.begin());
      if (it == fp.end()) fp.push_back(v);
    }
    return emit(c, key);
  }
  static std::string key_of(const Index& idx, const std::vector<Guard>& guards) {
    std::string s;
    for (const Affine& a : idx) s += ir::to_string(a) + ",";
    for (const Guard& g : guards) s += detail::cat("|", g.lo, "<=", ir::to_string(g.e), "<", g.hi);
    return s;
  }
  // Drops guards that always hold; returns false when one never holds.
  bool simplify(std::vector<Guard>& guards) const {
    std::vector<Guard> kept;
    for (const Guard& g : guards) {
      const int64_t lo = g.e.min(extent_), hi = g.e.max(extent_);
      if (numel(extent_) > 0 && (hi < g.lo || lo >= g.hi)) return false;
      if (lo >= g.lo && hi < g.hi) continue;
      if (std::find(kept.begin(), kept.end(), g) == kept.end()) kept.push_back(g);
    }
    guards = std::move(kept);
    return true;
  }

  // Reads leaf np through view v (its own view, or `base` composed with movement ops: the kernel
  // checks base, the leaf's own view, before it runs).
  int load(const NodePtr& np, const View& v, const Index& idx, std::vector<Guard> guards,
           const View* base = nullptr) {
    if (v.mask)
      for (size_t d = 0; d < idx.size(); ++d)
        guards.push_back({idx[d], (*v.mask)[d].first, (*v.mask)[d].second});
    const Node& n = *np;
    if (!simplify(guards)) return constant(n.dtype, 0);
    auto [it, fresh] = buf_of_.try_emplace(&n, int(out_.kernel.bufs.size()));
    if (fresh) {
      const int64_t count = n.realized() ? n.buffer->numel() : numel(n.shape);
      out_.kernel.bufs.push_back({n.dtype, count, false});
      out_.inputs.push_back(np);
      out_.views.push_back(base ? *base : v);
    }
    Affine off = Affine::constant(v.offset, rank_);
    for (size_t d = 0; d < idx.size(); ++d) off = off + idx[d].scaled(v.strides[d]);
    Inst ld;
    ld.kind = InstKind::Load;
    ld.dtype = n.dtype;
    ld.buf = it->second;
    ld.offset = off;
    ld.guards = std::move(guards);
    return emit(ld, detail::cat("l", it->second, ":", ir::to_string(off), key_of({}, ld.guards)));
  }

  int alu(const Node& n, std::vector<int> srcs) { return alu(n.op, n.dtype, std::move(srcs)); }
  int alu(Op op, DType t, std::vector<int> srcs) {
    Inst a;
    a.kind = InstKind::Alu;
    a.op = op;
    a.dtype = t;
    std::string key = detail::cat("a", int(op), ":", int(t));
    for (int s : srcs) key += detail::cat(",", s);
    a.srcs = std::move(srcs);
    return emit(a, key);
  }

  int eval(const NodePtr& np, const Index& idx, const std::vector<Guard>& guards) {
    const Node& n = *np;
    if (auto v = leaf_(n)) return load(np, *v, idx, guards);
    const std::string key = detail::cat("n", n.id, "@", key_of(idx, guards));
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    const int r = compute(n, idx, guards);
    memo_[key] = r;
    return r;
  }

  int compute(const Node& n, const Index& idx, const std::vector<Guard>& guards) {
    auto src = [&](int i) { return eval(n.srcs[size_t(i)], idx, guards); };
    const Shape& ss = n.srcs.empty() ? n.shape : n.srcs[0]->shape;
    switch (n.op) {
      case Op::Load: throw Unsupported{"an unrealized Load"};
      case Op::Const: return constant(n.dtype, std::get<double>(n.arg));
      case Op::Rand: {
        if (n.dtype != DType::float32 && n.dtype != DType::float64)
          throw Unsupported{"random numbers of a non-float dtype"};
        const auto& r = std::get<RandArg>(n.arg);
        Inst in;
        in.kind = InstKind::Rand;
        in.dtype = n.dtype;
        in.offset = dense_offset(idx, n.shape);
        auto& ip = out_.kernel.iparams;
        int p = -1;
        for (size_t j = 0; j + 1 < ip.size(); j += 2)
          if (ip[j] == r.seed && ip[j + 1] == r.stream) p = int(j);
        if (p < 0) {
          p = int(ip.size());
          ip.push_back(r.seed);
          ip.push_back(r.stream);
        }
        in.param = p;
        return emit(in, detail::cat("x", p, ":", ir::to_string(in.offset), ":", int(n.dtype)));
      }
      case Op::Exp:
      case Op::Log:
      case Op::Sqrt:
      case Op::Sin:
      case Op::Floor:
        if (!is_float(n.dtype)) throw Unsupported{"a float-only op on integers"};
        return alu(n, {src(0)});
      case Op::Pow:
        if (!is_float(n.dtype)) throw Unsupported{"a float-only op on integers"};
        return alu(n, {src(0), src(1)});
      case Op::Copy:
      case Op::Cast:
      case Op::Neg:
      case Op::Recip: return alu(n, {src(0)});
      case Op::Add:
      case Op::Sub:
      case Op::Mul:
      case Op::Div:
      case Op::Fmod:
      case Op::Max:
      case Op::CmpLt:
      case Op::CmpLe:
      case Op::CmpEq:
      case Op::CmpNe: return alu(n, {src(0), src(1)});
      case Op::Where: return alu(n, {src(0), src(1), src(2)});
      case Op::ReduceSum:
      case Op::ReduceMax: {
        auto it = reduce_of_.find(&n);
        if (it == reduce_of_.end() || !epilogue_) throw Unsupported{"a reduce read before it is computed"};
        const ReduceOf& ro = it->second;
        Inst r;
        r.kind = InstKind::Result;
        r.dtype = n.dtype;
        r.slot = ro.slot;
        r.offset = dense_offset(idx, n.shape);
        int v = emit(r, detail::cat("r", r.slot, ":", ir::to_string(r.offset)));
        for (int f : ro.factors) v = alu(Op::Mul, n.dtype, {v, copy_from_body(f)});
        if (ro.negate) v = alu(Op::Neg, n.dtype, {v});
        return v;
      }
      case Op::Reshape: {
        const Shape& out = n.shape;
        if (numel(out) == 0) return constant(n.dtype, 0);  // never read: the kernel has no points
        const Shape ost = contiguous_strides(out), sst = contiguous_strides(ss);
        Affine lin = Affine::constant(0, rank_);
        for (size_t d = 0; d < out.size(); ++d) lin = lin + idx[d].scaled(ost[d]);
        Index sidx;
        for (size_t d = 0; d < ss.size(); ++d) {
          auto a = div_mod(lin, sst[d], ss[d], extent_);
          if (!a) {
            // A stored or realized value whose view regroups (e.g. a dense buffer): read it through
            // the reshaped view, at this node's own index.
            if (auto v = leaf_(*n.srcs[0]))
              if (auto rv = v->reshape(out)) return load(n.srcs[0], *rv, idx, guards, &*v);
            throw Unsupported{"a reshape of a computed value across unaligned dims"};
          }
          sidx.push_back(*a);
        }
        return eval(n.srcs[0], sidx, guards);
      }
      case Op::Permute: {
        const auto& perm = std::get<Axes>(n.arg);
        Index sidx(ss.size());
        for (size_t d = 0; d < perm.size(); ++d) sidx[size_t(perm[d])] = idx[d];
        return eval(n.srcs[0], sidx, guards);
      }
      case Op::Expand: {
        Index sidx = idx;
        for (size_t d = 0; d < ss.size(); ++d)
          if (ss[d] == 1) sidx[d] = Affine::constant(0, rank_);
        return eval(n.srcs[0], sidx, guards);
      }
      case Op::Slice: {
        const auto& s = std::get<SliceArg>(n.arg);
        Index sidx = idx;
        for (size_t d = 0; d < ss.size(); ++d)
          sidx[d] = idx[d].scaled(s.step[d]) + Affine::constant(s.start[d], rank_);
        return eval(n.srcs[0], sidx, guards);
      }
      case Op::Flip: {
        Index sidx = idx;
        for (int a : std::get<Axes>(n.arg))
          sidx[size_t(a)] = idx[size_t(a)].scaled(-1) + Affine::constant(ss[size_t(a)] - 1, rank_);
        return eval(n.srcs[0], sidx, guards);
      }
      case Op::Pad: {
        const auto& p = std::get<PadArg>(n.arg);
        Index sidx = idx;
        std::vector<Guard> inner = guards, pad;
        for (size_t d = 0; d < ss.size(); ++d) {
          sidx[d] = idx[d] + Affine::constant(-p.before[d], rank_);
          pad.push_back({sidx[d], 0, ss[d]});
        }
        if (!simplify(pad)) return constant(n.dtype, 0);
        if (pad.empty()) return eval(n.srcs[0], sidx, guards);
        inner.insert(inner.end(), pad.begin(), pad.end());
        const int v = eval(n.srcs[0], sidx, inner);
        Inst in;
        in.kind = InstKind::InBounds;
        in.dtype = DType::boolean;
        in.guards = pad;
        const int c = emit(in, "g" + key_of({}, pad));
        Inst w;
        w.kind = InstKind::Alu;
        w.op = Op::Where;
        w.dtype = n.dtype;
        w.srcs = {c, v, constant(n.dtype, 0)};
        return emit(w, detail::cat("w", c, ",", v, ",", int(n.dtype)));
      }
      case Op::Matmul:
      case Op::Conv2d:
      case Op::Conv2dBwdData:
      case Op::Conv2dBwdWeight:
      case Op::MaxPool2d:
      case Op::MaxPool2dBwd:
      case Op::AvgPool2d:
      case Op::AvgPool2dBwd:
      case Op::Gather:
      case Op::ScatterAdd:
      case Op::Cumsum:
      case Op::Cumprod:
      case Op::CumprodBwd:
      case Op::Argsort:
      case Op::AllReduce: throw Unsupported{detail::cat("library op ", op_name(n.op), " inside a kernel")};
    }
    throw Unsupported{"unknown op"};
  }

  // Removes the instructions no Accum or Store reads (e.g. a product whose invariant factor moved
  // to the epilogue), renumbering the sources of the rest.
  static void drop_unused(std::vector<Inst>& list) {
    std::vector<char> live(list.size(), 0);
    for (size_t i = list.size(); i-- > 0;) {
      const Inst& in = list[i];
      if (in.kind == InstKind::Accum || in.kind == InstKind::Store) live[i] = 1;
      if (live[i])
        for (int s : in.srcs) live[size_t(s)] = 1;
    }
    std::vector<int> index(list.size(), -1);
    std::vector<Inst> kept;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!live[i]) continue;
      Inst in = std::move(list[i]);
      for (int& s : in.srcs) s = index[size_t(s)];
      index[i] = int(kept.size());
      kept.push_back(std::move(in));
    }
    list = std::move(kept);
  }

  // A reduce of this kernel: the reduction slot it reads, and for a sum the factors (body
  // instructions constant along the reduce axes) and sign applied to the slot's result.
  struct ReduceOf {
    int core = -1;  // the body instruction accumulated
    int slot = -1;
    std::vector<int> factors;
    bool negate = false;
  };

  // Whether body instruction i has one value along the reduce axes (at fixed kept axes): loads
  // whose offset and guards do not involve a reduced loop variable, constants, and ALU ops of those.
  bool invariant(int i) {
    if (auto it = invariant_.find(i); it != invariant_.end()) return it->second;
    const Inst& in = out_.kernel.body[size_t(i)];
    auto free_of_reduced = [&](const Affine& a) {
      for (int ax : out_.kernel.reduce_axes)
        if (a.k[size_t(ax)] != 0) return false;
      return true;
    };
    bool inv = false;
    switch (in.kind) {
      case InstKind::Const: inv = true; break;
      case InstKind::Load:
      case InstKind::InBounds:
        inv = (in.kind != InstKind::Load || free_of_reduced(in.offset)) &&
              std::all_of(in.guards.begin(), in.guards.end(),
                          [&](const Guard& g) { return free_of_reduced(g.e); });
        break;
      case InstKind::Alu:
        inv = std::all_of(in.srcs.begin(), in.srcs.end(), [&](int s) { return invariant(s); });
        break;
      case InstKind::Rand:
      case InstKind::Accum:
      case InstKind::Result:
      case InstKind::Store: inv = false; break;
    }
    return invariant_[i] = inv;
  }

  // sum(-x) = -sum(x) and sum(x * c) = sum(x) * c for c invariant along the reduce axes: strips
  // those from r.core (of the reduce's dtype throughout) into r.factors / r.negate.
  void peel_invariant_factors(ReduceOf& r) {
    const auto& body = out_.kernel.body;
    const DType t = body[size_t(r.core)].dtype;
    if (!is_float(t)) return;
    for (;;) {
      const Inst& in = body[size_t(r.core)];
      if (in.kind != InstKind::Alu || in.dtype != t) return;
      if (in.op == Op::Neg) {
        r.negate = !r.negate;
        r.core = in.srcs[0];
        continue;
      }
      if (in.op != Op::Mul) return;
      const int a = in.srcs[0], b = in.srcs[1];
      if (invariant(b) && !invariant(a)) {
        r.factors.push_back(b);
        r.core = a;
      } else if (invariant(a) && !invariant(b)) {
        r.factors.push_back(a);
        r.core = b;
      } else {
        return;
      }
    }
  }

  // Body instruction i (invariant along the reduce axes) recomputed in the epilogue, where the
  // reduced loop variables are 0: its loads' offsets and guards hold as they are.
  int copy_from_body(int i) {
    if (auto it = copied_.find(i); it != copied_.end()) return it->second;
    Inst in = out_.kernel.body[size_t(i)];
    for (int& s : in.srcs) s = copy_from_body(s);
    list_->push_back(std::move(in));
    return copied_[i] = int(list_->size()) - 1;
  }

  const Kernel& k_;
  const LeafView& leaf_;
  Shape full_;
  int rank_;
  Lowered out_;
  std::unordered_map<const Node*, int> buf_of_;
  std::unordered_map<const Node*, ReduceOf> reduce_of_;
  std::unordered_map<int, bool> invariant_;
  std::unordered_map<int, int> copied_;  // body instruction -> its copy in the epilogue
  std::vector<Inst>* list_ = nullptr;
  Shape extent_;
  bool epilogue_ = false;
  std::unordered_map<std::string, int> memo_;
};

}  // namespace

// The coarsest shape both a and b regroup (equal element counts): dims split at every boundary of
// either, e.g. (N,H,W,C) and (N,OH,KH,OW,KW,C) with H = OH*KH, W = OW*KW give the second. When the
// boundaries do not nest (e.g. (2,3) and (3,2)) no such shape exists: `a` is returned unchanged.
Shape common_refinement(const Shape& a, const Shape& b) {
  std::vector<int64_t> cuts;  // prefix products of a and b, merged
  int64_t pa = 1, pb = 1;
  for (int64_t d : a) cuts.push_back(pa *= d);
  for (int64_t d : b) cuts.push_back(pb *= d);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  Shape r;
  int64_t prev = 1;
  for (int64_t c : cuts) {
    if (c % prev != 0) return a;  // boundaries do not nest (cannot happen for products of dims)
    if (c / prev > 1 || r.empty()) r.push_back(c / prev);
    prev = c;
  }
  return r;
}

std::optional<Lowered> lower(const Kernel& k, const LeafView& leaf, std::string* why) {
  try {
    return Lowerer(k, leaf, k.shape).run();
  } catch (const Unsupported& u) {
    if (why) *why = u.why;
  }
  // An elementwise kernel that reshapes a computed value of its own size across dims (e.g. pooling
  // windows (N,OH,KH,OW,KW,C) back to (N,H,W,C)) cannot index it with affine expressions of its
  // output's dims; over a shape refining both, all indices are affine again. Retry over that.
  if (k.kind != KernelKind::Elementwise || numel(k.shape) == 0) return std::nullopt;
  Shape full = k.shape;
  auto refine_by = [&](const NodePtr& n) {
    if (n->op == Op::Reshape && numel(n->shape) == numel(k.shape) && !n->srcs[0]->realized())
      full = common_refinement(common_refinement(full, n->shape), n->srcs[0]->shape);
  };
  for (const NodePtr& n : k.nodes) refine_by(n);
  for (const NodePtr& n : k.inlined) refine_by(n);
  if (full == k.shape) return std::nullopt;
  try {
    auto l = Lowerer(k, leaf, full).run();
    if (why) why->clear();
    return l;
  } catch (const Unsupported& u) {
    if (why) *why = u.why;
    return std::nullopt;
  }
}

}  // namespace aether::codegen
