// aether/optim/optimizer.h - SGD (momentum, Nesterov, weight decay), Adam and AdamW, gradient
// clipping by global norm.
//
// An optimizer holds handles to the parameters (the same tensors the Module owns) and its state
// tensors. step() reads each parameter's grad(), records the update as lazy tensor ops, assigns
// the new values (Tensor::assign keeps the parameters' identity) and realizes all parameters and
// state together, so the whole update is one schedule.
//
// The formulas are PyTorch's (torch.optim), written in each class comment; tests check them
// against values computed by hand.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aether/graph/tensor.h"
#include "aether/optim/schedule.h"

namespace aether::optim {

// One parameter's own hyperparameters (torch's param groups): learning rate lr() (or its own, set by
// set_param_lr) x lr_scale; weight decay `weight_decay`, or the optimizer's own when negative.
struct ParamOptions {
  double lr_scale = 1;
  double weight_decay = -1;
  bool operator==(const ParamOptions&) const = default;
};

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update from the current gradients (parameters without a gradient are skipped). The new
  // parameters, the state and `also_realize` (e.g. the loss, batch-norm buffers) are realized
  // together, as one schedule.
  void step(const std::vector<Tensor>& also_realize = {});
  // What step() does short of computing it: assigns the parameters and state their new (lazy) values
  // and returns every tensor step() realizes: also_realize, then the updated parameters, then the
  // state (named_state()'s order). `aether schedule` inspects a training step this way.
  std::vector<Tensor> record_step(const std::vector<Tensor>& also_realize = {});
  void zero_grad();
  double lr() const { return lr_; }
  void set_lr(double lr);
  int64_t steps() const { return steps_; }
  // lr() from a schedule, for a training loop of one's own: each step first sets
  // lr(schedule->lr(steps())), the steps taken before it (so the first step uses lr(0)); a set_lr in
  // between lasts until then. nullptr (the default): lr() is what set_lr gave. Model::train sets lr
  // itself and attaches none.
  void set_schedule(std::shared_ptr<const LRSchedule> schedule) { schedule_ = std::move(schedule); }
  const LRSchedule* schedule() const { return schedule_.get(); }
  const std::vector<Tensor>& params() const { return params_; }
  // Parameter i's own learning-rate scale and weight decay (default: 1 and the optimizer's). Throws
  // aether::Error for an index out of range, a scale that is not finite and > 0, or a non-finite decay.
  void set_param_options(size_t i, ParamOptions o);
  const ParamOptions& param_options(size_t i) const { return popts_.at(i); }
  // Parameter i's own learning rate in place of lr(), still x its lr_scale: a schedule of its own
  // (ModelConfig's ParamGroup::schedule_over_train_epochs), set before each step like set_lr; < 0:
  // lr() again (the default). Not part of config(). Throws aether::Error for an index out of range or
  // a value that is not finite.
  void set_param_lr(size_t i, double lr);
  double param_lr(size_t i) const { return own_lr_.at(i); }

  // Lookahead (Zhang et al. 2019, as airbench uses it): every parameter keeps slow weights (state
  // slot "lookahead", the parameter's value after the first step that is a multiple of `every`,
  // counting the optimizer's steps); on every later such step they move
  // toward the parameter by `alpha` (slow += alpha (param - slow)) and the parameter takes their
  // value. every 0: off (the default). alpha in [0, 1] may change between steps (set_lookahead_alpha,
  // like set_lr). lookahead_finish() gives every parameter its slow weights (the end of training).
  void set_lookahead(int64_t every, double alpha);
  void set_lookahead_alpha(double alpha);
  int64_t lookahead_every() const { return la_every_; }
  double lookahead_alpha() const { return la_alpha_; }
  void lookahead_finish();
  // Paused: steps take no lookahead step (and do not start the slow weights); not part of config().
  void pause_lookahead(bool paused) { la_paused_ = paused; }
  // Tensors that lookahead averages like the parameters but that this optimizer does not train: a
  // model's BatchNorm running statistics (airbench's lookahead averages the model's whole state, so
  // the evaluation's statistics are averaged like its weights). Each keeps slow values (state slot
  // "lookahead" of tensor params().size() + j in named_state() and set_state()) that start and
  // move at the parameters' lookahead steps, from the buffer's value at that step (its value after
  // the step's forward pass when realized with it); the buffer then takes them. Call before the first
  // step; handles to the same tensors (Tensor::assign keeps their identity).
  void set_lookahead_buffers(std::vector<Tensor> buffers);
  const std::vector<Tensor>& lookahead_buffers() const { return la_buffers_; }

