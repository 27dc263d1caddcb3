// Module bookkeeping (names, modes, devices), Sequential and the summary table (with the layers
// inside nested Sequentials and Residual blocks, indented).
#include "aether/nn/module.h"

#include <algorithm>
#include <array>
#include <iomanip>
#include <sstream>

#include "aether/nn/layers.h"
#include "config_json.h"

namespace aether::nn {
namespace {
std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
}  // namespace

// A new parameter, buffer or child name: non-empty, no '.' (full names join them with dots, as in
// "3.body.0.weight", which checkpoints and param_groups match), and not taken in this module.
void Module::check_new_name(const std::string& name, const char* op) const {
  AETHER_CHECK(!name.empty() && name.find('.') == std::string::npos, op, "name '", name,
               "' must be non-empty and hold no '.' (full names join names with dots, e.g. '3.weight')");
  auto taken = [&](const auto& entries) {
    return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == name; });
  };
  AETHER_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), op, "'", name,
               "' is already a parameter, buffer or layer of this module");
}
void Module::register_parameter(const std::string& name, Tensor& t) {
  check_new_name(name, "register_parameter");
  AETHER_CHECK(t.defined(), "register_parameter", "parameter '", name, "' is an empty tensor");
  if (!t.requires_grad()) t.set_requires_grad(true);
  params_.emplace_back(name, &t);
}
void Module::register_buffer(const std::string& name, Tensor& t) {
  check_new_name(name, "register_buffer");
  buffers_.emplace_back(name, &t);
}
void Module::register_module(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name, "register_module");
  AETHER_CHECK(m != nullptr, "register_module", "module '", name, "' is null");
  children_.emplace_back(name, std::move(m));
}

