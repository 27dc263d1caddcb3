// aether/model/presets.h - ready-made networks and their recommended training settings.
//
//   mlp       Flatten -> Linear(in, 512) -> ReLU -> Dropout(0.2) -> Linear(512, 256) -> ReLU -> Linear(256,
//   K) lenet     a LeNet-style net for 28x28: conv3x3(C->16, no bias)+BN+ReLU -> maxpool 2 ->
//             conv3x3(16->32, no bias)+BN+ReLU -> maxpool 2 -> Flatten -> Linear(7*7*32, 128) -> ReLU
//             -> Linear(128, K); small enough to reach 91% on Fashion-MNIST in minutes on 2 cores
//   cifarnet  the fast CIFAR-10 net: conv3x3(C->32, no bias)+BN+ReLU; three blocks of widths 64,
//             128, 256, each conv3x3 -> maxpool 2x2 -> BN -> ReLU -> conv3x3 -> BN -> ReLU (convs
//             without bias); global max pool; Linear(256 -> K)
//   resnet20  ResNet-20 for CIFAR (He et al. 2016): conv3x3(C->16)+BN+ReLU; three stages of widths
//             16/32/64, each 3 blocks relu(conv3x3+BN+ReLU+conv3x3+BN (x) + shortcut(x)), the first
//             of stages 2 and 3 with stride 2 and a conv1x1+BN projection shortcut; global average
//             pool; Linear(64 -> K). Nesterov SGD 0.1, weight decay 5e-4, one-cycle, 30 epochs,
//             batch 128, label smoothing 0.1, random crops (padding 4) and flips
//   airbench94  Keller Jordan's airbench94 CIFAR-10 recipe (docs/airbench.md): a frozen 2x2 patch-
//             whitening conv (C -> 24, bias trained for 3 epochs) + GELU; three groups of widths
//             64/256/256, each conv3x3 -> maxpool 2 -> BN -> GELU -> conv3x3 -> BN -> GELU (dirac-
//             initialised convs without bias; BN momentum 0.4 in aether's convention (airbench's 0.6),
//             eps 1e-12, frozen weight); maxpool 3; Flatten; Linear(256 -> K, no bias); Scale(1/9).
//             Nesterov SGD with a 64x learning rate for the BN biases, the triangle schedule,
//             lookahead from epoch 3, alternating flips, 2-pixel reflect-padded translations, TTA
//             flip_translate
//   airbench93  the same with widths 64/128/128 and 11 epochs
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "aether/data/dataset.h"
#include "aether/model/model.h"

namespace aether {

struct Preset {
  std::string name;
  std::shared_ptr<nn::Sequential> network;
  ModelConfig config;        // loss, optimizer, schedule recommended for the preset
  int64_t epochs = 1;        // recommended epochs
  data::LoaderOptions data;  // batch size and augmentation (normalisation is set per data set)
  // Data-dependent initialisation, run once before training on the network, the training set and
  // the loader's options with their normalisation set (airbench: the whitening conv's filters from
  // the first 5000 training images). Empty: none.
  std::function<void(nn::Sequential&, const data::Dataset&, const data::LoaderOptions&)> init;
  TTA tta = TTA::none;  // the test-time augmentation to report besides the plain accuracy
};

// Builds preset `name` for images (H, W, C) and `classes` classes; throws aether::Error naming
// the known presets for an unknown name.
Preset make_preset(const std::string& name, const Shape& image_shape, int64_t classes);
std::vector<std::string> preset_names();
// The test-time augmentation preset `name` reports (none for an unknown name).
TTA preset_tta(const std::string& name);
// The data set preset `name` is made for: "cifar-10" (cifarnet, resnet20, the airbench presets) or
// "fashion-mnist" (mlp, lenet, an unknown name).
std::string preset_dataset(const std::string& name);

}  // namespace aether
