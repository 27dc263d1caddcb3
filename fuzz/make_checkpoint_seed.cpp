// fuzz/make_checkpoint_seed.cpp - writes the valid seed checkpoints of the corpus with Model::save:
// a tiny CNN (Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten, Linear) on 6x6x1 inputs, trained for
// two steps with Adam on random data so that it carries optimizer state, and an MLP with SGD
// (momentum) that was never trained. A few KB each.
//   make_checkpoint_seed <dir>   ->  <dir>/cnn_adam.aether, <dir>/mlp_sgd.aether
// fuzz/make_corpus.py derives the hostile checkpoints from cnn_adam.aether.
#include <cstdio>
#include <memory>
#include <string>

#include "aether/backend/backend.h"
#include "aether/core/random.h"
#include "aether/model/model.h"
#include "aether/nn/layers.h"

using namespace aether;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output dir>\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  set_fusion(false);

  {
    Model cnn;
    cnn.add(std::make_shared<nn::Conv2d>(1, 2, Size2{3, 3}))
        .add(std::make_shared<nn::BatchNorm>(2, 2))
        .add(std::make_shared<nn::ReLU>())
        .add(std::make_shared<nn::MaxPool2d>(Size2{2, 2}))
        .add(std::make_shared<nn::Flatten>())
        .add(std::make_shared<nn::Linear>(2 * 2 * 2, 3));
    cnn.configure({.optimizer = "adam", .lr = 1e-3}).finalize({6, 6, 1});
    data::Dataset d;
    d.name = "seed";
    d.n = 4, d.h = 6, d.w = 6, d.c = 1;
    d.num_classes = 3;
    d.class_names = {"a", "b", "c"};
    for (int64_t i = 0; i < d.n * d.h * d.w * d.c; ++i) d.images.push_back(uint8_t(i * 37 % 251));
    d.labels = {0, 1, 2, 1};
    TrainOptions o;
    o.epochs = 1;
    o.data.batch_size = 2;
    o.data.prefetch = 1;
    o.progress = false;
    cnn.train(d, o);
    cnn.save(dir + "/cnn_adam.aether");
  }
  {
    Model mlp;
    mlp.add(std::make_shared<nn::Flatten>())
        .add(std::make_shared<nn::Linear>(4, 3))
        .add(std::make_shared<nn::ReLU>())
        .add(std::make_shared<nn::Dropout>(0.25))
        .add(std::make_shared<nn::Linear>(3, 2, false));
    mlp.configure({.optimizer = "sgd", .lr = 0.1, .momentum = 0.9}).finalize({4});
    mlp.save(dir + "/mlp_sgd.aether");
  }
  return 0;
}
