// The preset networks (mlp, lenet, cifarnet, resnet20, airbench94, airbench93, airbench94_muon) and
// their training recipes.
#include "aether/model/presets.h"

#include <algorithm>
#include <cmath>

#include "aether/data/loader.h"
#include "aether/nn/init.h"

namespace aether {
namespace {
using namespace aether::nn;
template <typename T, typename... A>
ModulePtr mk(A&&... a) {
  return std::make_shared<T>(std::forward<A>(a)...);
}

std::shared_ptr<Sequential> mlp(const Shape& s, int64_t k) {
  auto n = std::make_shared<Sequential>();
  n->add(mk<Flatten>()).add(mk<Linear>(numel(s), 512)).add(mk<ReLU>()).add(mk<Dropout>(0.2));
  n->add(mk<Linear>(512, 256)).add(mk<ReLU>()).add(mk<Linear>(256, k));
  return n;
}

std::shared_ptr<Sequential> lenet(const Shape& s, int64_t k) {
  AETHER_CHECK(s[0] % 4 == 0 && s[1] % 4 == 0, "lenet", "needs image sides divisible by 4, got ",
               to_string(s));
  auto n = std::make_shared<Sequential>();
  const Conv2dOptions same{.padding = 1};
  n->add(mk<Conv2d>(s[2], 16, 3, same, false)).add(mk<BatchNorm2d>(16)).add(mk<ReLU>()).add(mk<MaxPool2d>(2));
  n->add(mk<Conv2d>(16, 32, 3, same, false)).add(mk<BatchNorm2d>(32)).add(mk<ReLU>()).add(mk<MaxPool2d>(2));
  n->add(mk<Flatten>()).add(mk<Linear>(s[0] / 4 * s[1] / 4 * 32, 128)).add(mk<ReLU>());
  n->add(mk<Linear>(128, k));
  return n;
}

std::shared_ptr<Sequential> cifarnet(const Shape& s, int64_t k) {
  // Three 2x2 max-pools (floor): each side must be at least 8 (it failed at the third pool as
  // "max_pool2d: input (2, 1, 1, 256) is smaller than the 2x2 window").
  AETHER_CHECK(s[0] >= 8 && s[1] >= 8, "cifarnet", "needs images of at least 8x8 (three 2x2 max-pools), got ",
               to_string(s));
  auto n = std::make_shared<Sequential>();
  const Conv2dOptions same{.padding = 1};
  n->add(mk<Conv2d>(s[2], 32, 3, same, false)).add(mk<BatchNorm2d>(32)).add(mk<ReLU>());
  int64_t c = 32;
  for (int64_t w : {64, 128, 256}) {
    n->add(mk<Conv2d>(c, w, 3, same, false)).add(mk<MaxPool2d>(2)).add(mk<BatchNorm2d>(w)).add(mk<ReLU>());
    n->add(mk<Conv2d>(w, w, 3, same, false)).add(mk<BatchNorm2d>(w)).add(mk<ReLU>());
    c = w;
  }
  n->add(mk<GlobalMaxPool2d>()).add(mk<Linear>(256, k));
  return n;
}
// ResNet-20 for CIFAR (He et al. 2016, section 4.2: 6n+2 layers with n = 3), input (H,W,C):
//   conv3x3 C->16 + BN + ReLU (N,H,W,16); three stages of widths 16, 32, 64, each of 3 blocks
//   relu(body(x) + shortcut(x)), body = conv3x3 (stride s) + BN + ReLU + conv3x3 + BN, where the
//   first block of stages 2 and 3 has s = 2 (halving H and W) and a projection shortcut (conv1x1
//   stride 2 + BN: the paper's option B), the others the identity; global average pool (N,64);
//   Linear(64 -> K). Convs without bias (BatchNorm follows each).
std::shared_ptr<Sequential> resnet20(const Shape& s, int64_t k) {
  auto n = std::make_shared<Sequential>();
  auto conv_bn = [](Sequential& q, int64_t in, int64_t out, int64_t kernel, int64_t stride) {
    q.add(mk<Conv2d>(in, out, kernel, Conv2dOptions{.stride = stride, .padding = kernel / 2}, false));
    q.add(mk<BatchNorm2d>(out));
  };
  conv_bn(*n, s[2], 16, 3, 1);
  n->add(mk<ReLU>());
  int64_t c = 16;
  for (int64_t w : {16, 32, 64}) {
    for (int block = 0; block < 3; ++block) {
      const int64_t stride = block == 0 && w != 16 ? 2 : 1;
      auto body = std::make_shared<Sequential>();
      conv_bn(*body, c, w, 3, stride);
      body->add(mk<ReLU>());
      conv_bn(*body, w, w, 3, 1);
      std::shared_ptr<Sequential> shortcut;
      if (stride != 1 || c != w) {
        shortcut = std::make_shared<Sequential>();
        conv_bn(*shortcut, c, w, 1, stride);
      }
      n->add(mk<Residual>(body, shortcut)).add(mk<ReLU>());
      c = w;
    }
  }
  n->add(mk<GlobalAvgPool2d>()).add(mk<Linear>(c, k));
  return n;
}

// cifarnet's and resnet20's recipe: Nesterov SGD (lr 0.1, momentum 0.9, weight decay 5e-4) with a
// one-cycle schedule rising over `warmup` of the steps, cross-entropy with `label_smoothing`,
// random crops (4-pixel zero padding) and flips.
void sgd_one_cycle_recipe(Preset& p, double label_smoothing, double warmup, int64_t epochs, int64_t batch) {
  p.config = {.loss = "cross_entropy",
              .label_smoothing = label_smoothing,
              .optimizer = "sgd",
              .lr = 0.1,
              .momentum = 0.9,
              .nesterov = true,
              .weight_decay = 5e-4,
              .schedule = "one_cycle",
              .warmup_fraction = warmup};
  p.epochs = epochs;
  p.data.batch_size = batch;
  p.data.crop_padding = 4;
  p.data.hflip = true;
}

// airbench's network (airbench94.py make_net, lib_airbench93.py make_net93), flat: layer 0 is the
// whitening conv (named "0.weight", "0.bias"), then GELU, then per group of width w (input (N,H,W,c)):
//   conv3x3 c->w (N,H,W,w) -> maxpool 2 (N,H/2,W/2,w) -> BN -> GELU -> conv3x3 w->w -> BN -> GELU
// and maxpool 3 (N,1,1,w) -> Flatten (N,w) -> Linear(w -> K, no bias) -> Scale(head_scale):
// airbench94/93 1/9 (its scaling_factor); airbench94_muon 1/w (`self.head(x) / x.size(-1)`), with
// the head's weight scaled to standard deviation 1 (`unit_head`).
std::shared_ptr<Sequential> airbench(const Shape& s, int64_t k, const std::vector<int64_t>& widths,
                                     double head_scale = 1.0 / 9, bool unit_head = false) {
  AETHER_CHECK(s[0] == 32 && s[1] == 32, "airbench", "needs 32x32 images (CIFAR-10), got ", to_string(s));
  auto n = std::make_shared<Sequential>();
  const int64_t whiten = 2 * s[2] * 2 * 2;  // both signs of the C*2*2 patch eigenvectors: 24 for RGB
  n->add(mk<Conv2d>(s[2], whiten, 2, Conv2dOptions{.padding = 0}, true)).add(mk<GELU>());
  // airbench's BatchNorm: momentum 0.6 in its convention (running = 0.6 running + 0.4 batch), which is
  // 0.4 in aether's (PyTorch's); eps 1e-12; the weight stays 1 (frozen by the preset's param groups).
  auto bn = [](int64_t c) { return mk<BatchNorm2d>(c, 0.4, 1e-12); };
  auto conv = [](int64_t in, int64_t out) {
    auto c = std::make_shared<Conv2d>(in, out, 3, Conv2dOptions{.padding = "same"}, false);
    nn::init::dirac(*c);  // an implicit residual: the first `in` filters pass their input through
    return c;
  };
  int64_t c = whiten;
  for (int64_t w : widths) {
    n->add(conv(c, w)).add(mk<MaxPool2d>(2)).add(bn(w)).add(mk<GELU>());
    n->add(conv(w, w)).add(bn(w)).add(mk<GELU>());
    c = w;
  }
  auto head = std::make_shared<Linear>(c, k, false);
  if (unit_head) nn::init::unit_std(head->weight);
  n->add(mk<MaxPool2d>(3)).add(mk<Flatten>()).add(head).add(mk<Scale>(head_scale));
  return n;
}

// airbench's recipe. Its hyperparameters are per 1024 examples of a summed loss (lr 11.5, weight
// decay 0.0153, momentum 0.85, "bias_scaler" 64); aether's loss is the batch mean, so with
// K = 1 + 1 / (1 - momentum) torch's lr 11.5 / (1024 K) on the sum is 11.5 / K on the mean, and
// torch's weight decay 0.0153 * 1024 / 11.5 on the sum's gradient is 0.0153 / 11.5 on the mean's.
void airbench_data(Preset& p);
void airbench_recipe(Preset& p, int64_t epochs) {
  const double momentum = 0.85, lr = 11.5 / (1 + 1 / (1 - momentum)), wd = 0.0153 / 11.5, bias_scaler = 64;
  p.config = {.loss = "cross_entropy",
              .label_smoothing = 0.2,
              .optimizer = "sgd",
              .lr = lr,
              .momentum = momentum,
              .nesterov = true,
              .weight_decay = wd,
              .schedule = "triangle",
              .warmup_fraction = 0.23,
              .lr_start_factor = 0.2,
              .lr_end_factor = 0.07};
  p.config.param_groups = {
      {.match = "*.weight", .layer = "BatchNorm2d", .frozen = true},
      // The BatchNorm biases: lr x 64 with the same decay per step (torch's wd / lr_biases).
      {.match = "*.bias", .layer = "BatchNorm2d", .lr_scale = bias_scaler, .weight_decay = wd / bias_scaler},
      {.match = "0.weight", .frozen = true},   // the whitening filters
      {.match = "0.bias", .train_epochs = 3},  // its bias: the first 3 epochs
  };
  p.config.lookahead_every = 5;
  p.config.lookahead_decay = std::pow(0.95, 5);
  p.config.lookahead_power = 3;
  p.config.lookahead_start_epoch = 3;
  p.epochs = epochs;
  p.data.batch_size = 1024;
  airbench_data(p);
}

// airbench94_muon.py's recipe: batch 2000, 8 epochs, no lookahead. Its rates are on a summed loss
// (aether: the mean, so x 2000 for SGD's; Muon's update does not depend on the gradient's scale):
//   SGD, Nesterov momentum 0.85: the whitening bias and BatchNorm biases lr 0.053, the head lr 0.67,
//   each with weight decay 2e-6 * 2000 / its lr (on the sum: / 2000 on the mean);
//   Muon, Nesterov momentum 0.6, 3 Newton-Schulz steps, normalised weights: the conv filters lr 0.24;
//   every rate falls linearly, lr (1 - step / 200) (triangle with no rising part, ending at 0), the
//   whitening bias's over its 3 epochs: lr (1 - step / 75).
void airbench_muon_recipe(Preset& p) {
  const double batch = 2000, bias_lr = 0.053, head_lr = 0.67, filter_lr = 0.24, wd = 2e-6 * batch;
  p.config = {.loss = "cross_entropy",
              .label_smoothing = 0.2,
              .optimizer = "sgd",
              .lr = bias_lr * batch,
              .momentum = 0.85,
              .nesterov = true,
              .weight_decay = wd / bias_lr / batch,
              .muon_ns_steps = 3,
              .muon_normalize_weights = true,
              .schedule = "triangle",
              .warmup_fraction = 0,
              .lr_start_factor = 1,
              .lr_end_factor = 0};
  p.config.param_groups = {
      {.match = "*.weight", .layer = "BatchNorm2d", .frozen = true},
      {.match = "0.weight", .frozen = true},  // the whitening filters
      // its bias: the first 3 epochs, its rate falling to 0 over them (1 - step / 75)
      {.match = "0.bias", .train_epochs = 3, .schedule_over_train_epochs = true},
      {.match = "*.weight",
       .layer = "Conv2d",
       .lr_scale = filter_lr / (bias_lr * batch),
       .weight_decay = 0,
       .optimizer = "muon",
       .momentum = 0.6},
      {.match = "*.weight",
       .layer = "Linear",
       .lr_scale = head_lr / bias_lr,
       .weight_decay = wd / head_lr / batch},
  };
  p.epochs = 8;
  p.data.batch_size = int64_t(batch);
  airbench_data(p);
}

// Both recipes' data, augmentation, TTA and whitening init.
void airbench_data(Preset& p) {
  p.data.drop_last = true;
  p.data.crop_padding = 2;
  p.data.crop_reflect = true;
  p.data.hflip = true;
  p.data.alternate_flips = true;
  p.tta = TTA::flip_translate;
  // The whitening filters from the first 5000 training images, normalised, unaugmented.
  p.init = [](Sequential& net, const data::Dataset& train, const data::LoaderOptions& lo) {
    auto* conv = dynamic_cast<Conv2d*>(net[0].get());
    AETHER_CHECK(conv != nullptr, "airbench", "layer 0 must be the whitening Conv2d");
    const int64_t n = std::min<int64_t>(train.n, 5000), hwc = train.image_bytes();
    AETHER_CHECK(n > 0 && !train.images.empty(), "airbench",
                 "the whitening init needs uint8 training images");
    data::LoaderOptions plain = data::eval_options(lo);
    std::vector<float> images(size_t(n * hwc));  // (n,H,W,C) normalised
    for (int64_t i = 0; i < n; ++i)
      data::prepare_sample(plain, train.image(i), train.h, train.w, train.c, {}, images.data() + i * hwc);
    nn::init::patch_whitening(*conv, Tensor::from_vector<float>(images, {n, train.h, train.w, train.c}));
  };
}
}  // namespace

std::vector<std::string> preset_names() {
  return {"mlp", "lenet", "cifarnet", "resnet20", "airbench94", "airbench93", "airbench94_muon"};
}

TTA preset_tta(const std::string& name) {
  return name == "airbench94" || name == "airbench93" || name == "airbench94_muon" ? TTA::flip_translate
                                                                                   : TTA::none;
}

std::string preset_dataset(const std::string& name) {
  return name == "cifarnet" || name == "resnet20" || name.rfind("airbench", 0) == 0 ? "cifar-10"
                                                                                    : "fashion-mnist";
}

Preset make_preset(const std::string& name, const Shape& s, int64_t k) {
  AETHER_CHECK(s.size() == 3 && s[0] >= 1 && s[1] >= 1 && s[2] >= 1, "preset",
               "image shape must be (H, W, C) of sizes >= 1, got ", to_string(s));
  AETHER_CHECK(k >= 2, "preset", name, ": a classifier needs at least 2 classes, got ", k);
  Preset p;
  p.name = name;
  if (name == "mlp") {
    p.network = mlp(s, k);
    p.config = {.loss = "cross_entropy", .optimizer = "adam", .lr = 1e-3, .schedule = "cosine"};
    p.epochs = 10;
    p.data.batch_size = 128;
  } else if (name == "lenet") {
    p.network = lenet(s, k);
    p.config = {.loss = "cross_entropy",
                .label_smoothing = 0.1,
                .optimizer = "adam",
                .lr = 3e-3,
                .weight_decay = 0,
                .schedule = "one_cycle",
                .warmup_fraction = 0.25};
    p.epochs = 5;
    p.data.batch_size = 128;
  } else if (name == "cifarnet") {
    p.network = cifarnet(s, k);
    sgd_one_cycle_recipe(p, 0.2, 0.25, 20, 256);
  } else if (name == "resnet20") {
    p.network = resnet20(s, k);
    sgd_one_cycle_recipe(p, 0.1, 0.15, 30, 128);
  } else if (name == "airbench94") {
    p.network = airbench(s, k, {64, 256, 256});
    airbench_recipe(p, 10);  // airbench94: 9.9 epochs (docs/airbench.md)
  } else if (name == "airbench93") {
    p.network = airbench(s, k, {64, 128, 128});
    airbench_recipe(p, 11);
  } else if (name == "airbench94_muon") {
    p.network = airbench(s, k, {64, 256, 256}, 1.0 / 256, true);
    airbench_muon_recipe(p);
  } else {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("preset: unknown model '" + name + "' (known: " + known + ")");
  }
  return p;
}

}  // namespace aether
