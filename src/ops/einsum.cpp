// einsum: NumPy's subscripts ("ij,jk->ik", "bhqd,bhkd->bhqk", "...ij->...ji", "ii->i"), computed
// with the engine's own operations, so autograd differentiates it as it does them:
//   1. each operand: a letter repeated in it takes the diagonal (permute, reshape, strided slice);
//      a letter in no other operand nor the output is summed at once;
//   2. the operands contracted left to right, two at a time: letters in both and needed later are a
//      batch, letters in both and not needed later are summed (K), the others kept (M, N). With K
//      empty, a broadcast product; with M or N of one element, a product summed over K (one fused
//      kernel); else a batched matmul (B.., M, K) x (B.., K, N);
//   3. the letters the output lacks summed, the rest permuted into the output's order.
// Size-1 dims broadcast against any size (NumPy's einsum does too); '...' stands for the dims the
// letters do not name, aligned on the right across operands as in broadcasting.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "aether/graph/tensor.h"

namespace aether {
namespace {

constexpr const char* kOp = "einsum";

// Labels: the letters, and for the dims under '...' the chars 1..8 (position from the left of the
// widest ellipsis), which no subscript can spell.
bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char ellipsis_label(int i) { return char(1 + i); }
bool is_ellipsis_label(char c) { return c >= 1 && c <= 8; }

std::string show(const std::string& labels) {  // for messages: '...' for ellipsis labels
  std::string s;
  for (char c : labels)
    if (!is_ellipsis_label(c))
      s += c;
    else if (s.size() < 3 || s.substr(s.size() - 3) != "...")
      s += "...";
  return s;
}

// One term's letters and whether (where) it has '...'; errors name the term.
struct Term {
  std::string letters;  // without the ellipsis
  int ellipsis = -1;    // index in `letters` where '...' stood, -1 if none
};

Term parse_term(const std::string& t, const std::string& name) {
  Term term;
  for (size_t i = 0; i < t.size();) {
    if (t[i] == '.') {
      AETHER_CHECK(t.compare(i, 3, "...") == 0 && term.ellipsis < 0, kOp, name, " '", t,
                   "': a '.' outside one '...'");
      term.ellipsis = int(term.letters.size());
      i += 3;
    } else {
      AETHER_CHECK(is_letter(t[i]), kOp, name, " '", t, "': '", t[i], "' is not a letter (a-z, A-Z)");
      term.letters += t[i++];
    }
  }
  return term;
}

// `term`'s labels for an operand of `ndim` dims, with `width` ellipsis dims in the widest operand.
std::string labels_of(const Term& term, int ndim, int width) {
  const int k = ndim - int(term.letters.size());  // dims under '...'
  if (term.ellipsis < 0) return term.letters;
  std::string s = term.letters.substr(0, size_t(term.ellipsis));
  for (int i = width - k; i < width; ++i) s += ellipsis_label(i);
  return s + term.letters.substr(size_t(term.ellipsis));
}

// One operand during the contraction: its value and one label per dim.
struct Operand {
  Tensor t;
  std::string labels;
};

int64_t dim_of(const Operand& o, char c) { return o.t.shape()[o.labels.find(c)]; }

// The diagonal of each label repeated in o ("ii" -> "i"): the two dims moved last, flattened, and
// every (n+1)-th element taken.
void take_diagonals(Operand& o) {
  for (size_t p = 0; p < o.labels.size(); ++p) {
    const size_t q = o.labels.find(o.labels[p], p + 1);
    if (q == std::string::npos) continue;
    const int64_t n = o.t.shape()[p];  // = shape[q], checked by einsum()
    std::vector<int64_t> perm;
    Shape lead;
    std::string labels;
    for (size_t d = 0; d < o.labels.size(); ++d)
      if (d != p && d != q) {
        perm.push_back(int64_t(d));
        lead.push_back(o.t.shape()[d]);
        labels += o.labels[d];
      }
    perm.insert(perm.end(), {int64_t(p), int64_t(q)});
    Shape flat = lead;
    flat.push_back(n * n);
    Tensor t = o.t.permute(perm).reshape(flat).slice(-1, 0, n * n, n + 1);  // (lead.., n)
    o = {t, labels + o.labels[p]};
    p = size_t(-1);  // start again: labels moved
  }
}

// Sums the dims of o whose labels `keep` lacks.
void sum_unless(Operand& o, const std::string& keep) {
  std::vector<int64_t> axes;
  std::string labels;
  for (size_t d = 0; d < o.labels.size(); ++d)
    if (keep.find(o.labels[d]) != std::string::npos)
      labels += o.labels[d];
    else
      axes.push_back(int64_t(d));
  if (axes.empty()) return;
  o = {o.t.sum(axes), labels};
}

// o's dims in the order of `labels` (each one of o's); a label o lacks becomes a size-1 dim.
Tensor arrange(const Operand& o, const std::string& labels) {
  std::vector<int64_t> perm;
  Shape shape;
  for (char c : labels) {
    const size_t d = o.labels.find(c);
    if (d != std::string::npos) perm.push_back(int64_t(d));
    shape.push_back(d == std::string::npos ? 1 : o.t.shape()[d]);
  }
  return o.t.permute(perm).reshape(shape);
}

std::string filter(const std::string& s, const std::string& in, bool inside) {
  std::string r;
  for (char c : s)
    if ((in.find(c) != std::string::npos) == inside) r += c;
  return r;
}

// a and b contracted: batch labels (in both, needed later) first, then a's own, then b's own; the
// labels in both that `later` lacks are summed.
Operand contract(const Operand& a, const Operand& b, const std::string& later) {
  const std::string common = filter(a.labels, b.labels, true);
  const std::string batch = filter(common, later, true), summed = filter(common, later, false);
  const std::string a_own = filter(a.labels, b.labels, false), b_own = filter(b.labels, a.labels, false);
  const std::string out = batch + a_own + b_own;
  int64_t m = 1, n = 1, k = 1;
  Shape k_shape;  // the summed labels' sizes (a size-1 dim stretched to the other operand's)
  for (char c : a_own) m *= dim_of(a, c);
  for (char c : b_own) n *= dim_of(b, c);
  for (char c : summed) {
    k_shape.push_back(std::max(dim_of(a, c), dim_of(b, c)));
    k *= k_shape.back();
  }
  if (summed.empty() || m == 1 || n == 1 ||
      m * n * k == 0) {  // a broadcast product summed over K: one kernel
    const std::string all = out + summed;
    Tensor p = arrange(a, all) * arrange(b, all);
    if (summed.empty()) return {p, out};
    std::vector<int64_t> axes;
    for (size_t i = out.size(); i < all.size(); ++i) axes.push_back(int64_t(i));
    return {p.sum(axes), out};
  }
  // (batch.., M, K) x (batch.., K, N): batch dims broadcast in matmul; K's size-1 dims stretched.
  Shape as, bs, result;
  for (char c : batch) {
    as.push_back(dim_of(a, c));
    bs.push_back(dim_of(b, c));
    result.push_back(std::max(as.back(), bs.back()));
  }
  Shape a_full = as, b_full = bs;
  for (char c : a_own) a_full.push_back(dim_of(a, c));
  a_full.insert(a_full.end(), k_shape.begin(), k_shape.end());
  b_full.insert(b_full.end(), k_shape.begin(), k_shape.end());
  for (char c : b_own) b_full.push_back(dim_of(b, c));
  as.insert(as.end(), {m, k});
  bs.insert(bs.end(), {k, n});
  Tensor r = matmul(arrange(a, batch + a_own + summed).expand(a_full).reshape(as),
                    arrange(b, batch + summed + b_own).expand(b_full).reshape(bs));
  for (char c : a_own) result.push_back(dim_of(a, c));
  for (char c : b_own) result.push_back(dim_of(b, c));
  return {r.reshape(result), out};
}

}  // namespace

Tensor einsum(const std::string& subscripts, const std::vector<Tensor>& operands) {
  std::string spec;
  for (char c : subscripts)
    if (c != ' ') spec += c;
  const size_t arrow = spec.find("->");
  AETHER_CHECK(arrow == std::string::npos || spec.find("->", arrow + 2) == std::string::npos, kOp, "'",
               subscripts, "' has more than one '->'");
  const std::string inputs = spec.substr(0, arrow);
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = inputs.find(',', start);
    terms.push_back(
        parse_term(inputs.substr(start, comma - start), "operand " + std::to_string(terms.size())));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  AETHER_CHECK(terms.size() == operands.size(), kOp, "'", subscripts, "' names ", terms.size(),
               " operands, but ", operands.size(), " were given");
  int width = 0;  // dims under '...' in the widest operand
  for (size_t i = 0; i < terms.size(); ++i) {
    const int k = operands[i].ndim() - int(terms[i].letters.size());
    AETHER_CHECK(k == 0 || (k > 0 && terms[i].ellipsis >= 0), kOp, "operand ", i, " has ", operands[i].ndim(),
                 " dims, but '", show(terms[i].letters), "' names ", terms[i].letters.size());
    width = std::max(width, k);
  }

  // Every label's size (a size-1 dim broadcasts) and how often the inputs name it.
  std::map<char, int64_t> size;
  std::map<char, size_t> first;  // the operand that set a label's size
  std::map<char, int> uses;      // "ij,jk": j twice; "ii": i twice
  std::vector<Operand> ops;
  DType dtype = operands[0].dtype();
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::string labels = labels_of(terms[i], operands[i].ndim(), width);
    for (size_t d = 0; d < labels.size(); ++d) {
      const char c = labels[d];
      const int64_t n = operands[i].shape()[d];
      const size_t p = labels.find(c);
      AETHER_CHECK(operands[i].shape()[p] == n, kOp, "'", c, "' is repeated in operand ", i, " with sizes ",
                   operands[i].shape()[p], " and ", n, " (a diagonal needs equal sizes)");
      ++uses[c];
      if (p < d) continue;
      auto [it, fresh] = size.try_emplace(c, n);
      AETHER_CHECK(fresh || it->second == n || it->second == 1 || n == 1, kOp, "'", show(std::string(1, c)),
                   "' has size ", it->second, " in operand ", first[c], " and ", n, " in operand ", i);
      if (fresh || it->second == 1) {
        it->second = n;
        first[c] = i;
      }
    }
    ops.push_back({operands[i], labels});
    dtype = promote(dtype, operands[i].dtype());
  }

