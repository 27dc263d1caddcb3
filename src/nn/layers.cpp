// The layers: thin Modules over the functional ops.
#include "aether/nn/layers.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "aether/io/limits.h"
#include "aether/ops/nn.h"
#include "config_depth.h"
#include "config_json.h"
#include "io/json.h"

namespace aether::nn {
namespace {
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default for conv and linear weights and biases.
Tensor kaiming_uniform(const Shape& shape, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(double(std::max<int64_t>(fan_in, 1)));
  return Tensor::uniform(shape, -bound, bound).realize().detach();
}
std::string size2(Size2 s) {
  return s.h == s.w ? std::to_string(s.h) : std::to_string(s.h) + "x" + std::to_string(s.w);
}
nlohmann::json size2_json(Size2 s) { return {s.h, s.w}; }
// Mixed precision (docs/mixed-precision.md): float32 parameters meet 16-bit activations in the
// activations' dtype. The cast is one node per parameter per step, shared by forward and backward,
// and its gradient comes back in float32 (promotion), so the parameter's gradient is float32.
Tensor in_compute_dtype(const Tensor& p, const Tensor& x) {
  return p.defined() && is_16bit_float(x.dtype()) && p.dtype() == DType::float32 ? p.cast(x.dtype()) : p;
}
// A pooling stride of 0 on an axis means the kernel's size there.
Size2 pool_stride(Size2 kernel, Size2 stride) {
  return {stride.h == 0 ? kernel.h : stride.h, stride.w == 0 ? kernel.w : stride.w};
}
}  // namespace

// ---- Linear -------------------------------------------------------------------------------------------
Linear::Linear(int64_t in, int64_t out, bool use_bias) : in_(in), out_(out) {
  AETHER_CHECK(in > 0 && out > 0, "Linear", "features must be positive, got ", in, " -> ", out);
  weight = kaiming_uniform({out, in}, in);
  register_parameter("weight", weight);
  if (use_bias) {
    bias = kaiming_uniform({out}, in);
    register_parameter("bias", bias);
  }
}
Tensor Linear::forward(const Tensor& x) {
  AETHER_CHECK(x.ndim() >= 1 && x.shape().back() == in_, "Linear", "expected input (..., ", in_, "), got ",
               to_string(x.shape()));
  return linear(x, in_compute_dtype(weight, x), in_compute_dtype(bias, x));
}
std::string Linear::describe() const {
  return detail::cat("Linear(", in_, " -> ", out_, bias.defined() ? "" : ", no bias", ")");
}
std::string Linear::config() const {
  return nlohmann::json{{"type", "Linear"}, {"in", in_}, {"out", out_}, {"bias", bias.defined()}}.dump();
}

// ---- Conv2d -------------------------------------------------------------------------------------------
Conv2d::Conv2d(int64_t in, int64_t out, Size2 kernel, Conv2dOptions opt, bool use_bias)
    : in_(in), out_(out), kernel_(kernel), opt_(opt) {
  AETHER_CHECK(in > 0 && out > 0 && kernel.h > 0 && kernel.w > 0, "Conv2d", "bad sizes ", in, " -> ", out,
               " kernel ", kernel.h, "x", kernel.w);
  AETHER_CHECK(opt.groups >= 1 && in % opt.groups == 0 && out % opt.groups == 0, "Conv2d", "channels ", in,
               " -> ", out, " are not divisible by groups ", opt.groups);
  const int64_t fan_in = in / opt.groups * kernel.h * kernel.w;
  weight = kaiming_uniform({out, kernel.h, kernel.w, in / opt.groups}, fan_in);
  register_parameter("weight", weight);
  if (use_bias) {
    bias = kaiming_uniform({out}, fan_in);
    register_parameter("bias", bias);
  }
}
Tensor Conv2d::forward(const Tensor& x) {
  AETHER_CHECK(x.ndim() == 4 && x.shape()[3] == in_, "Conv2d", "expected input (N, H, W, ", in_, "), got ",
               to_string(x.shape()));
  return conv2d(x, in_compute_dtype(weight, x), in_compute_dtype(bias, x), opt_);
}
std::string Conv2d::describe() const {
  const auto& p = opt_.padding;
  const std::string pad = p.same ? "same"
                          : (p.top == p.bottom && p.left == p.right && p.top == p.left)
                              ? std::to_string(p.top)
                              : detail::cat(p.top, ",", p.bottom, ",", p.left, ",", p.right);
  return detail::cat("Conv2d(", in_, " -> ", out_, ", ", kernel_.h, "x", kernel_.w, ", stride ",
                     size2(opt_.stride), ", pad ", pad,
                     opt_.dilation.h != 1 || opt_.dilation.w != 1 ? ", dil " + size2(opt_.dilation) : "",
                     opt_.groups != 1 ? ", groups " + std::to_string(opt_.groups) : "",
                     bias.defined() ? "" : ", no bias", ")");
}
std::string Conv2d::config() const {
  const auto& p = opt_.padding;
  nlohmann::json pad = p.same ? nlohmann::json("same") : nlohmann::json({p.top, p.bottom, p.left, p.right});
  return nlohmann::json{{"type", "Conv2d"},
                        {"in", in_},
                        {"out", out_},
                        {"kernel", size2_json(kernel_)},
                        {"stride", size2_json(opt_.stride)},
                        {"padding", pad},
                        {"dilation", size2_json(opt_.dilation)},
                        {"groups", opt_.groups},
                        {"bias", bias.defined()}}
      .dump();
}

// ---- BatchNorm ----------------------------------------------------------------------------------------
BatchNorm::BatchNorm(int64_t c, int dims, double momentum, double eps, bool affine)
    : channels_(c), dims_(dims), momentum_(momentum), eps_(eps), affine_(affine) {
  AETHER_CHECK(c > 0 && (dims == 1 || dims == 2), "BatchNorm", "bad channels ", c, " or dims ", dims);
  AETHER_CHECK(momentum >= 0 && momentum <= 1 && eps > 0, "BatchNorm",
               "momentum must be in [0, 1] and eps > 0");
  if (affine) {
    weight = Tensor::ones({c}).realize().detach();
    bias = Tensor::zeros({c}).realize().detach();
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
  running_mean = Tensor::zeros({c}).realize().detach();
  running_var = Tensor::ones({c}).realize().detach();
  register_buffer("running_mean", running_mean);
  register_buffer("running_var", running_var);
}
Tensor BatchNorm::forward(const Tensor& x) {
  const int want = dims_ == 1 ? 2 : 4;
  AETHER_CHECK(x.ndim() == want && x.shape().back() == channels_, type_name(), "expected input ",
               dims_ == 1 ? "(N, " : "(N, H, W, ", channels_, "), got ", to_string(x.shape()));
  // Exempt from mixed precision: 16-bit input is normalised in float32 (statistics, running
  // buffers and parameters stay float32) and the output returns to the input's dtype.
  const bool narrow = is_16bit_float(x.dtype());
  if (is_training() && !(running_mean.is_realized() && running_var.is_realized())) {
    // The last step's update is still pending: a training loop of one's own (Model::train realizes
    // the buffers with each step). Computed now, so that the updates do not chain from step to step,
    // holding every batch's activations and growing a graph that realizing them later must walk.
    realize({running_mean, running_var});
  }
  auto r = batch_norm(narrow ? x.cast(DType::float32) : x, weight, bias, running_mean, running_var,
                      is_training(), momentum_, eps_, is_training() ? sync_group_ : -1);
  if (is_training()) {
    NoGradGuard no_grad;
    running_mean.assign(r.new_running_mean.detach());
    running_var.assign(r.new_running_var.detach());
  }
  return narrow ? r.out.cast(x.dtype()) : r.out;
}
std::string BatchNorm::describe() const { return detail::cat(type_name(), "(", channels_, ")"); }
std::string BatchNorm::config() const {
  return nlohmann::json{{"type", type_name()},
                        {"channels", channels_},
                        {"momentum", momentum_},
                        {"eps", eps_},
                        {"affine", affine_}}
      .dump();
}

LayerNorm::LayerNorm(int64_t features, double eps, bool affine)
    : features_(features), eps_(eps), affine_(affine) {
  AETHER_CHECK(features > 0, "LayerNorm", "features must be > 0, got ", features);
  AETHER_CHECK(eps > 0 && std::isfinite(eps), "LayerNorm", "eps must be finite and > 0, got ", eps);
  if (affine) {
    weight = Tensor::ones({features}).realize().detach();
    bias = Tensor::zeros({features}).realize().detach();
    register_parameter("weight", weight);
    register_parameter("bias", bias);
  }
}
Tensor LayerNorm::forward(const Tensor& x) {
  AETHER_CHECK(x.ndim() >= 2 && x.shape().back() == features_, "LayerNorm", "expected input (N, ..., ",
               features_, "), got ", to_string(x.shape()));
  return layer_norm(x, weight, bias, 1, eps_);
}
std::string LayerNorm::describe() const { return detail::cat("LayerNorm(", features_, ")"); }
std::string LayerNorm::config() const {
  return nlohmann::json{{"type", "LayerNorm"}, {"features", features_}, {"eps", eps_}, {"affine", affine_}}
      .dump();
}

// ---- parameter-free layers -------------------------------------------------------------------------------
Tensor LeakyReLU::forward(const Tensor& x) { return leaky_relu(x, slope_); }
Tensor GELU::forward(const Tensor& x) { return gelu(x, tanh_); }
ELU::ELU(double alpha) : alpha_(alpha) {
  AETHER_CHECK(std::isfinite(alpha), "ELU", "alpha must be finite, got ", alpha);
}
Tensor ELU::forward(const Tensor& x) { return elu(x, alpha_); }
std::string ELU::describe() const { return detail::cat("ELU(", alpha_, ")"); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Softplus::Softplus(double beta, double threshold) : beta_(beta), threshold_(threshold) {
  AETHER_CHECK(beta > 0 && std::isfinite(beta), "Softplus", "beta must be finite and > 0, got ", beta);
  AETHER_CHECK(std::isfinite(threshold), "Softplus", "threshold must be finite, got ", threshold);
}
Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta_, threshold_); }
std::string Softplus::describe() const { return detail::cat("Softplus(", beta_, ")"); }
// Exempt from mixed precision: computed and returned in float32.
Tensor Softmax::forward(const Tensor& x) {
  return softmax(is_16bit_float(x.dtype()) ? x.cast(DType::float32) : x, axis_);
}
MaxPool2d::MaxPool2d(Size2 kernel, Size2 stride, Size2 padding)
    : k_(kernel), s_(pool_stride(kernel, stride)), p_(padding) {}
Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, k_, s_, p_); }
std::string MaxPool2d::describe() const { return "MaxPool2d(" + size2(k_) + ")"; }
std::string MaxPool2d::config() const {
  return nlohmann::json{{"type", "MaxPool2d"},
                        {"kernel", size2_json(k_)},
                        {"stride", size2_json(s_)},
                        {"padding", size2_json(p_)}}
      .dump();
}
AvgPool2d::AvgPool2d(Size2 kernel, Size2 stride, Size2 padding, bool count_include_pad)
    : k_(kernel), s_(pool_stride(kernel, stride)), p_(padding), cip_(count_include_pad) {}
