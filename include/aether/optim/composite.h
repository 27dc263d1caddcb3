// aether/optim/composite.h - several optimizers as one: each parameter trained by one of them
// (airbench94_muon: the conv filters by Muon, the biases and the head by SGD).
//
// A Composite is an Optimizer over every parameter: one step(), one schedule, one state (named
// "<index>.<slot>" over the Composite's parameter indices, as for any optimizer), lookahead and
// set_param_options / set_param_lr over all of them. Each part computes the updates of its own
// parameters with the Composite's learning rate (or the parameter's set_param_lr) x its lr_scale; a
// part's own lr, parameter options and
// lookahead are not used. A part's hyperparameters (momentum, Muon's ns_steps...) are its own.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "aether/optim/optimizer.h"

namespace aether::optim {

class Composite : public Optimizer {
 public:
  struct Part {
    std::unique_ptr<Optimizer> optimizer;
    // The Composite's parameter index of each of the part's parameters (part.params()[j] is
    // params[index[j]]).
    std::vector<size_t> index;
  };
  // Throws aether::Error unless every parameter belongs to exactly one part, as the same tensor,
  // or when a part has taken a step or holds state.
  Composite(std::vector<Tensor> params, double lr, std::vector<Part> parts);
  std::string type_name() const override { return "Composite"; }
  // {"type": "Composite", "lr": ..., "parts": [{"params": [i, ...], "optimizer": {the part's config
  // without its lr and param_options}}, ...]} plus the Composite's own param_options and lookahead.
  std::string config() const override;
  size_t parts() const { return parts_.size(); }
  const Optimizer& part(size_t k) const { return *parts_.at(k).optimizer; }

 protected:
  Tensor update(size_t i, const Tensor& p, const Tensor& g, int64_t t) override;

 private:
  std::vector<Part> parts_;
  std::vector<std::pair<size_t, size_t>> where_;  // per parameter: (part, index in the part)
};

}  // namespace aether::optim
