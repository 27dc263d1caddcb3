// Names and kinds of the primitive ops, generated from the op table.
#include "aether/graph/op.h"

#include <ostream>

namespace aether {

const char* op_name(Op op) {
  switch (op) {
#define AETHER_X(name, ...) \
  case Op::name: return #name;
    AETHER_OPS(AETHER_X)
#undef AETHER_X
  }
  return "?";
}

OpKind op_kind(Op op) {
  switch (op) {
#define AETHER_X(name, kind, ...) \
  case Op::name: return OpKind::kind;
    AETHER_OPS(AETHER_X)
#undef AETHER_X
  }
  return OpKind::Source;
}

int op_num_srcs(Op op) {
  switch (op) {
#define AETHER_X(name, kind, nsrc, ...) \
  case Op::name: return nsrc;
    AETHER_OPS(AETHER_X)
#undef AETHER_X
  }
  return 0;
}

uint32_t op_props(Op op) {
  switch (op) {
#define AETHER_X(name, kind, nsrc, props, ...) \
  case Op::name: return props;
    AETHER_OPS(AETHER_X)
#undef AETHER_X
  }
  return kNoProps;
}

const char* op_snippet(Op op, bool fp) {
  switch (op) {
#define AETHER_X(name, kind, nsrc, props, ref, fp_snippet, int_snippet) \
  case Op::name: return fp ? fp_snippet : int_snippet;
    AETHER_OPS(AETHER_X)
#undef AETHER_X
  }
  return "";
}

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Source: return "source";
    case OpKind::Unary: return "unary";
    case OpKind::Binary: return "binary";
    case OpKind::Ternary: return "ternary";
    case OpKind::Reduce: return "reduce";
    case OpKind::Movement: return "movement";
    case OpKind::Library: return "library";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, Op op) { return os << op_name(op); }

}  // namespace aether
