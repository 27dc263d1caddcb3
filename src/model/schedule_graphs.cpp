// The built-in graphs of `aether schedule` (see model/schedule_graphs.h): lazy training steps
// over leaves that are never computed, so any batch size costs shapes only (cifarnet-step also
// initialises the preset's 1.2M parameters, once).
#include "model/schedule_graphs.h"

#include "aether/graph/autograd.h"
#include "aether/model/presets.h"
#include "aether/ops/conv.h"
#include "aether/ops/nn.h"
#include "aether/optim/optimizer.h"

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

// The cifarnet preset's training step as Model::train runs it (Model::record_train_step): the preset's
// network (make_preset) and recipe (cross-entropy with label smoothing 0.2; optim::SGD, Nesterov
// momentum 0.9, weight decay 5e-4), on a lazy batch x (B,32,32,3), in a steady state where the
// momentum buffers exist (lazy leaves). The parameters and batch-norm buffers are the model's own
// (realized); the labels a realized (B) int64 buffer (cross_entropy checks them on the host).
void cifarnet_step(Builder& b, int64_t batch) {
  Preset p = make_preset("cifarnet", {32, 32, 3}, 10);
  Model m;
  m.add(p.network).configure(p.config).finalize({32, 32, 3});
  optim::Optimizer& opt = *m.optimizer();
  const auto named = m.network().named_parameters();
  for (size_t i = 0; i < named.size(); ++i)
    opt.set_state(i, "momentum", b.leaf(named[i].second->shape(), named[i].first + ".momentum"));
  const Tensor x = b.leaf({batch, 32, 32, 3}, "x");  // (B,32,32,3) normalised images
  const Tensor labels = Tensor::from_vector<int64_t>(std::vector<int64_t>(size_t(batch), 0), {batch});  // (B)
  const Model::Step step = m.record_train_step(x, labels);
  for (size_t i = 0; i < step.tensors.size(); ++i) b.output(step.tensors[i], step.names[i]);
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
     "the cifarnet preset's training step on (B,32,32,3) (Model::record_train_step): forward, cross-entropy "
     "(smoothing 0.2), backward, accuracy, SGD Nesterov + weight decay",
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
