// aether/optim/schedule.h - learning-rate schedules: a pure function of the step number.
//
// lr(step) for step = 0, 1, 2, ... (the number of optimizer steps already taken). Being pure, a
// schedule's position is just the step count, which checkpoints save.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace aether::optim {

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double lr(int64_t step) const = 0;
  // The schedule as JSON text (schedule_from_config rebuilds it): {"type": "cosine", ...}.
  virtual std::string config() const = 0;
};

// base for every step.
class ConstantLR : public LRSchedule {
 public:
  explicit ConstantLR(double base) : base_(base) {}
  double lr(int64_t) const override { return base_; }
  std::string config() const override;

 private:
  double base_;
};

// base * gamma^floor(step / step_size)   (torch StepLR)
class StepLR : public LRSchedule {
 public:
  StepLR(double base, int64_t step_size, double gamma = 0.1);
  double lr(int64_t step) const override;
  std::string config() const override;

 private:
  double base_;
  int64_t step_size_;
  double gamma_;
};

// min + (base - min) * (1 + cos(pi * step / total)) / 2, then min after `total`.
class CosineLR : public LRSchedule {
 public:
  CosineLR(double base, int64_t total_steps, double min_lr = 0);
  double lr(int64_t step) const override;
  std::string config() const override;

 private:
  double base_;
  int64_t total_;
  double min_;
};

// Linear warm-up to base over `warmup` steps, then linear decay to `final_lr` at `total`:
//   step < warmup:  base * (step + 1) / warmup        (so the first step already has a non-zero lr
//                                                      and step warmup - 1 reaches base)
//   otherwise:      base + (final_lr - base) * min((step - warmup) / (total - warmup), 1)
class WarmupLinearLR : public LRSchedule {
 public:
  WarmupLinearLR(double base, int64_t warmup_steps, int64_t total_steps, double final_lr = 0);
  double lr(int64_t step) const override;
  std::string config() const override;

 private:
  double base_;
  int64_t warmup_, total_;
  double final_;
};

// One-cycle (Smith), as torch OneCycleLR with cosine annealing and three phases off:
// from max/div_factor up to max over pct_start * total steps, then down to
// max/(div_factor * final_div_factor) at `total`.
class OneCycleLR : public LRSchedule {
 public:
  OneCycleLR(double max_lr, int64_t total_steps, double pct_start = 0.3, double div_factor = 25,
             double final_div_factor = 1e4);
  double lr(int64_t step) const override;
  std::string config() const override;

 private:
  double max_;
  int64_t total_;
  double pct_, div_, final_div_;
};

// airbench's triangle: piecewise linear through (0, base * start), (peak, base), (total, base * end)
// with peak = int(peak_fraction * total) (0 for peak_fraction 0 or very short runs: then it only
// falls, from base; airbench94_muon: base (1 - step / total)), then base * end after `total`.
class TriangleLR : public LRSchedule {
 public:
  TriangleLR(double base, int64_t total_steps, double peak_fraction, double start = 0, double end = 0);
  double lr(int64_t step) const override;
  std::string config() const override;

 private:
  double base_;
  int64_t total_, peak_;
  double pct_, start_, end_;
};

// Throws aether::Error naming what is wrong in malformed JSON or an unknown or bad schedule.
std::unique_ptr<LRSchedule> schedule_from_config(const std::string& config_json);

}  // namespace aether::optim