  virtual std::string type_name() const = 0;
  // The hyperparameters as JSON text: {"type": "SGD", "lr": 0.1, "momentum": 0.9, ...}.
  virtual std::string config() const = 0;
  // State tensors for checkpoints, named "<param index>.<slot>" (e.g. "3.momentum"; index
  // params().size() + j: lookahead buffer j's slow values); and the step count, restored with
  // set_steps().
  std::vector<std::pair<std::string, Tensor*>> named_state();
  void set_steps(int64_t s) { steps_ = s; }
  // Restores one state slot of parameter i (or lookahead buffer i - params().size()): checkpoint
  // loading; shape and dtype must match.
  void set_state(size_t i, const std::string& slot_name, const Tensor& value);

 protected:
  // The update of parameter i (grad g) at 1-based step t: returns the new value; updates state.
  virtual Tensor update(size_t i, const Tensor& p, const Tensor& g, int64_t t) = 0;
  // Parameter i's learning rate, and its weight decay (`fallback`: the optimizer's own).
  double lr_of(size_t i) const { return (own_lr_[i] >= 0 ? own_lr_[i] : lr_) * popts_[i].lr_scale; }
  double weight_decay_of(size_t i, double fallback) const {
    return popts_[i].weight_decay >= 0 ? popts_[i].weight_decay : fallback;
  }
  // config()'s JSON text with the parameters' own options added ("param_options": [[i, lr_scale,
  // weight_decay], ...] for each parameter that has any; nothing when none has).
  std::string with_param_options(const std::string& json) const;
  // A zero-initialised state slot of parameter i, created on first use.
  Tensor& slot(size_t i, const std::string& name);
  bool has_slot(size_t i, const std::string& name) const;

  std::vector<Tensor> params_;
  double lr_;
  int64_t steps_ = 0;
  std::shared_ptr<const LRSchedule> schedule_;

 private:
  friend class Composite;  // forwards updates to its parts, which keep their state in it

  // The parameter, or lookahead buffer, whose state has index i.
  const Tensor& state_owner(size_t i) const;
  bool lookahead_step() const { return la_every_ > 0 && !la_paused_ && steps_ % la_every_ == 0; }

  // Per parameter, then per lookahead buffer (deque: stable references).
  std::vector<std::deque<std::pair<std::string, Tensor>>> state_;
  std::vector<Tensor> la_buffers_;
  std::vector<ParamOptions> popts_;  // per parameter
  std::vector<double> own_lr_;       // per parameter: set_param_lr's (< 0: lr_)
  // A part of a Composite: the state of parameter i is slot (host_index_[i], name) of host_.
  Optimizer* host_ = nullptr;
  std::vector<size_t> host_index_;
  int64_t la_every_ = 0;
  double la_alpha_ = 0.5;
  bool la_paused_ = false;
};

// SGD, as torch.optim.SGD:
//   g = grad + weight_decay * p
//   buf = momentum * buf + (1 - dampening) * g     (buf = g on the parameter's first step with a
//                                                   gradient, as torch: its buffer is None then)
//   g = nesterov ? g + momentum * buf : buf         (when momentum != 0)
//   p = p - lr * g
struct SGDOptions {
  double lr = 0.01;
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  double weight_decay = 0;
};
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions o);
  std::string type_name() const override { return "SGD"; }
  std::string config() const override;

 protected:
  Tensor update(size_t i, const Tensor& p, const Tensor& g, int64_t t) override;

 private:
  SGDOptions o_;
};

// Adam / AdamW, as torch.optim.Adam and AdamW (t: the optimizer's step count, shared by all
// parameters; torch counts per parameter, which differs only for parameters that miss steps):
//   Adam:  g = grad + weight_decay * p          AdamW: p = p * (1 - lr * weight_decay)
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p = p - lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps)
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
};
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled_weight_decay = false);
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  std::string config() const override;

 protected:
  Tensor update(size_t i, const Tensor& p, const Tensor& g, int64_t t) override;

 private:
  AdamOptions o_;
  bool decoupled_;
};
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions o) : Adam(std::move(params), o, true) {}
};

// Scales every gradient by min(1, max_norm / (total_norm + 1e-6)), where total_norm is the
// 2-norm of all gradients together (torch.nn.utils.clip_grad_norm_). Returns total_norm (lazy).
Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace aether::optim
