// aether._aether.Module and the built-in layers (thin handles on the C++ modules), and Layer: a
// Module whose forward() is written in Python from tensor ops. A Layer's gradients come from
// autograd and its ops join the same lazy graph, so the fusing scheduler sees it like a built-in.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nanobind/trampoline.h>

#include <deque>
#include <nlohmann/json.hpp>

#include "bind.h"

namespace aether::py {
namespace {

// nlohmann::json <-> Python objects, through Python's json module (configs are small).
nlohmann::json to_json(nb::handle obj) {
  const std::string text = nb::cast<std::string>(nb::module_::import_("json").attr("dumps")(obj));
  return nlohmann::json::parse(text);
}
nb::object from_json(const nlohmann::json& j) { return nb::module_::import_("json").attr("loads")(j.dump()); }

// A Module implemented in Python (aether.Layer). forward() and get_config() are Python methods;
// the GIL is taken for each call, since the engine calls them with the GIL released (training).
// Parameters and buffers live here (stable addresses for Module's registry); Python reads them
// by name, so it always sees the tensors the optimizer and to(device) last set.
class PyModule : public nn::Module {
 public:
  NB_TRAMPOLINE(nn::Module, 1);

  Tensor forward(const Tensor& x) override {
    nb::gil_scoped_acquire gil;
    nb::handle self = nb_trampoline.base();
    nb::object y = self.attr("forward")(x);
    if (!nb::isinstance<Tensor>(y))
      throw nb::type_error((nb::cast<std::string>(self.type().attr("__name__")) +
                            ".forward must return an aether Tensor, got " +
                            nb::cast<std::string>(y.type().attr("__name__")))
                               .c_str());
    return nb::cast<Tensor>(y);
  }
  std::string type_name() const override {
    nb::gil_scoped_acquire gil;
    return nb::cast<std::string>(nb::handle(nb_trampoline.base()).type().attr("__name__"));
  }
  // {"type": "Python", "class": "<module>.<qualname>", "args": get_config()}: load() rebuilds the
  // layer through the Python module type registered below.
  std::string config() const override {
    nb::gil_scoped_acquire gil;
    nb::handle self = nb_trampoline.base();
    nb::handle cls = self.type();
    const std::string name =
        nb::cast<std::string>(cls.attr("__module__")) + "." + nb::cast<std::string>(cls.attr("__qualname__"));
    return nlohmann::json{{"type", "Python"}, {"class", name}, {"args", to_json(self.attr("get_config")())}}
        .dump();
  }

  Tensor& add_parameter(const std::string& name, const Tensor& t) {
    return add(name, t, &PyModule::register_parameter);
  }
  Tensor& add_buffer(const std::string& name, const Tensor& t) {
    return add(name, t, &PyModule::register_buffer);
  }
  void add_module(const std::string& name, nn::ModulePtr m) { register_module(name, std::move(m)); }
  std::optional<Tensor> find(const std::string& name) {
    for (auto& [n, t] : named_parameters())
      if (n == name) return *t;
    for (auto& [n, t] : named_buffers())
      if (n == name) return *t;
    return std::nullopt;
  }

