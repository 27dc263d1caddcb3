// Mixed precision (Model::set_precision, docs/mixed-precision.md): 16-bit activations with float32
// master weights, the layers exempt from it (BatchNorm, Softmax, the loss), short training runs in
// bfloat16 and float16 against float32 with the same seed, float16's dynamic loss scaling (an
// overflowing step is skipped and leaves everything as it was; the scale halves, grows back, and
// resumes from a checkpoint), and checkpoints that keep float32 weights whatever the precision.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/core/random.h"
#include "graph_util.h"
#include "model_util.h"
#include "temp_dir.h"

using namespace aether;
using aether::test::TempDir;
using namespace model_test;
namespace fs = std::filesystem;

namespace {

// Conv -> BN -> ReLU -> pool -> flatten -> linear, for (8,8,1) inputs and 2 classes.
void add_conv_net(Model& m) {
  m.add(mk<nn::Conv2d>(1, 4, 3, Conv2dOptions{.padding = "same"}))
      .add(mk<nn::BatchNorm2d>(4))
      .add(mk<nn::ReLU>())
      .add(mk<nn::MaxPool2d>(2))
      .add(mk<nn::Flatten>())
      .add(mk<nn::Linear>(4 * 4 * 4, 2));
}

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// Every parameter and optimizer state slot, as float32 values, in order.
std::vector<std::vector<float>> state_of(Model& m) {
  std::vector<std::vector<float>> out;
  for (auto& [name, t] : m.network().named_parameters()) out.push_back(values(*t));
  for (auto& [name, t] : m.optimizer()->named_state()) out.push_back(values(*t));
  return out;
}

}  // namespace

TEST(MixedPrecision, NamesAndAliases) {
  Model m;
  EXPECT_EQ(m.precision(), "float32");
  for (const auto& [name, want] : std::vector<std::pair<std::string, std::string>>{{"bf16", "bfloat16"},
                                                                                   {"bfloat16", "bfloat16"},
                                                                                   {"fp16", "float16"},
                                                                                   {"float16", "float16"},
                                                                                   {"fp32", "float32"},
                                                                                   {"float32", "float32"}}) {
    m.set_precision(name);
    EXPECT_EQ(m.precision(), want) << name;
  }
  m.set_precision("bf16");
  EXPECT_THROW(m.set_precision("int8"), Error);
  EXPECT_EQ(m.precision(), "bfloat16");  // a refused name changes nothing
  EXPECT_THROW(m.set_loss_scale(0), Error);
  EXPECT_THROW(m.set_loss_scale(INFINITY), Error);
  EXPECT_THROW(m.set_loss_scale(8, 0), Error);
  EXPECT_EQ(m.loss_scale(), 65536.0);
}

// 16-bit activations: Conv2d and Linear run in the input's 16-bit dtype on casts of their float32
// parameters; BatchNorm normalises in float32 (its statistics and running buffers stay float32) and
// returns the input's dtype; Softmax computes and returns float32. Gradients of the parameters are
// float32.
TEST(MixedPrecision, LayersKeepSixteenBitActivationsAndFloat32Parameters) {
  for (DType t : {DType::bfloat16, DType::float16}) {
    SCOPED_TRACE(dtype_name(t));
    manual_seed(7);
    nn::Conv2d conv(3, 4, 3, Conv2dOptions{.padding = "same"});
    nn::BatchNorm2d bn(4);
    nn::Linear fc(4, 2);
    nn::Softmax sm;
    const Tensor x = Tensor::randn({2, 5, 5, 3}).cast(t);
    const Tensor y = conv.forward(x);
    EXPECT_EQ(y.dtype(), t);
    const Tensor z = bn.forward(y);
    EXPECT_EQ(z.dtype(), t);
    EXPECT_EQ(bn.running_mean.dtype(), DType::float32);
    EXPECT_EQ(bn.running_var.dtype(), DType::float32);
    const Tensor h = fc.forward(z.relu().mean({1, 2}));
    EXPECT_EQ(h.dtype(), t);
    const Tensor p = sm.forward(h);
    EXPECT_EQ(p.dtype(), DType::float32);
    p.sum().backward();
    for (const Tensor* w : {&conv.weight, &conv.bias, &bn.weight, &bn.bias, &fc.weight, &fc.bias}) {
      EXPECT_EQ(w->dtype(), DType::float32);
      ASSERT_TRUE(w->grad().defined());
      EXPECT_EQ(w->grad().dtype(), DType::float32);
    }
    // The 16-bit forward is the float32 one to 16-bit accuracy (BN's output is O(1)).
    const Tensor z32 = bn.forward(conv.forward(x.cast(DType::float32)));
    const auto a = values(z.cast(DType::float32)), b = values(z32);
    const double tol = t == DType::bfloat16 ? 0.05 : 0.01;
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol * std::max(1.0f, std::fabs(b[i]))) << i;
  }
}

