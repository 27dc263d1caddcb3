// examples/example.py written against the C++ API: the same network, seed, data and recipe, so the
// two print the same accuracy (python/tests/test_example.py runs both).
//
//   build/test/examples/aether_example [--dataset cifar-10|fashion-mnist] [--epochs N] [--limit N] [--seed N]
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "aether/aether.h"

using namespace aether;

int main(int argc, char** argv) try {
  std::string dataset = "cifar-10";
  int64_t epochs = 2, limit = 0;
  uint64_t seed = 42;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--dataset")
      dataset = v;
    else if (k == "--epochs")
      epochs = std::stoll(v);
    else if (k == "--limit")
      limit = std::stoll(v);
    else if (k == "--seed")
      seed = std::stoull(v);
    else
      throw Error("unknown option " + k);
  }
  const auto dir = data::resolve_data_dir(dataset);
  data::Dataset train = data::load_dataset(dataset, dir, data::Split::train);
  const data::Dataset test = data::load_dataset(dataset, dir, data::Split::test);
  if (limit > 0 && limit < train.n) {  // the first `limit` images, as X[:limit] in Python
    train.n = limit;
    train.images.resize(size_t(limit * train.image_bytes()));
    train.labels.resize(size_t(limit));
  }

  Model model;
  manual_seed(seed);
  using std::make_shared;
  model
      .add(make_shared<nn::Conv2d>(train.c, 32, Size2(3, 3),
                                   Conv2dOptions{.stride = Size2(1, 1), .padding = "same"}))
      .add(make_shared<nn::BatchNorm2d>(32, 1.0 - 0.9,
                                        1e-5))  // Aether-ML's momentum 0.9, as the Python layer turns it
      .add(make_shared<nn::ReLU>())
      .add(make_shared<nn::MaxPool2d>(Size2(2, 2), Size2(2, 2), Size2(0, 0)))
      .add(make_shared<nn::GlobalAvgPool2d>())
      .add(make_shared<nn::Linear>(32, 10));
  ModelConfig config;
  config.loss = "cross_entropy";
  config.label_smoothing = 0.05;
  config.optimizer = "adamw";
  config.lr = 1e-3;
  config.weight_decay = 0.01;
  model.configure(config).to("cpu").finalize({train.h, train.w, train.c});

  TrainOptions opt;
  opt.epochs = epochs;
  opt.data.batch_size = 128;
  opt.data.shuffle = true;
  opt.data.seed = seed;
  std::tie(opt.data.mean, opt.data.std) = data::channel_stats(train);
  opt.validation = &test;
  const History h = model.train(train, opt);
  std::printf("test accuracy: %.6f\n", *h.epochs.back().val_accuracy);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "aether_example: %s\n", e.what());
  return 1;
}
