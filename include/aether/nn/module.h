// aether/nn/module.h - Module: a layer with named parameters, buffers and child modules.
//
// A Module owns its tensors as members and registers them by name; named_parameters() walks the
// tree and names them by path ("0.weight", "3.body.1.running_mean"). Modules are held by
// std::shared_ptr and never copied, so registered pointers stay valid.
//
//   auto net = std::make_shared<nn::Sequential>();
//   net->add(std::make_shared<nn::Linear>(784, 128));
//   net->add(std::make_shared<nn::ReLU>());
//   Tensor y = (*net)(x);
//   std::cout << nn::summary(*net, {1, 784});
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aether/graph/tensor.h"

namespace aether::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor*>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  // "Conv2d"; describe() adds the hyperparameters: "Conv2d(3 -> 32, 3x3, stride 1, pad same)".
  virtual std::string type_name() const = 0;
  virtual std::string describe() const { return type_name(); }
  // The constructor arguments as JSON text (an object with a "type"), so module_from_config() can
  // rebuild the module: {"type": "Linear", "in": 784, "out": 128, "bias": true}.
  virtual std::string config() const = 0;

  NamedTensors named_parameters(const std::string& prefix = "");
  NamedTensors named_buffers(const std::string& prefix = "");
  std::vector<Tensor> parameters();
  int64_t num_parameters();
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }

  // Training mode (dropout active, batch norm uses and updates batch statistics) or evaluation.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves parameters and buffers to `device` (their values; requires_grad is kept).
  void to(Device device);

 protected:
  void register_parameter(const std::string& name, Tensor& t);  // also sets requires_grad
  void register_buffer(const std::string& name, Tensor& t);
  void register_module(const std::string& name, std::shared_ptr<Module> m);

 private:
  void check_new_name(const std::string& name, const char* op) const;
  std::vector<std::pair<std::string, Tensor*>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

using ModulePtr = std::shared_ptr<Module>;

// While alive, puts a module tree in evaluation mode (no dropout draws, batch norm uses and keeps
// its running statistics); afterwards every module gets back its own previous mode.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& m);
  ~EvalModeGuard();
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  std::vector<std::pair<Module*, bool>> modes_;  // pre-order: a parent before its children
};

// Layers applied in order; children are named by position ("0", "1", ...).
class Sequential : public Module {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<ModulePtr> layers);
  Sequential& add(ModulePtr layer);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  std::string config() const override;
  size_t size() const { return children().size(); }
  const ModulePtr& operator[](size_t i) const { return children()[i].second; }
};

// A table like Keras' model.summary(): layer, output shape, parameters, and totals. Shapes come
// from building the forward graph on a lazy input of `input_shape` (nothing is computed), in
// evaluation mode: batch-norm statistics, the modes and the random generator are left unchanged.
// The layers inside a nested Sequential or a Residual block follow its row, indented, named as
// their parameters are ("3.body.0 Conv2d(...)", "3.shortcut.0 ...").
std::string summary(Module& m, const Shape& input_shape);

// Rebuilds a module (and its children) from config()'s JSON text; weights are fresh (load them
// afterwards). Throws aether::Error naming what is wrong in a malformed or unknown config.
ModulePtr module_from_config(const std::string& config_json);
// Layer types defined outside the library (Python's aether.Layer registers "Python"):
// module_from_config calls the factory registered for a "type" it does not know itself, with that
// layer's config as JSON text.
using ModuleFactory = std::function<ModulePtr(const std::string& config_json)>;
void register_module_type(const std::string& type, ModuleFactory make);
const ModuleFactory* registered_module_type(const std::string& type);  // null when none

}  // namespace aether::nn
