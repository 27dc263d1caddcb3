// operator<< for Tensor: the header (shape, dtype, device) and then the values in NumPy's layout.
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "aether/graph/tensor.h"

namespace aether {
namespace {
// NumPy's print defaults (np.get_printoptions()): over kThreshold elements, each axis longer than
// 2 * kEdge shows its first and last kEdge entries with "..." between them.
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdge = 3;

class ValuePrinter {
 public:
  explicit ValuePrinter(const Tensor& t) : dtype_(t.dtype()) {
    // Over kThreshold elements, only the ends of each long axis are fetched (the rest is never
    // copied): `shown` is then [0, kEdge) and [n - kEdge, n) of that axis.
    Tensor shown = t.detach();
    const bool summarize = t.numel() > kThreshold;
    for (int a = 0; a < t.ndim(); ++a) {
      const int64_t n = t.shape()[size_t(a)];
      cut_.push_back(summarize && n > 2 * kEdge);
      if (!cut_.back()) continue;
      std::vector<int64_t> ends;
      for (int64_t i = 0; i < kEdge; ++i) ends.push_back(i);
      for (int64_t i = n - kEdge; i < n; ++i) ends.push_back(i);
      shown = shown.take(Tensor::from_vector<int64_t>(ends), a);
    }
    dims_ = shown.shape();
    strides_ = contiguous_strides(dims_);
    values_ = shown.to_vector<double>();  // row-major
  }

  void print(std::ostream& os) {
    width_ = 0;
    visit(0, 0, nullptr);  // the widest element sets the column width, as NumPy's
    visit(0, 0, &os);
  }

 private:
  std::string element(double v) const {
    if (dtype_ == DType::boolean) return v != 0 ? "True" : "False";
    std::ostringstream s;
    if (is_float(dtype_)) {
      s << v;  // 6 significant digits
    } else {
      s << static_cast<int64_t>(v);
    }
    return s.str();
  }

  // Prints (os != nullptr) or measures (os == nullptr) the sub-array at `axis` starting at `offset`.
  void visit(size_t axis, int64_t offset, std::ostream* os) {
    if (axis == dims_.size()) {
      const std::string e = element(values_[size_t(offset)]);
      if (!os) {
        width_ = std::max(width_, e.size());
      } else {
        *os << std::string(width_ - e.size(), ' ') << e;
      }
      return;
    }
    if (os) *os << '[';
    const bool innermost = axis + 1 == dims_.size();
    for (int64_t i = 0; i < dims_[axis]; ++i) {
      const bool ellipsis = cut_[axis] && i == kEdge;  // "..." before the last kEdge
      for (int k = 0; k < (ellipsis ? 2 : 1); ++k) {
        if (os && (i > 0 || k > 0)) {
          *os << ',';
          if (innermost) {
            *os << ' ';
          } else {  // a new line, with a blank line between blocks of rank >= 2, indented past the '['s
            *os << std::string(dims_.size() - axis - 1, '\n') << std::string(axis + 1, ' ');
          }
        }
        if (ellipsis && k == 0) {
          if (os) *os << "...";
        } else {
          visit(axis + 1, offset + i * strides_[axis], os);
        }
      }
    }
    if (os) *os << ']';
  }

  DType dtype_;
  std::vector<bool> cut_;  // per axis: only its ends are shown
  Shape dims_;             // of the shown elements
  std::vector<int64_t> strides_;
  std::vector<double> values_;  // the shown elements, row-major
  size_t width_ = 0;
};
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(empty)";
  os << t.str() << '\n';
  ValuePrinter(t).print(os);
  return os;
}

}  // namespace aether