// A 16-bit conv or matmul is differentiated in its own 16-bit type (the float32 upstream gradient is
// rounded to it, as under PyTorch's autocast, so the library's 16-bit kernels run), and the
// gradients still come back in float32 (docs/mixed-precision.md, "Dtype rules"), close to the
// float32 ones: one more rounding of dy than the 16-bit ops' own cases.
TEST(MixedPrecision, ConvAndMatmulBackwardRunInTheForwardsSixteenBitType) {
  for (DType t : {DType::bfloat16, DType::float16}) {
    SCOPED_TRACE(dtype_name(t));
    const double u = t == DType::bfloat16 ? 0x1p-8 : 0x1p-11;
    Tensor x = Tensor::uniform({2, 6, 6, 3}, -1, 1).cast(t).cast(DType::float32).detach().set_requires_grad();
    Tensor w = Tensor::uniform({4, 3, 3, 3}, -1, 1).cast(t).cast(DType::float32).detach().set_requires_grad();
    Tensor m = Tensor::uniform({4, 5}, -1, 1).cast(t).cast(DType::float32).detach().set_requires_grad();
    auto loss_of = [&](DType c) {
      const Tensor y = conv2d(x.cast(c), w.cast(c), Tensor(), Conv2dOptions{.padding = 1});  // (2,6,6,4)
      const Tensor z = matmul(y.reshape({72, 4}), m.cast(c));                                // (72,5)
      // A float32 loss, so the upstream gradient of z is float32.
      return (z.cast(DType::float32) * Tensor::arange(0.0, 1.0, 1.0 / 360).reshape({72, 5})).sum();
    };
    const std::vector<Tensor> g16 = gradients(loss_of(t), {x, w, m});
    const std::vector<Tensor> g32 = gradients(loss_of(DType::float32), {x, w, m});
    for (const Tensor& g : g16) EXPECT_EQ(g.dtype(), DType::float32);
    for (Op op : {Op::Conv2dBwdData, Op::Conv2dBwdWeight, Op::Matmul}) {
      std::vector<NodePtr> found;
      for (const Tensor& g : g16)
        for (const NodePtr& n : testing_graph::nodes_of(g, op)) found.push_back(n);
      ASSERT_FALSE(found.empty()) << op_name(op);
      for (const NodePtr& n : found) EXPECT_EQ(n->dtype, t) << op_name(op);
    }
    for (size_t i = 0; i < g16.size(); ++i) {
      const std::vector<float> a = values(g16[i]), b = values(g32[i]);
      float peak = 0;
      for (float v : b) peak = std::max(peak, std::fabs(v));
      for (size_t j = 0; j < a.size(); ++j)
        EXPECT_NEAR(a[j], b[j], 16 * u * (std::fabs(b[j]) + 0.05 * peak)) << "gradient " << i << " at " << j;
    }
  }
}

// The same seed, data and epochs in each precision: the per-epoch losses stay close to float32's,
// every run learns the task, and the weights and optimizer state stay float32.
TEST(MixedPrecision, ShortTrainingRunsTrackFloat32) {
  const data::Dataset d = tiny_dataset();
  std::vector<std::vector<double>> losses;
  for (const char* precision : {"float32", "bfloat16", "float16"}) {
    SCOPED_TRACE(precision);
    manual_seed(11);
    Model m;
    add_conv_net(m);
    m.configure(sgd_config()).set_precision(precision).finalize({8, 8, 1});
    const History h = m.train(d, train_options(3));
    std::vector<double> l;
    for (const auto& e : h.epochs) l.push_back(e.train_loss);
    losses.push_back(l);
    EXPECT_LT(l.back(), l.front());
    EXPECT_GT(m.evaluate(d).accuracy, 0.9);
    EXPECT_EQ(m.skipped_steps(), 0);
    for (auto& [name, t] : m.network().named_parameters()) EXPECT_EQ(t->dtype(), DType::float32) << name;
    for (auto& [name, t] : m.optimizer()->named_state()) EXPECT_EQ(t->dtype(), DType::float32) << name;
  }
  for (size_t p = 1; p < losses.size(); ++p)
    for (size_t e = 0; e < losses[0].size(); ++e)
      EXPECT_NEAR(losses[p][e], losses[0][e], 0.05 + 0.1 * losses[0][e])
          << "precision " << p << " epoch " << e;
}

