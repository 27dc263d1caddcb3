// `aether demo`: trains a small MLP on synthetic data (three interleaved spirals) with SGD and
// prints its loss falling. The main job until `aether train` on real data lands.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <vector>

#include "aether/aether.h"
#include "aether/ops/nn.h"
#include "args.h"
#include "commands.h"

namespace aether::cli {
namespace {
struct DemoOptions {
  int steps = 300;
  int hidden = 64;
  int points = 256;  // per class
  double lr = 0.5;
  uint64_t seed = 1;
  // As given; read into the fields above by check_numbers (bounds in --help).
  TextArg steps_text, hidden_text, points_text, lr_text, seed_text;
};

void check_numbers(DemoOptions& o) {
  read_int("demo", o.steps_text, o.steps, 1, 1'000'000);
  read_int("demo", o.hidden_text, o.hidden, 1, 4096);
  read_int("demo", o.points_text, o.points, 1, 100'000);
  if (o.lr_text.given()) o.lr = parse_positive_real("demo", "--lr", o.lr_text.text);
  if (o.seed_text.given()) o.seed = parse_uint64("demo", "--seed", o.seed_text.text);
}

// Three spirals in 2-D: x (3*points, 2) float32, y (3*points) int64.
std::pair<Tensor, Tensor> spirals(int points) {
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < points; ++i) {
      const double r = double(i) / points;
      const double t = c * 2.0 * std::numbers::pi / 3 + 4.0 * r + 0.2 * std::sin(13.0 * i);
      x.push_back(float(r * std::sin(t)));
      x.push_back(float(r * std::cos(t)));
      y.push_back(c);
    }
  return {Tensor::from_vector(x, {3 * int64_t(points), 2}), Tensor::from_vector(y)};
}

int run(DemoOptions& o) {
  check_numbers(o);
  manual_seed(o.seed);
  auto [x, y] = spirals(o.points);
  // Kaiming-uniform-like init: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  auto init = [](Shape s, int64_t fan_in) {
    const double b = 1.0 / std::sqrt(double(fan_in));
    return Tensor::uniform(s, -b, b).realize().detach().set_requires_grad();
  };
  Tensor w1 = init({o.hidden, 2}, 2), b1 = init({o.hidden}, 2);
  Tensor w2 = init({o.hidden, o.hidden}, o.hidden), b2 = init({o.hidden}, o.hidden);
  Tensor w3 = init({3, o.hidden}, o.hidden), b3 = init({3}, o.hidden);
  std::vector<Tensor> params{w1, b1, w2, b2, w3, b3};
  std::printf("aether demo: MLP 2-%d-%d-3 on %d synthetic spiral points, SGD lr %.2f\n", o.hidden, o.hidden,
              3 * o.points, o.lr);
  const auto t0 = std::chrono::steady_clock::now();
  double first = 0, last = 0;
  for (int step = 0; step <= o.steps; ++step) {
    Tensor h = linear(x, w1, b1).relu();
    h = linear(h, w2, b2).relu();
    Tensor logits = linear(h, w3, b3);
    Tensor loss = cross_entropy(logits, y);
    loss.backward();
    {
      NoGradGuard ng;
      for (auto& p : params) {
        p.assign(p - p.grad() * o.lr);
        p.zero_grad();
      }
    }
    std::vector<Tensor> outs{loss};
    for (auto& p : params) outs.push_back(p);
    realize(outs);
    last = loss.item<double>();
    if (step == 0) first = last;
    if (step % 25 == 0 || step == o.steps) {
      const double acc = accuracy(logits.detach(), y).item<double>();
      std::printf("step %4d  loss %.4f  accuracy %5.1f%%\n", step, last, 100 * acc);
      std::fflush(stdout);
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("done: loss %.4f -> %.4f in %.1f s\n", first, last, secs);
  return last < first ? 0 : 1;
}
}  // namespace

void register_demo(CLI::App& app) {
  static DemoOptions o;
  auto* cmd = app.add_subcommand("demo", "Train a small MLP on synthetic data and print the loss");
  add_text_option(*cmd, "--steps", o.steps_text, "SGD steps, 1..1000000 (default 300)", "INT");
  add_text_option(*cmd, "--hidden", o.hidden_text, "hidden units, 1..4096 (default 64)", "INT");
  add_text_option(*cmd, "--points", o.points_text, "points per class, 1..100000 (default 256)", "INT");
  add_text_option(*cmd, "--lr", o.lr_text, "learning rate, > 0 (default 0.5)", "FLOAT");
  add_text_option(*cmd, "--seed", o.seed_text, "random seed (default 1)", "UINT");
  cmd->callback([] { exit_code() = run(o); });
}

}  // namespace aether::cli