Tensor AvgPool2d::forward(const Tensor& x) { return avg_pool2d(x, k_, s_, p_, cip_); }
std::string AvgPool2d::describe() const { return "AvgPool2d(" + size2(k_) + ")"; }
std::string AvgPool2d::config() const {
  return nlohmann::json{{"type", "AvgPool2d"},
                        {"kernel", size2_json(k_)},
                        {"stride", size2_json(s_)},
                        {"padding", size2_json(p_)},
                        {"count_include_pad", cip_}}
      .dump();
}
Tensor GlobalAvgPool2d::forward(const Tensor& x) { return global_avg_pool2d(x); }
Tensor GlobalMaxPool2d::forward(const Tensor& x) { return global_max_pool2d(x); }

Scale::Scale(double factor) : factor_(factor) {
  AETHER_CHECK(std::isfinite(factor), "Scale", "the factor must be finite, got ", factor);
}
Tensor Scale::forward(const Tensor& x) { return x * factor_; }
std::string Scale::describe() const { return detail::cat("Scale(", factor_, ")"); }

Dropout::Dropout(double p) : p_(p) {
  AETHER_CHECK(p >= 0 && p < 1, "Dropout", "p must be in [0, 1), got ", p);
}
Tensor Dropout::forward(const Tensor& x) { return dropout(x, p_, is_training()); }
std::string Dropout::describe() const { return detail::cat("Dropout(", p_, ")"); }
SpatialDropout::SpatialDropout(double p) : p_(p) {
  AETHER_CHECK(p >= 0 && p < 1, "SpatialDropout", "p must be in [0, 1), got ", p);
}
Tensor SpatialDropout::forward(const Tensor& x) { return spatial_dropout(x, p_, is_training()); }
std::string SpatialDropout::describe() const { return detail::cat("SpatialDropout(", p_, ")"); }

