// The graph printers: text (one line per node, topological order) and Graphviz dot.
#include <gtest/gtest.h>

#include "aether/aether.h"

using namespace aether;

TEST(Print, TextListsEveryNodeWithOpShapeDtypeAndSources) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor y = (x * 2.0).sum({1});
  const std::string text = graph_to_text({y});
  // The realized input is a Buffer leaf; then the Const, its Reshape/Expand views, the Mul,
  // the ReduceSum and the final Reshape that drops the reduced axis.
  EXPECT_NE(text.find("Buffer  (2, 3) float32"), std::string::npos) << text;
  EXPECT_NE(text.find("Const"), std::string::npos) << text;
  EXPECT_NE(text.find("Mul(%"), std::string::npos) << text;
  EXPECT_NE(text.find("ReduceSum(%"), std::string::npos) << text;
  EXPECT_NE(text.find("axes=[1]"), std::string::npos) << text;
  EXPECT_NE(text.find("(2,) float32"), std::string::npos) << text;
  // Sources come before their consumers: the Mul line precedes the ReduceSum line.
  EXPECT_LT(text.find("Mul("), text.find("ReduceSum("));
  // Nothing was computed by printing.
  EXPECT_FALSE(y.is_realized());
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{12, 30}));
}

TEST(Print, DotIsAGraphWithOneEdgePerSource) {
  const Tensor a = Tensor::from_vector<float>({1, 2}), b = Tensor::from_vector<float>({3, 4});
  const Tensor c = a + b;
  const std::string dot = graph_to_dot({c});
  EXPECT_EQ(dot.rfind("digraph aether {", 0), 0u) << dot;
  EXPECT_NE(dot.find("Add"), std::string::npos);
  size_t edges = 0;
  for (size_t p = dot.find("->"); p != std::string::npos; p = dot.find("->", p + 2)) ++edges;
  EXPECT_EQ(edges, 2u) << dot;  // a -> c, b -> c
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}

TEST(Print, RealizedNodesPrintAsBuffersWithTheirView) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}).transpose(0, 1).realize();
  const std::string text = graph_to_text({x});
  EXPECT_NE(text.find("Buffer"), std::string::npos);
  EXPECT_NE(text.find("strides=(1, 2)"), std::string::npos) << text;  // the transposed view
}

// operator<< prints the header and then the values in NumPy's layout (np.array2string with ", "):
// nested brackets, columns padded to the widest value, and over 1000 elements each long axis cut
// to its first and last three.
std::string printed(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

TEST(Print, TensorValuesAreNestedByShapeAsNumPyPrintsThem) {
  EXPECT_EQ(printed(Tensor::from_vector<float>({1, 2.5f, -3, 4, 5, 6}, {2, 3})),
            "Tensor(shape=(2, 3), dtype=float32, device=cpu)\n"
            "[[  1, 2.5,  -3],\n"
            " [  4,   5,   6]]");
  // The logical order of a view, not its buffer's: the transpose of [[1, 2], [3, 4]].
  EXPECT_EQ(printed(Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}).transpose(0, 1)),
            "Tensor(shape=(2, 2), dtype=float32, device=cpu)\n[[1, 3],\n [2, 4]]");
  // Blocks of rank 2 are separated by a blank line.
  EXPECT_EQ(printed(Tensor::from_vector<int64_t>({0, 1, 2, 3}, {2, 1, 2})),
            "Tensor(shape=(2, 1, 2), dtype=int64, device=cpu)\n[[[0, 1]],\n\n [[2, 3]]]");
  // A 0-d tensor is its value; booleans read True / False; an empty tensor is [].
  EXPECT_EQ(printed(Tensor::from_vector<float>({3.5f}, {})),
            "Tensor(shape=(), dtype=float32, device=cpu)\n3.5");
  EXPECT_EQ(printed(Tensor::from_vector<float>({1, 0}) > 0.5),
            "Tensor(shape=(2,), dtype=bool, device=cpu)\n[ True, False]");
  EXPECT_EQ(printed(Tensor::zeros({0, 3})), "Tensor(shape=(0, 3), dtype=float32, device=cpu)\n[]");
  EXPECT_EQ(printed(Tensor()), "Tensor(empty)");
}

TEST(Print, OverAThousandElementsEachLongAxisShowsItsEnds) {
  std::vector<int64_t> v(2000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t(i);
  EXPECT_EQ(printed(Tensor::from_vector<int64_t>(v, {2, 1000})),
            "Tensor(shape=(2, 1000), dtype=int64, device=cpu)\n"
            "[[   0,    1,    2, ...,  997,  998,  999],\n"
            " [1000, 1001, 1002, ..., 1997, 1998, 1999]]");
  EXPECT_EQ(printed(Tensor::from_vector<int64_t>(v, {1000, 2})),
            "Tensor(shape=(1000, 2), dtype=int64, device=cpu)\n"
            "[[   0,    1],\n [   2,    3],\n [   4,    5],\n ...,\n"
            " [1994, 1995],\n [1996, 1997],\n [1998, 1999]]");
  // Both axes cut, as np.array2string(np.arange(1400).reshape(7, 200), separator=", ") prints it; the
  // widest of the shown values sets the width.
  EXPECT_EQ(
      printed(Tensor::from_vector<int64_t>(std::vector<int64_t>(v.begin(), v.begin() + 1400), {7, 200})),
      "Tensor(shape=(7, 200), dtype=int64, device=cpu)\n"
      "[[   0,    1,    2, ...,  197,  198,  199],\n [ 200,  201,  202, ...,  397,  398,  399],\n"
      " [ 400,  401,  402, ...,  597,  598,  599],\n ...,\n [ 800,  801,  802, ...,  997,  998,  999],\n"
      " [1000, 1001, 1002, ..., 1197, 1198, 1199],\n [1200, 1201, 1202, ..., 1397, 1398, 1399]]");
  // 1000 elements exactly are all printed.
  EXPECT_EQ(printed(Tensor::zeros({1000})).size(),
            std::string("Tensor(shape=(1000,), dtype=float32, device=cpu)\n[").size() + 1000 + 999 * 2 + 1);
}
