// aether/nn/layers.h - the layers: Linear, Conv2d, BatchNorm, activations, pooling, dropout,
// Flatten and Residual. Each is a thin Module around a functional op (aether/ops/nn.h, conv.h).
//
// Layouts: activations channels-last ((N, C) or (N, H, W, C)); Linear weight (out, in) like
// PyTorch; Conv2d weight OHWI (O, KH, KW, C/groups). Initialisation follows PyTorch:
// weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (Kaiming-uniform with a = sqrt(5)),
// drawn from the global Philox generator (aether::manual_seed makes them reproducible);
// batch norm weight 1, bias 0, running mean 0, running var 1.
#pragma once

#include "aether/nn/module.h"
#include "aether/ops/conv.h"

namespace aether::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& x) override;  // x (..., in) -> (..., out)
  std::string type_name() const override { return "Linear"; }
  std::string describe() const override;
  std::string config() const override;
  Tensor weight;  // (out, in)
  Tensor bias;    // (out) or empty
 private:
  int64_t in_, out_;
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel, Conv2dOptions opt = {}, bool bias = true);
  Tensor forward(const Tensor& x) override;  // x (N,H,W,C) -> (N,OH,OW,O)
  std::string type_name() const override { return "Conv2d"; }
  std::string describe() const override;
  std::string config() const override;
  Tensor weight;  // (O, KH, KW, C/groups)
  Tensor bias;    // (O) or empty
  const Conv2dOptions& options() const { return opt_; }

 private:
  int64_t in_, out_;
  Size2 kernel_;
  Conv2dOptions opt_;
};

// Batch normalisation over every axis but the last (the channel axis). BatchNorm1d takes (N, C),
// BatchNorm2d (N, H, W, C). Training uses batch statistics and updates the running ones:
// running = (1 - momentum) running + momentum batch (unbiased variance, as PyTorch).
class BatchNorm : public Module {
 public:
  BatchNorm(int64_t channels, int dims, double momentum = 0.1, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return dims_ == 1 ? "BatchNorm1d" : "BatchNorm2d"; }
  std::string describe() const override;
  std::string config() const override;
  Tensor weight, bias;               // (C), or empty without affine
  Tensor running_mean, running_var;  // (C) buffers
  // >= 0: in training, the statistics are synchronized over the ranks of this collective group
  // (aether/graph/collective.h; batch_norm's sync_group). Model::train sets it for
  // TrainOptions::sync_batch_norm and resets it to -1 (per-rank statistics) when training ends.
  void set_sync_group(int64_t group) { sync_group_ = group; }
  int64_t sync_group() const { return sync_group_; }

 private:
  int64_t channels_;
  int dims_;
  double momentum_, eps_;
  bool affine_;
  int64_t sync_group_ = -1;
};
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t c, double momentum = 0.1, double eps = 1e-5, bool affine = true)
      : BatchNorm(c, 1, momentum, eps, affine) {}
};
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t c, double momentum = 0.1, double eps = 1e-5, bool affine = true)
      : BatchNorm(c, 2, momentum, eps, affine) {}
};

// Layer normalisation over the last axis (the features of (N, F), the channels of (N, H, W, C)):
// each sample (each pixel) normalised by its own mean and variance, then * weight + bias (F).
// The same in training and evaluation; 16-bit input is normalised in float32 (its parameters stay
// float32) and returned in its dtype.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t features, double eps = 1e-5, bool affine = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LayerNorm"; }
  std::string describe() const override;
  std::string config() const override;
  Tensor weight, bias;  // (F), or empty without affine

 private:
  int64_t features_;
  double eps_;
  bool affine_;
};

// Layers without parameters.
class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.relu(); }
  std::string type_name() const override { return "ReLU"; }
  std::string config() const override;
};
class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.sigmoid(); }
  std::string type_name() const override { return "Sigmoid"; }
  std::string config() const override;
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.tanh(); }
  std::string type_name() const override { return "Tanh"; }
  std::string config() const override;
};
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double slope = 0.01) : slope_(slope) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "LeakyReLU"; }
  std::string config() const override;

 private:
  double slope_;
};
class GELU : public Module {
 public:
  explicit GELU(bool tanh_approx = false) : tanh_(tanh_approx) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "GELU"; }
  std::string config() const override;

 private:
  bool tanh_;
};
// ELU (alpha finite): x > 0 ? x : alpha (e^x - 1).
class ELU : public Module {
 public:
  explicit ELU(double alpha = 1.0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ELU"; }
  std::string describe() const override;
  std::string config() const override;

 private:
  double alpha_;
};
// SiLU (swish): x * sigmoid(x).
class SiLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SiLU"; }
  std::string config() const override;
};
// Softplus (beta > 0, threshold finite): (1/beta) log(1 + e^(beta x)), x itself where beta x > threshold.
class Softplus : public Module {
 public:
  explicit Softplus(double beta = 1.0, double threshold = 20.0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Softplus"; }
  std::string describe() const override;
  std::string config() const override;

 private:
  double beta_, threshold_;
};
class Softmax : public Module {
 public:
  explicit Softmax(int64_t axis = -1) : axis_(axis) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Softmax"; }
  std::string config() const override;

 private:
  int64_t axis_;
};
// Pooling windows of `kernel`; a stride of 0 (per axis) means the kernel's size. The layer keeps,
// and its config() writes, the real stride ([2, 2] for MaxPool2d(2)).
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(Size2 kernel, Size2 stride = 0, Size2 padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "MaxPool2d"; }
  std::string describe() const override;
  std::string config() const override;

 private:
  Size2 k_, s_, p_;
};
class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel, Size2 stride = 0, Size2 padding = 0, bool count_include_pad = false);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "AvgPool2d"; }
  std::string describe() const override;
  std::string config() const override;

 private:
  Size2 k_, s_, p_;
  bool cip_;
};
class GlobalAvgPool2d : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // (N,H,W,C) -> (N,C)
  std::string type_name() const override { return "GlobalAvgPool2d"; }
  std::string config() const override;
};
class GlobalMaxPool2d : public Module {
 public:
  Tensor forward(const Tensor& x) override;  // (N,H,W,C) -> (N,C)
  std::string type_name() const override { return "GlobalMaxPool2d"; }
  std::string config() const override;
};
// (N, ...) -> (N, prod(...))
class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.flatten(1); }
  std::string type_name() const override { return "Flatten"; }
  std::string config() const override;
};
// y = factor * x: a fixed scale (airbench's output scale 1/9 after its bias-free head).
class Scale : public Module {
 public:
  explicit Scale(double factor);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Scale"; }
  std::string describe() const override;
  std::string config() const override;
  double factor() const { return factor_; }

 private:
  double factor_;
};
// Zeroes each element with probability p in training and scales the rest by 1/(1-p).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Dropout"; }
  std::string describe() const override;
  std::string config() const override;

 private:
  double p_;
};
// Drops whole channels: one draw per (N, C), shared over H and W.
class SpatialDropout : public Module {
 public:
  explicit SpatialDropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "SpatialDropout"; }
  std::string describe() const override;
  std::string config() const override;

 private:
  double p_;
};
// y = body(x) + shortcut(x), or body(x) + x without a shortcut (the residual add).
class Residual : public Module {
 public:
  explicit Residual(ModulePtr body, ModulePtr shortcut = nullptr);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Residual"; }
  std::string describe() const override;
  std::string config() const override;

 private:
  ModulePtr body_, shortcut_;
};

}  // namespace aether::nn
