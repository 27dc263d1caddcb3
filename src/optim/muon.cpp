// Muon and its Newton-Schulz orthogonalisation, as lazy tensor ops (aether/optim/muon.h): the update
// of every parameter is part of the optimizer step's one schedule; the matrix products are the
// graph's matmul (oneDNN or the reference loop on the CPU).
#include "aether/optim/muon.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "aether/core/error.h"

namespace aether::optim {

Tensor newton_schulz5(const Tensor& g, int steps, double eps) {
  AETHER_CHECK(g.ndim() == 2, "newton_schulz5", "needs a matrix, got " + to_string(g.shape()));
  AETHER_CHECK(steps >= 0 && eps >= 0, "newton_schulz5", "needs steps >= 0 and eps >= 0");
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  const bool tall = g.shape()[0] > g.shape()[1];
  Tensor x = g / ((g * g).sum().sqrt() + eps);  // (M, N), ||x||_F <= 1: singular values <= 1
  if (tall) x = x.t().contiguous();             // (K, L), K = min(M, N)
  for (int s = 0; s < steps; ++s) {
    const Tensor A = x.matmul(x.t());          // (K, K)
    const Tensor B = A * b + A.matmul(A) * c;  // (K, K)
    x = x * a + B.matmul(x);                   // (K, L)
  }
  return tall ? x.t().contiguous() : x;  // (M, N)
}

Muon::Muon(std::vector<Tensor> params, MuonOptions o) : Optimizer(std::move(params), o.lr), o_(o) {
  AETHER_CHECK(o.momentum >= 0 && o.weight_decay >= 0 && o.ns_steps >= 1, "Muon",
               "needs momentum >= 0, weight_decay >= 0 and ns_steps >= 1");
  AETHER_CHECK(!o.nesterov || o.momentum > 0, "Muon", "Nesterov momentum needs momentum > 0");
  for (size_t i = 0; i < params_.size(); ++i)
    AETHER_CHECK(
        params_[i].ndim() >= 2, "Muon",
        "parameter " + std::to_string(i) + " has shape " + to_string(params_[i].shape()) +
            ": Muon trains matrices and filters (2 or more dims); give biases and norms to SGD or Adam");
}

Tensor Muon::update(size_t i, const Tensor& p0, const Tensor& g, int64_t /*t*/) {
  const double lr = lr_of(i), wd = weight_decay_of(i, o_.weight_decay);
  Tensor u = g;
  if (o_.momentum != 0) {
    Tensor& buf = slot(i, "momentum");  // starts at 0: the first buf is g
    buf = buf * o_.momentum + g;
    u = o_.nesterov ? g + buf * o_.momentum : buf;
  }
  Tensor p = wd != 0 ? p0 * (1 - lr * wd) : p0;
  const int64_t rows = p.shape()[0];
  if (o_.normalize_weights) p = p * (std::sqrt(double(rows)) / (p * p).sum().sqrt());
  const Tensor o = newton_schulz5(u.reshape({rows, -1}), o_.ns_steps).reshape(p.shape());
  return p - o * lr;
}

std::string Muon::config() const {
  return with_param_options(nlohmann::json{
      {"type", "Muon"},
      {"lr", lr_},
      {"momentum", o_.momentum},
      {"nesterov", o_.nesterov},
      {"ns_steps", o_.ns_steps},
      {"weight_decay", o_.weight_decay},
      {"normalize_weights",
       o_.normalize_weights}}.dump());
}

}  // namespace aether::optim
