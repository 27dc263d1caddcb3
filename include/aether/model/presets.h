// aether/model/presets.h - ready-made networks and their recommended training settings.
//
//   mlp       Flatten -> Linear(in, 512) -> ReLU -> Dropout(0.2) -> Linear(512, 256) -> ReLU -> Linear(256,
//   K) lenet     a LeNet-style net for 28x28: conv3x3(C->16, no bias)+BN+ReLU -> maxpool 2 ->
//             conv3x3(16->32, no bias)+BN+ReLU -> maxpool 2 -> Flatten -> Linear(7*7*32, 128) -> ReLU
//             -> Linear(128, K); small enough to reach 91% on Fashion-MNIST in minutes on 2 cores
//   cifarnet  the fast CIFAR-10 net: conv3x3(C->32, no bias)+BN+ReLU; three blocks of widths 64,
//             128, 256, each conv3x3 -> maxpool 2x2 -> BN -> ReLU -> conv3x3 -> BN -> ReLU (convs
//             without bias); global max pool; Linear(256 -> K)
#pragma once

#include <string>
#include <vector>

#include "aether/model/model.h"

namespace aether {

struct Preset {
  std::string name;
  std::shared_ptr<nn::Sequential> network;
  ModelConfig config;        // loss, optimizer, schedule recommended for the preset
  int64_t epochs = 1;        // recommended epochs
  data::LoaderOptions data;  // batch size and augmentation (normalisation is set per data set)
};

// Builds preset `name` for images (H, W, C) and `classes` classes; throws aether::Error naming
// the known presets for an unknown name.
Preset make_preset(const std::string& name, const Shape& image_shape, int64_t classes);
std::vector<std::string> preset_names();

}  // namespace aether