NamedTensors Module::named_parameters(const std::string& prefix) {
  NamedTensors out;
  for (auto& [n, t] : params_) out.emplace_back(join(prefix, n), t);
  for (auto& [n, c] : children_) {
    auto sub = c->named_parameters(join(prefix, n));
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

NamedTensors Module::named_buffers(const std::string& prefix) {
  NamedTensors out;
  for (auto& [n, t] : buffers_) out.emplace_back(join(prefix, n), t);
  for (auto& [n, c] : children_) {
    auto sub = c->named_buffers(join(prefix, n));
    out.insert(out.end(), sub.begin(), sub.end());
  }
  return out;
}

std::vector<Tensor> Module::parameters() {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(*t);
  return out;
}

int64_t Module::num_parameters() {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t->numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::to(Device device) {
  for (auto* group : {&params_, &buffers_})
    for (auto& [n, t] : *group) {
      if (t->device() == device) continue;
      // Replace the value in place, keeping the tensor's identity: an optimizer holds handles to the
      // same parameters and must see them move. An accumulated gradient moves along.
      const Tensor moved = t->detach().to(device);
      TensorImpl& impl = *t->impl();
      if (impl.grad) impl.grad = Tensor(impl.grad->node).to(device).impl();
      impl.node = moved.node();
      impl.grad_fn.reset();
    }
  for (auto& [n, c] : children_) c->to(device);
}

EvalModeGuard::EvalModeGuard(Module& m) {
  std::vector<Module*> stack{&m};
  while (!stack.empty()) {  // pre-order
    Module* cur = stack.back();
    stack.pop_back();
    modes_.emplace_back(cur, cur->is_training());
    const auto& ch = cur->children();
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) stack.push_back(it->second.get());
  }
  m.eval();
}

EvalModeGuard::~EvalModeGuard() {
  // train(on) also sets the descendants, so restoring in pre-order leaves each module its own mode.
  for (auto& [mod, on] : modes_) mod->train(on);
}

Sequential::Sequential(std::vector<ModulePtr> layers) {
  for (auto& l : layers) add(std::move(l));
}

Sequential& Sequential::add(ModulePtr layer) {
  register_module(std::to_string(children().size()), std::move(layer));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& [n, c] : children()) h = c->forward(h);
  return h;
}

std::string Sequential::config() const {
  nlohmann::json layers = nlohmann::json::array();
  for (auto& [n, c] : children()) layers.push_back(child_config(*c));
  return nlohmann::json{{"type", "Sequential"}, {"layers", layers}}.dump();
}

namespace {
using Rows = std::vector<std::array<std::string, 3>>;  // layer, output shape, parameters

Tensor add_rows(Module& m, const std::string& name, const Tensor& x, int depth, Rows& rows);

// The rows of a branch or a nested Sequential: one per layer, each fed the one before.
Tensor add_layer_rows(Module& m, const std::string& name, const Tensor& x, int depth, Rows& rows) {
  if (dynamic_cast<Sequential*>(&m) == nullptr) return add_rows(m, name, x, depth, rows);
  Tensor h = x;
  for (auto& [n, c] : m.children()) h = add_rows(*c, join(name, n), h, depth, rows);
  return h;
}

// m's row (its name, indented by depth, and description; its output shape for input x; its
// parameters), then, one level deeper, the layers inside it: a nested Sequential's in order, a
// Residual's body and shortcut each from the block's input x. Returns m's output.
Tensor add_rows(Module& m, const std::string& name, const Tensor& x, int depth, Rows& rows) {
  const Tensor y = m.forward(x);
  rows.push_back({std::string(size_t(2 * depth), ' ') + (name.empty() ? "" : name + " ") + m.describe(),
                  to_string(y.shape()), std::to_string(m.num_parameters())});
  if (dynamic_cast<Sequential*>(&m) != nullptr) {
    add_layer_rows(m, name, x, depth + 1, rows);
  } else if (dynamic_cast<Residual*>(&m) != nullptr) {
    for (auto& [n, branch] : m.children()) add_layer_rows(*branch, join(name, n), x, depth + 1, rows);
  }
  return y;
}
}  // namespace

std::string summary(Module& m, const Shape& input_shape) {
  NoGradGuard no_grad;
  EvalModeGuard eval_mode(m);  // training mode would update batch-norm statistics and draw dropout masks
  Rows rows;
  const Tensor x = Tensor::zeros(input_shape);
  if (dynamic_cast<Sequential*>(&m) != nullptr)
    add_layer_rows(m, "", x, 0, rows);  // the network's layers, numbered from 0
  else
    add_rows(m, "", x, 0, rows);
  size_t w0 = 5, w1 = 12, w2 = 7;
  for (auto& r : rows) {
    w0 = std::max(w0, r[0].size());
    w1 = std::max(w1, r[1].size());
    w2 = std::max(w2, r[2].size());
  }
  std::ostringstream os;
  const std::string rule(w0 + w1 + w2 + 6, '-');
  os << std::left << std::setw(int(w0)) << "Layer"
     << "   " << std::setw(int(w1)) << "Output shape"
     << "   " << std::right << std::setw(int(w2)) << "Params"
     << "\n"
     << rule << "\n";
  for (auto& r : rows)
    os << std::left << std::setw(int(w0)) << r[0] << "   " << std::setw(int(w1)) << r[1] << "   "
       << std::right << std::setw(int(w2)) << r[2] << "\n";
  // Frozen parameters (no gradient: ModelConfig::param_groups' frozen ones) are not trainable.
  int64_t trainable = 0, frozen = 0, buffers = 0;
  for (auto& [n, t] : m.named_parameters()) (t->requires_grad() ? trainable : frozen) += t->numel();
  for (auto& [n, t] : m.named_buffers()) buffers += t->numel();
  os << rule << "\nInput shape: " << to_string(input_shape) << "\nTrainable parameters: " << trainable
     << "\n";
  if (frozen > 0) os << "Frozen parameters: " << frozen << "\n";
  os << "Buffers (non-trainable): " << buffers << "\n";
  return os.str();
}

}  // namespace aether::nn