// ---- configs of the parameter-free layers --------------------------------------------------------------
std::string ReLU::config() const { return nlohmann::json{{"type", "ReLU"}}.dump(); }
std::string Sigmoid::config() const { return nlohmann::json{{"type", "Sigmoid"}}.dump(); }
std::string Tanh::config() const { return nlohmann::json{{"type", "Tanh"}}.dump(); }
std::string LeakyReLU::config() const {
  return nlohmann::json{{"type", "LeakyReLU"}, {"slope", slope_}}.dump();
}
std::string GELU::config() const { return nlohmann::json{{"type", "GELU"}, {"tanh_approx", tanh_}}.dump(); }
std::string ELU::config() const { return nlohmann::json{{"type", "ELU"}, {"alpha", alpha_}}.dump(); }
std::string SiLU::config() const { return nlohmann::json{{"type", "SiLU"}}.dump(); }
std::string Softplus::config() const {
  return nlohmann::json{{"type", "Softplus"}, {"beta", beta_}, {"threshold", threshold_}}.dump();
}
std::string Softmax::config() const { return nlohmann::json{{"type", "Softmax"}, {"axis", axis_}}.dump(); }
std::string GlobalAvgPool2d::config() const { return nlohmann::json{{"type", "GlobalAvgPool2d"}}.dump(); }
std::string GlobalMaxPool2d::config() const { return nlohmann::json{{"type", "GlobalMaxPool2d"}}.dump(); }
std::string Flatten::config() const { return nlohmann::json{{"type", "Flatten"}}.dump(); }
std::string Scale::config() const { return nlohmann::json{{"type", "Scale"}, {"factor", factor_}}.dump(); }
std::string Dropout::config() const { return nlohmann::json{{"type", "Dropout"}, {"p", p_}}.dump(); }
std::string SpatialDropout::config() const {
  return nlohmann::json{{"type", "SpatialDropout"}, {"p", p_}}.dump();
}

