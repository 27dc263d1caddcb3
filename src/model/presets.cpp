// The preset networks (mlp, lenet, cifarnet) and their training recipes.
#include "aether/model/presets.h"

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
}  // namespace

std::vector<std::string> preset_names() { return {"mlp", "lenet", "cifarnet"}; }

Preset make_preset(const std::string& name, const Shape& s, int64_t k) {
  AETHER_CHECK(s.size() == 3, "preset", "image shape must be (H, W, C), got ", to_string(s));
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
    p.config = {.loss = "cross_entropy",
                .label_smoothing = 0.2,
                .optimizer = "sgd",
                .lr = 0.1,
                .momentum = 0.9,
                .nesterov = true,
                .weight_decay = 5e-4,
                .schedule = "one_cycle",
                .warmup_fraction = 0.25};
    p.epochs = 20;
    p.data.batch_size = 256;
    p.data.crop_padding = 4;
    p.data.hflip = true;
  } else {
    std::string known;
    for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error("preset: unknown model '" + name + "' (known: " + known + ")");
  }
  return p;
}

}  // namespace aether
