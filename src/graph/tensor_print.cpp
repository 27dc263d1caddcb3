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
  // values: the tensor's elements in row-major order, shape [d0, d1, ...]
  ValuePrinter(const Tensor& t, const std::vector<double>& values)
      : dims_(t.shape()),
        strides_(contiguous_strides(t.shape())),
        values_(values),
        dtype_(t.dtype()),
        summarize_(t.numel() > kThreshold) {}

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

  // The indices of axis `axis` that are shown; -1 marks the "..." between the two ends.
  std::vector<int64_t> shown(size_t axis) const {
    std::vector<int64_t> idx;
    const int64_t n = dims_[axis];
    if (summarize_ && n > 2 * kEdge) {
      for (int64_t i = 0; i < kEdge; ++i) idx.push_back(i);
      idx.push_back(-1);
      for (int64_t i = n - kEdge; i < n; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    }
    return idx;
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
    const std::vector<int64_t> idx = shown(axis);
    const bool innermost = axis + 1 == dims_.size();
    for (size_t k = 0; k < idx.size(); ++k) {
      if (os && k > 0) {
        *os << ',';
        if (innermost) {
          *os << ' ';
        } else {  // a new line, with a blank line between blocks of rank >= 2, indented past the '['s
          *os << std::string(dims_.size() - axis - 1, '\n') << std::string(axis + 1, ' ');
        }
      }
      if (idx[k] < 0) {
        if (os) *os << "...";
      } else {
        visit(axis + 1, offset + idx[k] * strides_[axis], os);
      }
    }
    if (os) *os << ']';
  }

  std::vector<int64_t> dims_;
  std::vector<int64_t> strides_;
  const std::vector<double>& values_;
  DType dtype_;
  bool summarize_;
  size_t width_ = 0;
};
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(empty)";
  os << t.str() << '\n';
  const std::vector<double> values = t.to_vector<double>();  // [numel], row-major
  ValuePrinter(t, values).print(os);
  return os;
}

}  // namespace aether
