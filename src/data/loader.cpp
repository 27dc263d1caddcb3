// DataLoader: seeded shuffling, augmentation and normalisation on a background thread that keeps
// a bounded queue of prepared batches.
#include "aether/data/loader.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "aether/core/error.h"
#include "aether/core/random.h"

namespace aether::data {

LoaderOptions eval_options(const LoaderOptions& train) {
  LoaderOptions o = train;
  o.shuffle = false;
  o.drop_last = false;
  o.crop_padding = 0;
  o.hflip = false;
  return o;
}

AugmentDraw draw_augment(const LoaderOptions& opt, int64_t epoch, int64_t sample) {
  AugmentDraw d;
  if (opt.crop_padding == 0 && !opt.hflip) return d;
  const auto r = philox_bits(opt.seed, kAugmentStream + uint64_t(epoch), uint64_t(sample));
  if (opt.crop_padding > 0) {
    const uint32_t span = uint32_t(2 * opt.crop_padding + 1);
    d.dy = int64_t(r[0] % span);
    d.dx = int64_t(r[1] % span);
  }
  if (opt.hflip && opt.alternate_flips) {  // epoch 0's coin, reversed on odd epochs
    const auto r0 = epoch == 0 ? r : philox_bits(opt.seed, kAugmentStream, uint64_t(sample));
    d.flip = ((r0[2] & 1u) != 0) != ((epoch & 1) != 0);
  } else {
    d.flip = opt.hflip && (r[2] & 1u) != 0;
  }
  return d;
}

std::vector<int64_t> epoch_order(const LoaderOptions& opt, int64_t n, int64_t epoch) {
  std::vector<int64_t> order(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
  if (!opt.shuffle) return order;
  // Fisher-Yates: step i swaps position i with a uniform position j in [0, i].
  for (int64_t i = n - 1; i > 0; --i) {
    const auto r = philox_bits(opt.seed, kShuffleStream + uint64_t(epoch), uint64_t(i));
    const uint64_t u = (uint64_t(r[0]) << 32) | r[1];
    const int64_t j = int64_t(u % uint64_t(i + 1));
    std::swap(order[size_t(i)], order[size_t(j)]);
  }
  return order;
}

namespace {
// src (H,W,C) of T, dst (H,W,C) float32: dst[y,x,ch] = (padded[y+dy, x'+dx, ch] * unit - mean) / std
// with x' = W-1-x when flipped, padded[i,j] = src[i-P, j-P] inside the image and 0 outside (with
// crop_reflect: src[r(i-P), r(j-P)], r reflecting about the edges, r(-1) = 1, r(H) = H-2); unit is
// 1/255 for uint8 pixels and 1 for float32 values.
template <typename T>
void prepare(const LoaderOptions& opt, const T* src, int64_t h, int64_t w, int64_t c, const AugmentDraw& draw,
             float unit, float* dst) {
  float scale[16], bias[16];  // per channel: out = v * scale + bias
  for (int64_t ch = 0; ch < c; ++ch) {
    const float m = opt.mean.empty() ? 0.0f : opt.mean[size_t(ch)];
    const float s = opt.std.empty() ? 1.0f : opt.std[size_t(ch)];
    scale[ch] = unit / s;
    bias[ch] = -m / s;
  }
  const int64_t p = opt.crop_padding;
  auto reflect = [&](int64_t i, int64_t n) {
    if (!opt.crop_reflect) return i;
    return i < 0 ? -i : i >= n ? 2 * n - 2 - i : i;
  };
  for (int64_t y = 0; y < h; ++y) {
    const int64_t sy = reflect(y + draw.dy - p, h);
    for (int64_t x = 0; x < w; ++x) {
      const int64_t sx = reflect((draw.flip ? w - 1 - x : x) + draw.dx - p, w);
      float* out = dst + (y * w + x) * c;
      const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
      const T* in = inside ? src + (sy * w + sx) * c : nullptr;
      for (int64_t ch = 0; ch < c; ++ch) out[ch] = float(inside ? in[ch] : T(0)) * scale[ch] + bias[ch];
    }
  }
}
}  // namespace

void prepare_sample(const LoaderOptions& opt, const uint8_t* src, int64_t h, int64_t w, int64_t c,
                    const AugmentDraw& draw, float* dst) {
  prepare(opt, src, h, w, c, draw, 1.0f / 255.0f, dst);
}
void prepare_sample(const LoaderOptions& opt, const float* src, int64_t h, int64_t w, int64_t c,
                    const AugmentDraw& draw, float* dst) {
  prepare(opt, src, h, w, c, draw, 1.0f, dst);
}

DataLoader::DataLoader(const Dataset& dataset, LoaderOptions options)
    : ds_(dataset), opt_(std::move(options)) {
  const char* op = "DataLoader";
  AETHER_CHECK(opt_.batch_size > 0, op, "batch_size is ", opt_.batch_size, ", expected > 0");
  AETHER_CHECK(opt_.crop_padding >= 0 && opt_.crop_padding <= std::max(ds_.h, ds_.w), op, "crop_padding is ",
               opt_.crop_padding, ", expected 0..", std::max(ds_.h, ds_.w), " for images of ", ds_.h, "x",
               ds_.w);
  AETHER_CHECK(!opt_.crop_reflect || opt_.crop_padding < std::min(ds_.h, ds_.w), op,
               "crop_reflect needs crop_padding < the image's sides, got ", opt_.crop_padding,
               " for images of ", ds_.h, "x", ds_.w);
  AETHER_CHECK(opt_.prefetch >= 1 && opt_.prefetch <= 16, op, "prefetch is ", opt_.prefetch,
               ", expected 1..16");
  AETHER_CHECK(ds_.c >= 1 && ds_.c <= 16, op, "data set ", ds_.name, " has ", ds_.c,
               " channels, expected 1..16");
  AETHER_CHECK(opt_.mean.empty() || int64_t(opt_.mean.size()) == ds_.c, op, "mean has ", opt_.mean.size(),
               " values for ", ds_.c, " channels");
  AETHER_CHECK(opt_.std.empty() || int64_t(opt_.std.size()) == ds_.c, op, "std has ", opt_.std.size(),
               " values for ", ds_.c, " channels");
  for (float s : opt_.std) AETHER_CHECK(s > 0, op, "std values must be > 0, got ", s);
  AETHER_CHECK(opt_.world_size >= 1 && opt_.rank >= 0 && opt_.rank < opt_.world_size, op, "rank ", opt_.rank,
               " is not in [0, ", opt_.world_size, ") (world size ", opt_.world_size, ")");
  AETHER_CHECK(opt_.batch_size <= std::numeric_limits<int64_t>::max() / opt_.world_size, op, "batch_size ",
               opt_.batch_size, " times world size ", opt_.world_size, " overflows");
  ds_.check();
}

DataLoader::~DataLoader() { stop_worker(); }

int64_t DataLoader::num_samples() const {
  const int64_t g = global_batch();
  const int64_t tail = ds_.n % g;  // a last, partial global batch: kept unless drop_last or too small
  return opt_.drop_last || tail < opt_.world_size ? ds_.n - tail : ds_.n;
}

int64_t DataLoader::num_batches() const { return (num_samples() + global_batch() - 1) / global_batch(); }

void DataLoader::stop_worker() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    cancel_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void DataLoader::begin_epoch(int64_t epoch) {
  AETHER_CHECK(epoch >= 0, "DataLoader::begin_epoch", "epoch is ", epoch, ", expected >= 0");
  stop_worker();
  queue_.clear();
  cancel_ = false;
  done_ = false;
  error_ = nullptr;
  epoch_ = epoch;
  worker_ = std::thread(&DataLoader::work, this, epoch_order(opt_, ds_.n, epoch), epoch);
}

void DataLoader::work(std::vector<int64_t> order, int64_t epoch) {
  try {
    const int64_t nb = num_batches(), total = num_samples(), hwc = ds_.image_bytes();
    for (int64_t b = 0; b < nb; ++b) {
      // This rank's part of global batch b: m samples cut into world_size parts.
      const int64_t m = std::min(global_batch(), total - b * global_batch());
      const int64_t w = opt_.world_size, r = opt_.rank, base = m / w, extra = m % w;
      const int64_t start = b * global_batch() + r * base + std::min(r, extra), size = base + (r < extra);
      HostBatch hb;
      hb.index = b;
      hb.global_size = m;
      hb.images.resize(size_t(size * hwc));
      const int64_t kt = ds_.target_dim;  // regression targets per item (0: a class label)
      hb.labels.resize(kt > 0 ? 0 : size_t(size));
      hb.targets.resize(size_t(size * kt));
      hb.samples.assign(order.begin() + start, order.begin() + start + size);
      for (int64_t k = 0; k < size; ++k) {
        const int64_t i = hb.samples[size_t(k)];
        const AugmentDraw draw = draw_augment(opt_, epoch, i);
        float* dst = hb.images.data() + k * hwc;
        if (ds_.float_images)
          prepare_sample(opt_, ds_.float_image(i), ds_.h, ds_.w, ds_.c, draw, dst);
        else
          prepare_sample(opt_, ds_.image(i), ds_.h, ds_.w, ds_.c, draw, dst);
        if (kt > 0)
          std::copy_n(ds_.targets.data() + i * kt, kt, hb.targets.data() + k * kt);
        else
          hb.labels[size_t(k)] = ds_.labels[size_t(i)];
      }
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return cancel_ || int64_t(queue_.size()) < opt_.prefetch; });
      if (cancel_) return;
      queue_.push_back(std::move(hb));
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lk(mu_);
    error_ = std::current_exception();
  }
  std::lock_guard<std::mutex> lk(mu_);
  done_ = true;
  cv_.notify_all();
}

std::optional<Batch> DataLoader::next() {
  AETHER_CHECK(epoch_ >= 0, "DataLoader::next", "no epoch started: call begin_epoch(epoch) first");
  HostBatch hb;
  {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
      return std::nullopt;
    }
    hb = std::move(queue_.front());
    queue_.pop_front();
  }
  cv_.notify_all();
  const int64_t size = int64_t(hb.samples.size());
  Batch out;
  out.images = Tensor::from_blob(hb.images.data(), {size, ds_.h, ds_.w, ds_.c}, DType::float32);
  if (ds_.has_targets())
    out.targets = Tensor::from_blob(hb.targets.data(), {size, ds_.target_dim}, DType::float32);
  else
    out.labels = Tensor::from_blob(hb.labels.data(), {size}, DType::int64);
  out.index = hb.index;
  out.size = size;
  out.global_size = hb.global_size;
  out.samples = std::move(hb.samples);
  return out;
}

}  // namespace aether::data