  // The output's labels: given, or NumPy's implicit ones ('...' first, then the letters used once,
  // in alphabetical (ASCII) order).
  std::string out;
  if (arrow != std::string::npos) {
    const Term t = parse_term(spec.substr(arrow + 2), "the output");
    AETHER_CHECK(width == 0 || t.ellipsis >= 0, kOp, "the output '", spec.substr(arrow + 2),
                 "' needs '...' for the dims the inputs' '...' stand for");
    out = labels_of(t, int(t.letters.size()) + (t.ellipsis >= 0 ? width : 0), width);
    for (size_t d = 0; d < t.letters.size(); ++d) {
      const char c = t.letters[d];
      AETHER_CHECK(size.count(c), kOp, "the output's '", c, "' is in no operand");
      AETHER_CHECK(t.letters.find(c) == d, kOp, "the output repeats '", c, "'");
    }
  } else {
    for (int i = 0; i < width; ++i) out += ellipsis_label(i);
    for (auto [c, n] : uses)
      if (is_letter(c) && n == 1) out += c;
  }

  // 16-bit floats compute in float32 and round once at the end, as the composites do; bools count in
  // int64 (true where some product is: NumPy's result).
  const DType work = dtype == DType::float16 || dtype == DType::bfloat16 ? DType::float32
                     : dtype == DType::boolean                           ? DType::int64
                                                                         : dtype;
  for (Operand& o : ops) {
    o.t = o.t.cast(work);
    take_diagonals(o);
  }
  // Labels needed after operand i: the output's and those of operands i+1...
  std::vector<std::string> later(ops.size(), out);
  for (size_t i = ops.size() - 1; i > 0; --i) later[i - 1] = later[i] + ops[i].labels;
  Operand acc = ops[0];
  sum_unless(acc, later[0]);
  for (size_t i = 1; i < ops.size(); ++i) {
    Operand b = ops[i];
    sum_unless(b, later[i] + acc.labels);
    acc = contract(acc, b, later[i]);
  }
  sum_unless(acc, out);
  // Into the output's order, size-1 dims stretched to the labels' sizes.
  Shape shape;
  for (char c : out) shape.push_back(size.at(c));
  return arrange(acc, out).expand(shape).cast(dtype);
}

}  // namespace aether
