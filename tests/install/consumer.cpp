// Uses the installed headers and library, with aether/aether.h alone (as the README and the
// aether/model/model.h example do): a tiny computation with a gradient, then the Model API on a
// small synthetic data set (build, configure, finalize, train, evaluate, save, load, predict).
#include <aether/aether.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

using namespace aether;

namespace {
bool tensor_check() {
  Tensor x = Tensor::from_vector<float>({1, -2, 3}).set_requires_grad();
  Tensor y = (x * x).relu().sum();
  y.backward();
  const auto g = x.grad().to_vector<float>();
  const bool ok = y.item<float>() == 14.0f && g[0] == 2.0f && g[1] == -4.0f && g[2] == 6.0f;
  std::printf("consumer: y=%g grad=(%g, %g, %g) %s\n", y.item<float>(), g[0], g[1], g[2],
              ok ? "ok" : "WRONG");
  return ok;
}

// 64 images (8,8,1) in 2 classes: bright left half (class 0) or bright right half (class 1).
data::Dataset halves() {
  data::Dataset d;
  d.name = "halves";
  d.n = 64, d.h = 8, d.w = 8, d.c = 1, d.num_classes = 2;
  d.class_names = {"left", "right"};
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t label = i % 2;
    for (int64_t y = 0; y < d.h; ++y)
      for (int64_t x = 0; x < d.w; ++x) d.images.push_back(uint8_t((x < 4) == (label == 0) ? 200 : 20));
    d.labels.push_back(label);
  }
  return d;
}

bool model_check() {
  const data::Dataset train = halves();
  Model model;
  model.add(std::make_shared<nn::Conv2d>(1, 4, 3, Conv2dOptions{.padding = "same"}))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::MaxPool2d>(2))
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Linear>(4 * 4 * 4, 2));
  model.configure({.loss = "cross_entropy", .optimizer = "adam", .lr = 1e-2, .metrics = {"accuracy"}});
  model.to("cpu");
  model.finalize({8, 8, 1});
  TrainOptions opt;
  opt.epochs = 3;
  opt.progress = false;
  opt.data.batch_size = 16;
  opt.data.mean = {0.4f};
  opt.data.std = {0.3f};
  model.train(train, opt);
  const EvalResult r = model.evaluate(train);
  const auto path = std::filesystem::temp_directory_path() / "aether-consumer.aether";
  model.save(path.string());
  Model again = Model::load(path.string());
  std::filesystem::remove(path);
  const EvalResult r2 = again.evaluate(train);
  const Tensor probs = again.predict(train);
  const bool ok = std::isfinite(r.loss) && r.loss == r2.loss && probs.shape() == Shape{64, 2};
  std::printf("consumer: model loss %.4f accuracy %.3f, reloaded loss %.4f %s\n", r.loss, r.accuracy, r2.loss,
              ok ? "ok" : "WRONG");
  return ok;
}
}  // namespace

int main() {
  const bool ok = tensor_check();
  return ok && model_check() ? 0 : 1;
}