// float16: a step whose scaled gradients overflow is skipped (weights, optimizer state and its step
// count unchanged) and halves the scale; clean steps double it after growth_interval of them.
TEST(MixedPrecision, LossScalingSkipsOverflowingStepsAndAdaptsTheScale) {
  const data::Dataset d = tiny_dataset(32);
  manual_seed(13);
  Model m;
  m.add(mk<nn::Linear>(64, 2));
  m.configure(sgd_config()).set_precision("fp16").finalize({64});
  // A scale beyond float32's range: the scaled loss and every gradient overflow.
  TrainOptions o = train_options(1);
  o.max_steps_per_epoch = 1;
  m.set_loss_scale(1e300);
  const auto before = state_of(m);
  m.train(d, o);
  EXPECT_EQ(m.skipped_steps(), 1);
  EXPECT_EQ(m.loss_scale(), 5e299);
  EXPECT_EQ(m.optimizer()->steps(), 0);
  EXPECT_EQ(state_of(m), before);  // nothing moved, and no momentum buffer was made
  EXPECT_TRUE(m.optimizer()->named_state().empty());
  // Clean steps at a small scale: the update happens, and two in a row double the scale.
  m.set_loss_scale(8, 2);
  o.epochs = 2;
  m.train(d, o);
  EXPECT_EQ(m.optimizer()->steps(), 1);
  EXPECT_EQ(m.loss_scale(), 8);
  EXPECT_NE(state_of(m), before);
  o.epochs = 3;
  m.train(d, o);
  EXPECT_EQ(m.optimizer()->steps(), 2);
  EXPECT_EQ(m.loss_scale(), 16);
  EXPECT_EQ(m.skipped_steps(), 1);
}

// The scale, its clean-step count and growth interval are in the checkpoint: a resumed run doubles
// the scale at the same step as an uninterrupted one, with the same weights.
TEST(MixedPrecision, LossScaleResumesFromTheCheckpoint) {
  TempDir tmp;
  const data::Dataset d = tiny_dataset(32);
  TrainOptions o = train_options(1);
  o.max_steps_per_epoch = 1;
  auto make = [] {
    manual_seed(17);
    Model m;
    m.add(mk<nn::Linear>(64, 8)).add(mk<nn::ReLU>()).add(mk<nn::Linear>(8, 2));
    m.configure(sgd_config()).set_precision("float16").finalize({64});
    m.set_loss_scale(1024, 3);
    return m;
  };
  Model whole = make();
  o.epochs = 3;
  whole.train(d, o);
  EXPECT_EQ(whole.loss_scale(), 2048);  // three clean steps

  Model first = make();
  o.epochs = 1;
  first.train(d, o);
  EXPECT_EQ(first.loss_scale(), 1024);
  first.save(tmp.file("m.aether"));
  Model resumed = Model::load(tmp.file("m.aether"));
  EXPECT_EQ(resumed.precision(), "float16");
  EXPECT_EQ(resumed.loss_scale(), 1024);
  o.epochs = 3;
  resumed.train(d, o);
  EXPECT_EQ(resumed.loss_scale(), 2048);
  EXPECT_EQ(state_of(resumed), state_of(whole));
}

// Checkpoints hold the float32 master weights whatever the precision, record the precision, and
// load into any precision.
TEST(MixedPrecision, CheckpointsKeepFloat32WeightsAndLoadIntoAnyPrecision) {
  TempDir tmp;
  const data::Dataset d = tiny_dataset();
  manual_seed(19);
  Model m;
  add_conv_net(m);
  m.configure(sgd_config()).set_precision("bf16").finalize({8, 8, 1});
  m.train(d, train_options(1));
  m.save(tmp.file("bf16.aether"));
  Model loaded = Model::load(tmp.file("bf16.aether"));
  EXPECT_EQ(loaded.precision(), "bfloat16");
  for (auto& [name, t] : loaded.network().named_parameters()) EXPECT_EQ(t->dtype(), DType::float32) << name;
  EXPECT_EQ(state_of(loaded), state_of(m));
  const auto p16 = values(loaded.predict(d));
  loaded.set_precision("float32");
  const auto p32 = values(loaded.predict(d));
  ASSERT_EQ(p16.size(), p32.size());
  for (size_t i = 0; i < p16.size(); ++i) EXPECT_NEAR(p16[i], p32[i], 0.05) << i;
  EXPECT_NE(p16, p32);  // the bfloat16 forward really rounds
}
