// The built-in graphs of `aether schedule` (see aether/schedule/graphs.h): lazy training steps over
// leaves that are never computed, so any batch size costs shapes only.
#include "aether/schedule/graphs.h"

#include "aether/graph/autograd.h"
#include "aether/ops/conv.h"
#include "aether/ops/nn.h"

namespace aether {
namespace {

// Collects the leaves and named outputs of one graph.
struct Builder {
  ScheduleGraph g;
  // A lazy leaf of `shape` (float32), treated as a realized buffer; a parameter when `param`.
  Tensor leaf(const Shape& shape, const std::string& name, bool param = false) {
    Tensor t = Tensor::rand(shape);
    if (param) t.set_requires_grad();
    g.leaves.push_back(t);
    g.leaf_names.push_back(name);
    return t;
  }
  void output(const Tensor& t, const std::string& name) {
    g.outputs.push_back(t.detach());
    g.output_names.push_back(name);
  }
};

// Batch norm (training) over channels-last x (..., C) with weight, bias and running statistics:
// the new running statistics become outputs; weight and bias are appended to `params`.
Tensor bn_train(Builder& b, const Tensor& x, const std::string& tag, std::vector<Tensor>& params,
                std::vector<std::string>& names) {
  const int64_t c = x.shape().back();
  const Tensor w = b.leaf({c}, tag + ".weight", true), bias = b.leaf({c}, tag + ".bias", true);  // (C)
  const Tensor rm = b.leaf({c}, tag + ".running_mean"), rv = b.leaf({c}, tag + ".running_var");  // (C)
  BatchNormResult r = batch_norm(x, w, bias, rm, rv, true);
  b.output(r.new_running_mean, tag + ".running_mean");
  b.output(r.new_running_var, tag + ".running_var");
  params.insert(params.end(), {w, bias});
  names.insert(names.end(), {tag + ".weight", tag + ".bias"});
  return r.out;
}

// conv3x3 'same' without bias: x (N,H,W,C) -> (N,H,W,out); its weight (out,3,3,C) joins `params`.
Tensor conv3x3(Builder& b, const Tensor& x, int64_t out, const std::string& tag, std::vector<Tensor>& params,
               std::vector<std::string>& names) {
  const Tensor w = b.leaf({out, 3, 3, x.shape().back()}, tag + ".weight", true);
  params.push_back(w);
  names.push_back(tag + ".weight");
  return conv2d(x, w, Tensor(), {.padding = "same"});
}

// Requests out, then dx and every parameter's gradient given the upstream gradient dy (out's shape).
void backward(Builder& b, const Tensor& out, const Tensor& x, const std::vector<Tensor>& params,
              const std::vector<std::string>& names) {
  const Tensor dy = b.leaf(out.shape(), "dy");
  std::vector<Tensor> wrt{x};
  wrt.insert(wrt.end(), params.begin(), params.end());
  const std::vector<Tensor> grads = gradients(out, wrt, dy);
  b.output(out, "out");
  b.output(grads[0], "grad x");
  for (size_t i = 0; i < params.size(); ++i) b.output(grads[i + 1], "grad " + names[i]);
}

void bn_relu(Builder& b, int64_t batch) {
  const Tensor x = b.leaf({batch, 32, 32, 32}, "x", true);  // (B,32,32,32) NHWC
  std::vector<Tensor> params;
  std::vector<std::string> names;
  const Tensor out = bn_train(b, x, "bn", params, names).relu();
  backward(b, out, x, params, names);
}

void conv_bn_relu(Builder& b, int64_t batch) {
  const Tensor x = b.leaf({batch, 32, 32, 32}, "x", true);  // (B,32,32,32)
  std::vector<Tensor> params;
  std::vector<std::string> names;
  const Tensor h = conv3x3(b, x, 32, "conv", params, names);  // (B,32,32,32)
  const Tensor out = bn_train(b, h, "bn", params, names).relu();
  backward(b, out, x, params, names);
}

void resnet_block(Builder& b, int64_t batch) {
  const Tensor x = b.leaf({batch, 32, 32, 64}, "x", true);  // (B,32,32,64)
  std::vector<Tensor> params;
  std::vector<std::string> names;
  const Tensor h = bn_train(b, conv3x3(b, x, 64, "conv1", params, names), "bn1", params, names).relu();
  const Tensor h2 = bn_train(b, conv3x3(b, h, 64, "conv2", params, names), "bn2", params, names);
  backward(b, (h2 + x).relu(), x, params, names);
}

// The cifarnet preset (aether/model/presets.h) written with the functional ops over lazy leaves
// (building the preset itself would initialise, so compute, its parameters), with the preset's
// recipe: cross-entropy with label smoothing 0.2, then optim::SGD's update (lr 0.1, Nesterov momentum
// 0.9, weight decay 5e-4) as tensor ops, in a steady state where the momentum buffers exist (leaves):
//   g = grad + wd p;  buf' = momentum buf + g;  p' = p - lr (g + momentum buf').
void cifarnet_step(Builder& b, int64_t batch) {
  constexpr double kSmoothing = 0.2, kLr = 0.1, kMomentum = 0.9, kWeightDecay = 5e-4;
  std::vector<Tensor> params;
  std::vector<std::string> names;
  const Tensor x = b.leaf({batch, 32, 32, 3}, "x");  // (B,32,32,3) normalised images
  // conv3x3 (no bias) -> [max pool 2x2] -> batch norm -> relu, as the preset's layers.
  int layer = 0;
  auto block = [&](const Tensor& in, int64_t width, bool pool) {
    const std::string n = std::to_string(++layer);
    Tensor h = conv3x3(b, in, width, "conv" + n, params, names);
    if (pool) h = max_pool2d(h, 2);
    return bn_train(b, h, "bn" + n, params, names).relu();
  };
  Tensor h = block(x, 32, false);                                           // (B,32,32,32)
  for (int64_t w : {64, 128, 256}) h = block(block(h, w, true), w, false);  // (B,16,16,64) ... (B,4,4,256)
  const Tensor fc_w = b.leaf({10, 256}, "fc.weight", true), fc_b = b.leaf({10}, "fc.bias", true);
  params.insert(params.end(), {fc_w, fc_b});
  names.insert(names.end(), {"fc.weight", "fc.bias"});
  const Tensor logits = linear(global_max_pool2d(h), fc_w, fc_b);  // (B,10)
  // (B) int64 class indices, a realized buffer (cross_entropy reads labels on the host to check them).
  const Tensor labels = Tensor::from_vector<int64_t>(std::vector<int64_t>(size_t(batch), 0), {batch});
  const Tensor loss = cross_entropy(logits, labels, kSmoothing);
  const std::vector<Tensor> grads = gradients(loss, params);
  b.output(loss, "loss");
  NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor p = params[i].detach();
    const Tensor buf = b.leaf(p.shape(), names[i] + ".momentum");
    const Tensor g = grads[i] + p * kWeightDecay;
    const Tensor new_buf = buf * kMomentum + g;
    b.output(p - (g + new_buf * kMomentum) * kLr, names[i]);
    b.output(new_buf, names[i] + ".momentum");
  }
}

struct Entry {
  const char* name;
  const char* description;
  void (*build)(Builder&, int64_t);
};
const Entry kGraphs[] = {
    {"bn-relu-train", "BatchNorm2d (training, running stats) + ReLU on (B,32,32,32): forward and backward",
     bn_relu},
    {"conv-bn-relu-train",
     "conv3x3 32->32 (no bias) -> BatchNorm2d (training) -> ReLU on (B,32,32,32): forward and backward",
     conv_bn_relu},
    {"resnet-block-train", "relu(bn(conv(relu(bn(conv(x))))) + x) on (B,32,32,64): forward and backward",
     resnet_block},
    {"cifarnet-step",
     "cifarnet on (B,32,32,3): forward, cross-entropy (smoothing 0.2), backward, SGD Nesterov + weight decay",
     cifarnet_step},
};

}  // namespace

ScheduleOptions ScheduleGraph::options() const {
  ScheduleOptions o;
  for (const Tensor& t : leaves) o.assume_realized.push_back(t.node());
  return o;
}

std::vector<std::string> schedule_graph_names() {
  std::vector<std::string> names;
  for (const Entry& e : kGraphs) names.push_back(e.name);
  return names;
}

ScheduleGraph build_schedule_graph(const std::string& name, int64_t batch) {
  for (const Entry& e : kGraphs) {
    if (name != e.name) continue;
    AETHER_CHECK(batch >= 1, "schedule graph", "batch must be >= 1, got ", batch);
    Builder b;
    b.g.name = e.name;
    b.g.description = e.description;
    e.build(b, batch);
    return std::move(b.g);
  }
  std::string known;
  for (const Entry& e : kGraphs) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw Error("schedule graph: unknown graph '" + name + "' (known: " + known + ")");
}

}  // namespace aether