 private:
  // Keeps `t` and registers it; a failed registration (a bad or taken name) leaves nothing behind.
  Tensor& add(const std::string& name, const Tensor& t, void (PyModule::*reg)(const std::string&, Tensor&)) {
    tensors_.push_back(t);
    try {
      (this->*reg)(name, tensors_.back());
    } catch (...) {
      tensors_.pop_back();
      throw;
    }
    return tensors_.back();
  }
  std::deque<Tensor> tensors_;  // deque: push_back keeps earlier elements in place
};

// "TypeError: what it says", without the traceback python_error::what() holds.
std::string python_error_text(const nb::python_error& e) {
  return nb::cast<std::string>(nb::handle(e.type()).attr("__name__")) + ": " +
         nb::cast<std::string>(nb::str(e.value()));
}

// Rebuilds Python layers when a checkpoint is loaded: imports the module, finds the class and
// calls its from_config(args).
nn::ModulePtr python_module_factory(const std::string& config_json) {
  nb::gil_scoped_acquire gil;
  const nlohmann::json config = nlohmann::json::parse(config_json);
  const std::string name = config.at("class").get<std::string>();
  const size_t dot = name.rfind('.');
  AETHER_CHECK_RUNTIME(dot != std::string::npos, "load", "Python layer class '", name, "' has no module");
  nb::object cls;
  try {
    cls = nb::module_::import_(name.substr(0, dot).c_str());
    std::string rest = name.substr(dot + 1);
    for (size_t p; (p = rest.find('.')) != std::string::npos; rest = rest.substr(p + 1))
      cls = cls.attr(rest.substr(0, p).c_str());
    cls = cls.attr(rest.c_str());
  } catch (const nb::python_error& e) {
    throw Error(detail::cat("the Python layer class '", name, "' cannot be found (", python_error_text(e),
                            "); import the module that defines it, under the same name, before loading"),
                ErrorKind::runtime);
  }
  const nlohmann::json args = config.value("args", nlohmann::json::object());
  try {
    return nb::cast<nn::ModulePtr>(cls.attr("from_config")(from_json(args)));
  } catch (const nb::python_error& e) {
    throw Error(detail::cat("rebuilding the Python layer ", name, " with from_config(", args.dump(),
                            ") failed: ", python_error_text(e),
                            " (a Layer whose __init__ takes arguments returns them from get_config())"),
                ErrorKind::runtime);
  }
}

}  // namespace

void bind_nn(nb::module_& m) {
  nn::register_module_type("Python", python_module_factory);

  nb::class_<nn::Module>(m, "Module", "a layer with named parameters, buffers and child modules")
      .def("forward", &nn::Module::forward)
      .def("__call__", &nn::Module::forward)
      .def("type_name", &nn::Module::type_name)
      .def("describe", &nn::Module::describe)
      .def("config",
           [](const nn::Module& mod) { return nb::module_::import_("json").attr("loads")(mod.config()); })
      .def(
          "named_parameters",
          [](nn::Module& mod) {
            std::vector<std::pair<std::string, Tensor>> out;
            for (auto& [n, t] : mod.named_parameters()) out.emplace_back(n, *t);
            return out;
          },
          "(name, tensor) pairs: '0.weight', '3.body.1.bias', ...")
      .def("named_buffers",
           [](nn::Module& mod) {
             std::vector<std::pair<std::string, Tensor>> out;
             for (auto& [n, t] : mod.named_buffers()) out.emplace_back(n, *t);
             return out;
           })
      .def("parameters", &nn::Module::parameters)
      .def("num_parameters", &nn::Module::num_parameters)
      .def("train", &nn::Module::train, nb::arg("on") = true)
      .def("eval", &nn::Module::eval)
      .def_prop_ro("training", &nn::Module::is_training)
      .def("to",
           [](nn::Module& mod, const std::string& d) { mod.to(Device::parse(d == "numpy" ? "cpu" : d)); })
      .def("__repr__", &nn::Module::describe);

  nb::class_<PyModule, nn::Module>(m, "_Layer")
      .def(nb::init<>())
      .def("add_parameter", &PyModule::add_parameter, nb::rv_policy::copy, nb::arg("name"), nb::arg("tensor"),
           "registers a trainable tensor (requires_grad is set) and returns it")
      .def("add_buffer", &PyModule::add_buffer, nb::rv_policy::copy, nb::arg("name"), nb::arg("tensor"),
           "registers a state tensor that is saved but not trained")
      .def("add_module", &PyModule::add_module, nb::arg("name"), nb::arg("module"))
      .def("_find", &PyModule::find);

  using nb::arg;
  nb::class_<nn::Sequential, nn::Module>(m, "Sequential")
      .def(nb::init<>())
      .def("add", [](nn::Sequential& s, nn::ModulePtr l) { s.add(std::move(l)); })
      .def("__len__", &nn::Sequential::size)
      .def("__getitem__", [](nn::Sequential& s, size_t i) {
        if (i >= s.size()) throw nb::index_error();
        return s[i];
      });
  nb::class_<nn::Linear, nn::Module>(m, "Linear")
      .def(nb::init<int64_t, int64_t, bool>(), arg("in_features"), arg("out_features"), arg("bias") = true)
      .def_rw("weight", &nn::Linear::weight)
      .def_rw("bias", &nn::Linear::bias);
  nb::class_<nn::Conv2d, nn::Module>(m, "_Conv2d")
      .def(
          "__init__",
          [](nn::Conv2d* self, int64_t in, int64_t out, nb::handle kernel, nb::handle stride,
             nb::handle padding, nb::handle dilation, int64_t groups, bool bias) {
            Conv2dOptions o;
            o.stride = size2_of(stride, "Conv2d: stride");
            o.padding = padding2d_of(padding, "Conv2d: padding");
            o.dilation = size2_of(dilation, "Conv2d: dilation");
            o.groups = groups;
            new (self) nn::Conv2d(in, out, size2_of(kernel, "Conv2d: kernel_size"), o, bias);
          },
          arg("in_channels"), arg("out_channels"), arg("kernel_size"), arg("stride") = 1, arg("padding") = 0,
          arg("dilation") = 1, arg("groups") = 1, arg("bias") = true)
      .def_rw("weight", &nn::Conv2d::weight)
      .def_rw("bias", &nn::Conv2d::bias);
  nb::class_<nn::BatchNorm, nn::Module>(m, "_BatchNorm")
      .def(nb::init<int64_t, int, double, double, bool>(), arg("channels"), arg("dims"),
           arg("momentum") = 0.1, arg("eps") = 1e-5, arg("affine") = true)
      .def_rw("weight", &nn::BatchNorm::weight)
      .def_rw("bias", &nn::BatchNorm::bias)
      .def_rw("running_mean", &nn::BatchNorm::running_mean)
      .def_rw("running_var", &nn::BatchNorm::running_var);
  nb::class_<nn::LayerNorm, nn::Module>(m, "_LayerNorm")
      .def(nb::init<int64_t, double, bool>(), arg("features"), arg("eps") = 1e-5, arg("affine") = true)
      .def_rw("weight", &nn::LayerNorm::weight)
      .def_rw("bias", &nn::LayerNorm::bias);
  nb::class_<nn::ReLU, nn::Module>(m, "_ReLU").def(nb::init<>());
  nb::class_<nn::Sigmoid, nn::Module>(m, "_Sigmoid").def(nb::init<>());
  nb::class_<nn::Tanh, nn::Module>(m, "_Tanh").def(nb::init<>());
  nb::class_<nn::LeakyReLU, nn::Module>(m, "_LeakyReLU").def(nb::init<double>(), arg("slope") = 0.01);
  nb::class_<nn::GELU, nn::Module>(m, "_GELU").def(nb::init<bool>(), arg("tanh_approx") = false);
  nb::class_<nn::ELU, nn::Module>(m, "_ELU").def(nb::init<double>(), arg("alpha") = 1.0);
  nb::class_<nn::SiLU, nn::Module>(m, "_SiLU").def(nb::init<>());
  nb::class_<nn::Softplus, nn::Module>(m, "_Softplus")
      .def(nb::init<double, double>(), arg("beta") = 1.0, arg("threshold") = 20.0);
  nb::class_<nn::Softmax, nn::Module>(m, "_Softmax").def(nb::init<int64_t>(), arg("axis") = -1);
  nb::class_<nn::MaxPool2d, nn::Module>(m, "_MaxPool2d")
      .def(
          "__init__",
          [](nn::MaxPool2d* self, nb::handle k, nb::handle s, nb::handle p) {
            new (self) nn::MaxPool2d(size2_of(k, "MaxPool2d: kernel"), size2_of(s, "MaxPool2d: stride"),
                                     size2_of(p, "MaxPool2d: padding"));
          },
          arg("kernel"), arg("stride") = 0, arg("padding") = 0);
  nb::class_<nn::AvgPool2d, nn::Module>(m, "_AvgPool2d")
      .def(
          "__init__",
          [](nn::AvgPool2d* self, nb::handle k, nb::handle s, nb::handle p, bool cip) {
            new (self) nn::AvgPool2d(size2_of(k, "AvgPool2d: kernel"), size2_of(s, "AvgPool2d: stride"),
                                     size2_of(p, "AvgPool2d: padding"), cip);
          },
          arg("kernel"), arg("stride") = 0, arg("padding") = 0, arg("count_include_pad") = false);
  nb::class_<nn::GlobalAvgPool2d, nn::Module>(m, "_GlobalAvgPool2d").def(nb::init<>());
  nb::class_<nn::GlobalMaxPool2d, nn::Module>(m, "_GlobalMaxPool2d").def(nb::init<>());
  nb::class_<nn::Flatten, nn::Module>(m, "_Flatten").def(nb::init<>());
  nb::class_<nn::Scale, nn::Module>(m, "_Scale").def(nb::init<double>(), arg("factor"));
  nb::class_<nn::Dropout, nn::Module>(m, "_Dropout").def(nb::init<double>(), arg("p") = 0.5);
  nb::class_<nn::SpatialDropout, nn::Module>(m, "_SpatialDropout").def(nb::init<double>(), arg("p") = 0.5);
  nb::class_<nn::Residual, nn::Module>(m, "Residual")
      .def(nb::init<nn::ModulePtr, nn::ModulePtr>(), arg("body"), arg("shortcut") = nullptr);

  m.def(
      "output_shape",
      [](nn::Module& mod, const Shape& sample) {
        // The shape one sample has after `mod`: a lazy forward in evaluation mode, nothing computed.
        NoGradGuard no_grad;
        nn::EvalModeGuard eval_mode(mod);
        Shape s = sample;
        s.insert(s.begin(), 2);
        Shape out = mod.forward(Tensor::zeros(s)).shape();
        if (out.empty() || out[0] != 2)
          throw Error(mod.type_name() + ": a layer must keep the batch axis first: a batch of 2 samples " +
                      to_string(s) + " gave " + to_string(out));
        out.erase(out.begin());
        return out;
      },
      arg("module"), arg("sample_shape"));
  m.def("summary", [](nn::Module& mod, const Shape& s) { return nn::summary(mod, s); });
}

}  // namespace aether::py