// ---- Residual -------------------------------------------------------------------------------------------
Residual::Residual(ModulePtr body, ModulePtr shortcut)
    : body_(std::move(body)), shortcut_(std::move(shortcut)) {
  register_module("body", body_);
  if (shortcut_) register_module("shortcut", shortcut_);
}
Tensor Residual::forward(const Tensor& x) {
  const Tensor y = body_->forward(x);
  const Tensor s = shortcut_ ? shortcut_->forward(x) : x;
  AETHER_CHECK(y.shape() == s.shape(), "Residual", "body output ", to_string(y.shape()), " and shortcut ",
               to_string(s.shape()), " differ");
  return y + s;
}
std::string Residual::describe() const {
  return "Residual(" + body_->describe() + (shortcut_ ? " + " + shortcut_->describe() : " + identity") + ")";
}
std::string Residual::config() const {
  nlohmann::json j{{"type", "Residual"}, {"body", child_config(*body_)}};
  if (shortcut_) j["shortcut"] = child_config(*shortcut_);
  return j.dump();
}

// ---- rebuilding from config
// --------------------------------------------------------------------------------
namespace {
// Typed reads of a config's fields: a value of the wrong JSON type, a fraction where a size belongs,
// or a size outside [0, kMaxConfigDim] is an aether::Error naming the field (nlohmann's own
// conversions truncate 3.5 to 3 and convert 1e300 to an integer with undefined behaviour).
int64_t dim_from(const nlohmann::json& j, const char* field) {
  AETHER_CHECK(j.is_number_integer(), "module_from_config", "\"", field, "\" must be a whole number, got ",
               json_excerpt(j));
  const bool in_range = j.is_number_unsigned() ? j.get<uint64_t>() <= uint64_t(kMaxConfigDim)
                                               : j.get<int64_t>() >= 0 && j.get<int64_t>() <= kMaxConfigDim;
  AETHER_CHECK(in_range, "module_from_config", "\"", field, "\" = ", json_excerpt(j), " is outside [0, ",
               kMaxConfigDim, "]");
  return j.get<int64_t>();
}
int64_t dim_at(const nlohmann::json& c, const char* field) { return dim_from(c.at(field), field); }
double number_at(const nlohmann::json& c, const char* field) {
  const nlohmann::json& j = c.at(field);
  AETHER_CHECK(j.is_number() && std::isfinite(j.get<double>()), "module_from_config", "\"", field,
               "\" must be a finite number, got ", json_excerpt(j));
  return j.get<double>();
}
bool bool_value(const nlohmann::json& c, const char* field, bool fallback) {
  if (!c.contains(field)) return fallback;
  AETHER_CHECK(c.at(field).is_boolean(), "module_from_config", "\"", field, "\" must be true or false, got ",
               json_excerpt(c.at(field)));
  return c.at(field).get<bool>();
}
Size2 size2_at(const nlohmann::json& c, const char* field) {
  const nlohmann::json& j = c.at(field);
  if (!j.is_array()) return Size2(dim_from(j, field));
  AETHER_CHECK(j.size() == 2, "module_from_config", "\"", field, "\" must be a number or a pair, got ",
               json_excerpt(j));
  return Size2(dim_from(j.at(0), field), dim_from(j.at(1), field));
}
// The values (parameters and buffers) that the layers of config `c` would allocate, read with the
// same checks as the constructors' arguments below; 0 for layers without any and for what
// module_from_json rejects anyway. Bounded in depth by the JSON parser's limit.
double config_values(const nlohmann::json& c) {
  if (!c.is_object() || !c.contains("type") || !c.at("type").is_string()) return 0;
  const std::string& t = c.at("type").get_ref<const std::string&>();
  double n = 0;
  if (t == "Sequential") {
    for (const auto& l : c.at("layers")) n += config_values(l);
  } else if (t == "Residual") {
    n = config_values(c.at("body")) + (c.contains("shortcut") ? config_values(c.at("shortcut")) : 0);
  } else if (t == "Linear") {
    const double out = double(dim_at(c, "out"));
    n = double(dim_at(c, "in")) * out + out;  // weight (out, in), bias (out)
  } else if (t == "Conv2d") {
    const Size2 k = size2_at(c, "kernel");
    const double out = double(dim_at(c, "out"));
    const double groups = double(std::max<int64_t>(dim_at(c, "groups"), 1));
    n = out * double(k.h) * double(k.w) * double(dim_at(c, "in")) / groups + out;  // (Co, kh, kw, Ci/g), (Co)
  } else if (t == "BatchNorm1d" || t == "BatchNorm2d") {
    n = 4 * double(dim_at(c, "channels"));  // weight, bias, running mean and variance
  }
  AETHER_CHECK(n <= double(kMaxConfigValues), "module_from_config", json_excerpt(c), " would hold ", n,
               " values; at most ", kMaxConfigValues, " are allowed in one model");
  return n;
}
}  // namespace

