// Kernel IR helpers: affine index arithmetic and a readable listing of a kernel.
#include "codegen/ir.h"

#include <sstream>

namespace aether::ir {

Affine Affine::constant(int64_t c, int rank) {
  Affine a;
  a.c = c;
  a.k.assign(size_t(rank), 0);
  return a;
}
Affine Affine::var(int v, int rank) {
  Affine a = constant(0, rank);
  a.k[size_t(v)] = 1;
  return a;
}
Affine Affine::operator+(const Affine& o) const {
  Affine r = *this;
  r.c += o.c;
  for (size_t v = 0; v < k.size(); ++v) r.k[v] += o.k[v];
  return r;
}
Affine Affine::scaled(int64_t s) const {
  Affine r = *this;
  r.c *= s;
  for (auto& x : r.k) x *= s;
  return r;
}
bool Affine::is_constant() const {
  for (auto x : k)
    if (x != 0) return false;
  return true;
}
int64_t Affine::min(const Shape& extent) const {
  int64_t m = c;
  for (size_t v = 0; v < k.size(); ++v)
    if (k[v] < 0 && extent[v] > 0) m += k[v] * (extent[v] - 1);
  return m;
}
int64_t Affine::max(const Shape& extent) const {
  int64_t m = c;
  for (size_t v = 0; v < k.size(); ++v)
    if (k[v] > 0 && extent[v] > 0) m += k[v] * (extent[v] - 1);
  return m;
}

Shape Kernel::reduced_shape() const {
  Shape s = full;
  for (int a : reduce_axes) s[size_t(a)] = 1;
  return s;
}

std::string to_string(const Affine& a) {
  std::ostringstream os;
  bool any = false;
  for (size_t v = 0; v < a.k.size(); ++v) {
    if (a.k[v] == 0) continue;
    if (any) os << " + ";
    if (a.k[v] != 1) os << a.k[v] << "*";
    os << "i" << v;
    any = true;
  }
  if (a.c != 0 || !any) os << (any ? " + " : "") << a.c;
  return os.str();
}

namespace {
const char* kind_name(InstKind k) {
  switch (k) {
    case InstKind::Load: return "load";
    case InstKind::Const: return "const";
    case InstKind::Alu: return "alu";
    case InstKind::InBounds: return "inbounds";
    case InstKind::Rand: return "rand";
    case InstKind::Accum: return "accum";
    case InstKind::Result: return "result";
    case InstKind::Store: return "store";
  }
  return "?";
}
void list(std::ostringstream& os, const std::vector<Inst>& insts) {
  for (size_t i = 0; i < insts.size(); ++i) {
    const Inst& in = insts[i];
    os << "  %" << i << " = " << kind_name(in.kind);
    if (in.kind == InstKind::Alu) os << " " << op_name(in.op);
    os << " " << dtype_name(in.dtype);
    for (int s : in.srcs) os << " %" << s;
    if (in.buf >= 0) os << " buf" << in.buf << "[" << to_string(in.offset) << "]";
    if (in.slot >= 0) os << " slot" << in.slot;
    if (in.kind == InstKind::Result || in.kind == InstKind::Rand) os << "[" << to_string(in.offset) << "]";
    if (in.param >= 0) os << " param" << in.param;
    if (in.kind == InstKind::Const && in.param < 0) os << " " << in.value;
    for (const Guard& g : in.guards) os << " if " << g.lo << " <= " << to_string(g.e) << " < " << g.hi;
    os << "\n";
  }
}
}  // namespace

std::string to_string(const Kernel& k) {
  std::ostringstream os;
  os << "kernel " << k.name << " over " << aether::to_string(k.full);
  if (!k.reduce_axes.empty()) {
    os << " reducing axes";
    for (int a : k.reduce_axes) os << " " << a;
  }
  os << "\n";
  for (size_t b = 0; b < k.bufs.size(); ++b)
    os << "  buf" << b << ": " << (k.bufs[b].output ? "out " : "in ") << dtype_name(k.bufs[b].dtype) << "["
       << k.bufs[b].numel << "]\n";
  list(os, k.body);
  for (size_t r = 0; r < k.reductions.size(); ++r)
    os << "  slot" << r << ": " << op_name(k.reductions[r].op) << " " << dtype_name(k.reductions[r].dtype)
       << "\n";
  if (!k.epilogue.empty()) {
    os << " epilogue over " << aether::to_string(k.reduced_shape()) << "\n";
    list(os, k.epilogue);
  }
  return os.str();
}

}  // namespace aether::ir
