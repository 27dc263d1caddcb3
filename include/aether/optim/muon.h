// aether/optim/muon.h - Muon (Jordan et al. 2024, "MomentUm Orthogonalized by Newton-Schulz"), the
// optimizer airbench94_muon uses for its conv filters.
//
// Every parameter has 2 or more dims; it is trained as the matrix (shape[0], rest) (a conv filter
// (Co, Ci, kh, kw) as (Co, Ci kh kw)). At each step, as airbench94_muon.py's Muon:
//   buf = momentum * buf + g                        (buf starts at 0)
//   u   = nesterov ? g + momentum * buf : buf
//   p   = p * (1 - lr * weight_decay)               (decoupled, as Muon's later releases; default 0)
//   p   = p * sqrt(shape[0]) / ||p||_F              (normalize_weights: airbench's weight norm)
//   p   = p - lr * newton_schulz5(u, ns_steps)
// lr is the optimizer's lr() x the parameter's lr_scale (set_param_options), as for SGD.
// Parameters of fewer than 2 dims (biases, BatchNorm) belong in another optimizer (airbench: SGD).
#pragma once

#include <string>
#include <vector>

#include "aether/graph/tensor.h"
#include "aether/optim/optimizer.h"

namespace aether::optim {

// The orthogonalisation of Muon: about U S' V^T for g = U S V^T (S' with entries in about
// [0.5, 1.5], not 1: the quintic's coefficients trade exactness for speed). g: (M, N), M, N >= 1.
//   X = g / (||g||_F + eps);  X = X^T if M > N               (so X X^T is the smaller Gram matrix)
//   steps times: A = X X^T;  B = b A + c A A;  X = a X + B X  (a, b, c = 3.4445, -4.7750, 2.0315)
//   X = X^T if M > N
// Computed in g's dtype (airbench: bfloat16 on the GPU; aether: the parameter's, float32).
Tensor newton_schulz5(const Tensor& g, int steps, double eps = 1e-7);

struct MuonOptions {
  double lr = 0.02;
  double momentum = 0.95;
  bool nesterov = true;
  int ns_steps = 5;  // airbench94_muon: 3
  double weight_decay = 0;
  bool normalize_weights = false;  // airbench94_muon: true
};

class Muon : public Optimizer {
 public:
  // Throws aether::Error for a parameter of fewer than 2 dims, or options out of range.
  Muon(std::vector<Tensor> params, MuonOptions o);
  std::string type_name() const override { return "Muon"; }
  std::string config() const override;

 protected:
  Tensor update(size_t i, const Tensor& p, const Tensor& g, int64_t t) override;

 private:
  MuonOptions o_;
};

}  // namespace aether::optim
