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
