// aether/data/loader.h - DataLoader: shuffled, augmented float32 batches prepared on a background
// thread.
//
//   LoaderOptions opt;
//   opt.batch_size = 128; opt.seed = 1; opt.crop_padding = 4; opt.hflip = true;
//   opt.mean = {0.4914f, 0.4822f, 0.4465f}; opt.std = {0.2470f, 0.2435f, 0.2616f};
//   DataLoader train(train_set, opt), test(test_set, eval_options(opt));
//   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
//     train.begin_epoch(epoch);
//     while (auto b = train.next()) step(b->images, b->labels);  // (B,H,W,C) float32, (B) int64
//   }
//
// Determinism: the sample order is a Fisher-Yates shuffle driven by Philox (random.h) and depends
// only on (seed, epoch); a sample's augmentation depends only on (seed, epoch, sample index). So
// batches never depend on threads, timing or the batch size (except for how they are cut).
// Per sample, in this order:
//   1. random crop: pad the uint8 image with crop_padding zero pixels on each side (with
//      crop_reflect: its mirror image without the edge, torch's 'reflect' padding), crop (H,W) back
//      at offset (dy, dx), each uniform in [0, 2*crop_padding];
//   2. horizontal flip with probability 1/2, or with alternate_flips: a coin per sample drawn once
//      (epoch 0's draw), kept on even epochs and reversed on odd ones, so every image is seen both
//      ways in every two epochs (airbench's derandomised flips);
//   3. out = (pixel / 255 - mean[c]) / std[c] (padded pixels are 0 before this step).
// The draws for sample i in epoch e are philox_bits(seed, kAugmentStream + e, i):
//   dy = r[0] % (2P+1), dx = r[1] % (2P+1), flip = r[2] & 1   (see draw_augment);
// with alternate_flips, flip = (r0[2] & 1) ^ (e & 1), r0 being epoch 0's draws.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "aether/data/dataset.h"
#include "aether/graph/tensor.h"

namespace aether::data {

struct LoaderOptions {
  int64_t batch_size = 64;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;        // false: the last, smaller batch is kept
  int64_t crop_padding = 0;      // random crop with this much zero padding; 0: no crop
  bool crop_reflect = false;     // pad the crop by reflection (airbench's translate), not zeros; P < H, W
  bool hflip = false;            // random horizontal flip, p = 0.5
  bool alternate_flips = false;  // with hflip: each sample's epoch-0 flip, reversed on odd epochs
  std::vector<float> mean;       // per channel, on the [0,1] pixel scale; empty: 0
  std::vector<float> std;        // per channel; empty: 1
  int prefetch = 2;              // batches prepared ahead (1..16)
  // Data-parallel shards (docs/distributed.md): the epoch's order is cut into global batches of
  // batch_size * world_size samples, and each global batch into world_size consecutive parts, of
  // which this loader yields part `rank` (batch_size samples; of a last, partial global batch of m
  // samples, m / world_size, or one more for the first m % world_size ranks). A last global batch of
  // fewer samples than ranks is dropped, so that every rank has the same number of batches.
  int rank = 0;        // 0 .. world_size-1
  int world_size = 1;  // >= 1
};

// Options for evaluation: the same batch size and normalisation, fixed order, no augmentation,
// every sample kept.
LoaderOptions eval_options(const LoaderOptions& train);

struct Batch {
  Tensor images;                 // (B,H,W,C) float32
  Tensor labels;                 // (B) int64 (undefined for a data set with targets)
  Tensor targets;                // (B, K) float32 for a data set with regression targets, else undefined
  int64_t index = 0;             // batch number within the epoch
  int64_t size = 0;              // B
  int64_t global_size = 0;       // the samples of the global batch, over every rank (B when unsharded)
  std::vector<int64_t> samples;  // (B) data set indices of the batch's samples, in order
};

struct AugmentDraw {
  int64_t dy = 0, dx = 0;  // crop offset in the padded image, each in [0, 2*crop_padding]
  bool flip = false;
};

// Philox stream numbers (key = seed): the epoch's shuffle uses stream kShuffleStream + epoch,
// index i (Fisher-Yates step i); augmentation uses kAugmentStream + epoch, index = sample.
constexpr uint64_t kShuffleStream = 0;
constexpr uint64_t kAugmentStream = uint64_t(1) << 62;

// The random choices for data set sample `sample` in `epoch` (all zero/false when disabled).
AugmentDraw draw_augment(const LoaderOptions& opt, int64_t epoch, int64_t sample);
// The order in which an epoch visits the samples: 0..n-1, or its seeded shuffle.
std::vector<int64_t> epoch_order(const LoaderOptions& opt, int64_t n, int64_t epoch);
// Writes one augmented, normalised sample: src (H,W,C) uint8 -> dst (H,W,C) float32.
void prepare_sample(const LoaderOptions& opt, const uint8_t* src, int64_t h, int64_t w, int64_t c,
                    const AugmentDraw& draw, float* dst);
// The same for float32 images (Python's arrays): no /255, then mean/std.
void prepare_sample(const LoaderOptions& opt, const float* src, int64_t h, int64_t w, int64_t c,
                    const AugmentDraw& draw, float* dst);

class DataLoader {
 public:
  // Keeps a reference to `dataset`: it must outlive the loader and stay unchanged.
  DataLoader(const Dataset& dataset, LoaderOptions options);
  DataLoader(Dataset&&, LoaderOptions) = delete;  // a temporary would dangle
  ~DataLoader();                                  // stops the background thread promptly, also mid-epoch
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // Starts (or restarts) an epoch: its order and augmentation follow (seed, epoch). A running
  // epoch is abandoned.
  void begin_epoch(int64_t epoch);
  // The next batch of the epoch, or nullopt after its last one. Waits only when the background
  // thread has not prepared it yet. Rethrows an error raised while preparing a batch.
  std::optional<Batch> next();

  int64_t num_batches() const;  // per epoch (on every rank)
  int64_t num_samples() const;  // per epoch over every rank (drops the partial batch when drop_last)
  int64_t epoch() const { return epoch_; }
  const LoaderOptions& options() const { return opt_; }
  const Dataset& dataset() const { return ds_; }

 private:
  struct HostBatch {
    std::vector<float> images;     // (B,H,W,C)
    std::vector<int64_t> labels;   // (B), empty with targets
    std::vector<float> targets;    // (B, K) when the data set has targets
    std::vector<int64_t> samples;  // (B)
    int64_t index = 0;
    int64_t global_size = 0;  // the global batch's samples
  };
  int64_t global_batch() const { return opt_.batch_size * opt_.world_size; }
  void stop_worker();
  void work(std::vector<int64_t> order, int64_t epoch);

  const Dataset& ds_;
  LoaderOptions opt_;
  int64_t epoch_ = -1;

  std::thread worker_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<HostBatch> queue_;  // at most opt_.prefetch batches
  bool cancel_ = false;
  bool done_ = false;  // the worker produced every batch of the epoch (or failed)
  std::exception_ptr error_;
};

}  // namespace aether::data