ModulePtr module_from_json(const nlohmann::json& c) {
  const ModuleNestingGuard nesting;  // throws past kMaxModuleNesting
  AETHER_CHECK(c.is_object() && c.contains("type"), "module_from_config",
               "expected an object with a \"type\", got ", json_excerpt(c));
  AETHER_CHECK(c.at("type").is_string(), "module_from_config", "\"type\" must be a string, got ",
               json_excerpt(c.at("type")));
  const std::string t = c.at("type");
  try {
    // The whole config is counted before any layer of it allocates (config_values throws).
    if (nesting.outermost()) config_values(c);
    if (t == "Sequential") {
      auto s = std::make_shared<Sequential>();
      for (const auto& l : c.at("layers")) s->add(module_from_json(l));
      return s;
    }
    if (t == "Linear") {
      return std::make_shared<Linear>(dim_at(c, "in"), dim_at(c, "out"), bool_value(c, "bias", true));
    }
    if (t == "Conv2d") {
      Conv2dOptions o;
      o.stride = size2_at(c, "stride");
      o.dilation = size2_at(c, "dilation");
      o.groups = dim_at(c, "groups");
      const auto& p = c.at("padding");
      if (p.is_string()) {
        o.padding = Padding2d(p.get<std::string>());
      } else {
        AETHER_CHECK(p.is_array() && p.size() == 4, "module_from_config",
                     "\"padding\" must be \"same\", \"valid\" or [top, bottom, left, right], got ",
                     json_excerpt(p));
        o.padding = Padding2d(dim_from(p.at(0), "padding"), dim_from(p.at(1), "padding"),
                              dim_from(p.at(2), "padding"), dim_from(p.at(3), "padding"));
      }
      return std::make_shared<Conv2d>(dim_at(c, "in"), dim_at(c, "out"), size2_at(c, "kernel"), o,
                                      bool_value(c, "bias", true));
    }
    if (t == "BatchNorm1d" || t == "BatchNorm2d")
      return std::make_shared<BatchNorm>(dim_at(c, "channels"), t == "BatchNorm1d" ? 1 : 2,
                                         number_at(c, "momentum"), number_at(c, "eps"),
                                         bool_value(c, "affine", true));
    if (t == "LayerNorm")
      return std::make_shared<LayerNorm>(dim_at(c, "features"), number_at(c, "eps"),
                                         bool_value(c, "affine", true));
    if (t == "ReLU") return std::make_shared<ReLU>();
    if (t == "Sigmoid") return std::make_shared<Sigmoid>();
    if (t == "Tanh") return std::make_shared<Tanh>();
    if (t == "LeakyReLU") return std::make_shared<LeakyReLU>(number_at(c, "slope"));
    if (t == "GELU") return std::make_shared<GELU>(bool_value(c, "tanh_approx", false));
    if (t == "ELU") return std::make_shared<ELU>(number_at(c, "alpha"));
    if (t == "SiLU") return std::make_shared<SiLU>();
    if (t == "Softplus") return std::make_shared<Softplus>(number_at(c, "beta"), number_at(c, "threshold"));
    if (t == "Softmax") {
      const nlohmann::json axis = c.value("axis", nlohmann::json(-1));
      AETHER_CHECK(axis.is_number_integer() && axis.get<int64_t>() >= -8 && axis.get<int64_t>() < 8,
                   "module_from_config", "\"axis\" must be a whole number in [-8, 8), got ",
                   json_excerpt(axis));
      return std::make_shared<Softmax>(axis.get<int64_t>());
    }
    // Pooling: files written before the stride was stored as such hold [0, 0] for "the kernel's
    // size"; the constructors read 0 that way.
    if (t == "MaxPool2d")
      return std::make_shared<MaxPool2d>(size2_at(c, "kernel"), size2_at(c, "stride"),
                                         size2_at(c, "padding"));
    if (t == "AvgPool2d")
      return std::make_shared<AvgPool2d>(size2_at(c, "kernel"), size2_at(c, "stride"), size2_at(c, "padding"),
                                         bool_value(c, "count_include_pad", false));
    if (t == "GlobalAvgPool2d") return std::make_shared<GlobalAvgPool2d>();
    if (t == "GlobalMaxPool2d") return std::make_shared<GlobalMaxPool2d>();
    if (t == "Flatten") return std::make_shared<Flatten>();
    if (t == "Scale") return std::make_shared<Scale>(number_at(c, "factor"));
    if (t == "Dropout") return std::make_shared<Dropout>(number_at(c, "p"));
    if (t == "SpatialDropout") return std::make_shared<SpatialDropout>(number_at(c, "p"));
    if (t == "Residual")
      return std::make_shared<Residual>(
          module_from_json(c.at("body")),
          c.contains("shortcut") ? module_from_json(c.at("shortcut")) : nullptr);
    if (const ModuleFactory* make = registered_module_type(t)) return (*make)(c.dump());
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::cat("module_from_config: bad ", text_excerpt(t), " config ", json_excerpt(c), ": ",
                            e.what()));
  }
  throw Error(
      "module_from_config: unknown layer type '" + text_excerpt(t) + "'" +
      (t == "Python"
           ? " (a layer written in Python: load this file from Python, with the layer's module importable)"
           : ""));
}

ModulePtr module_from_config(const std::string& config_json) {
  // A Sequential is two JSON levels ({"layers": [...]}): kMaxModuleNesting modules fit; the
  // nesting guard in module_from_json gives the error past it.
  return module_from_json(parse_json(config_json, "module config", 2 * kMaxModuleNesting + 2));
}

nlohmann::json child_config(const Module& m) {
  return parse_json(m.config(), m.type_name() + "'s config()", 2 * kMaxModuleNesting + 2);
}

namespace {
std::mutex g_types_mu;
std::map<std::string, ModuleFactory>& module_types() {
  static std::map<std::string, ModuleFactory> types;
  return types;
}
}  // namespace

void register_module_type(const std::string& type, ModuleFactory make) {
  std::lock_guard<std::mutex> lock(g_types_mu);
  module_types()[type] = std::move(make);
}
const ModuleFactory* registered_module_type(const std::string& type) {
  std::lock_guard<std::mutex> lock(g_types_mu);
  auto it = module_types().find(type);
  return it == module_types().end() ? nullptr : &it->second;
}

}  // namespace aether::nn
