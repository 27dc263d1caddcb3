// DataLoader: seeded order (same seed and epoch -> same order), every sample once per epoch,
// partial / dropped last batch, normalisation values, crop and flip semantics on known images,
// independence from batch size and prefetch depth, and prompt shutdown mid-epoch.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <map>
#include <numeric>
#include <set>

#include "aether/core/error.h"
#include "aether/data/loader.h"
#include "data/fixtures.h"

using namespace aether;
using namespace aether::data;
using aether::data::test_util::test_pixel;

namespace {

// n images of (h,w,c) with pixel test_pixel(i, y, x, ch) and label i % 7.
Dataset synthetic(int64_t n, int64_t h, int64_t w, int64_t c) {
  Dataset ds;
  ds.name = "synthetic";
  ds.n = n;
  ds.h = h;
  ds.w = w;
  ds.c = c;
  ds.num_classes = 7;
  for (int64_t i = 0; i < n; ++i) {
    ds.labels.push_back(i % 7);
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t ch = 0; ch < c; ++ch) ds.images.push_back(test_pixel(i, y, x, ch));
      }
    }
  }
  return ds;
}

struct Epoch {
  std::vector<int64_t> samples;  // in order
  std::vector<float> images;     // all batches concatenated, (N,H,W,C)
  std::vector<int64_t> labels;
  std::vector<int64_t> sizes;  // batch sizes
};

Epoch run_epoch(DataLoader& loader, int64_t epoch) {
  Epoch e;
  loader.begin_epoch(epoch);
  int64_t index = 0;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->index, index++);
    EXPECT_EQ(b->images.dtype(), DType::float32);
    EXPECT_EQ(b->labels.dtype(), DType::int64);
    const Dataset& ds = loader.dataset();
    EXPECT_EQ(b->images.shape(), (Shape{b->size, ds.h, ds.w, ds.c}));
    EXPECT_EQ(b->labels.shape(), (Shape{b->size}));
    const auto im = b->images.to_vector<float>();
    const auto lb = b->labels.to_vector<int64_t>();
    e.images.insert(e.images.end(), im.begin(), im.end());
    e.labels.insert(e.labels.end(), lb.begin(), lb.end());
    e.samples.insert(e.samples.end(), b->samples.begin(), b->samples.end());
    e.sizes.push_back(b->size);
  }
  EXPECT_FALSE(loader.next().has_value());  // stays at the end
  return e;
}

// Which sample an un-augmented image (x / 255, no normalisation) shows: the one whose pixels match.
int64_t identify(const Dataset& ds, const float* img) {
  for (int64_t i = 0; i < ds.n; ++i) {
    bool same = true;
    for (int64_t k = 0; k < ds.image_bytes() && same; ++k)
      same = std::abs(img[k] * 255.0f - ds.image(i)[k]) < 1e-3f;
    if (same) return i;
  }
  return -1;
}

}  // namespace

TEST(DataLoader, EverySampleOncePerEpochWithPartialLastBatch) {
  const Dataset ds = synthetic(23, 3, 4, 2);
  LoaderOptions opt;
  opt.batch_size = 5;
  opt.seed = 11;
  DataLoader loader(ds, opt);
  EXPECT_EQ(loader.num_batches(), 5);
  EXPECT_EQ(loader.num_samples(), 23);
  for (int64_t epoch : {0, 1}) {
    const Epoch e = run_epoch(loader, epoch);
    EXPECT_EQ(e.sizes, (std::vector<int64_t>{5, 5, 5, 5, 3}));
    // Identify each image from its pixels: a permutation of 0..22, matching the labels.
    std::vector<int64_t> seen;
    for (int64_t k = 0; k < 23; ++k) {
      const int64_t i = identify(ds, e.images.data() + k * ds.image_bytes());
      ASSERT_GE(i, 0) << "output image " << k << " is no data set image";
      EXPECT_EQ(i, e.samples[size_t(k)]);
      EXPECT_EQ(e.labels[size_t(k)], i % 7);
      seen.push_back(i);
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> all(23);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(seen, all);
    EXPECT_NE(e.samples, all) << "shuffle=true kept the data set order";
  }
}

TEST(DataLoader, DropLast) {
  const Dataset ds = synthetic(23, 2, 2, 1);
  LoaderOptions opt;
  opt.batch_size = 5;
  opt.drop_last = true;
  DataLoader loader(ds, opt);
  EXPECT_EQ(loader.num_batches(), 4);
  EXPECT_EQ(loader.num_samples(), 20);
  const Epoch e = run_epoch(loader, 3);
  EXPECT_EQ(e.sizes, (std::vector<int64_t>{5, 5, 5, 5}));
  EXPECT_EQ(std::set<int64_t>(e.samples.begin(), e.samples.end()).size(), 20u);
}

TEST(DataLoader, OrderDependsOnlyOnSeedAndEpoch) {
  const Dataset ds = synthetic(50, 2, 2, 1);
  LoaderOptions opt;
  opt.batch_size = 8;
  opt.seed = 1234;
  DataLoader a(ds, opt), b(ds, opt);
  const Epoch a0 = run_epoch(a, 0), a1 = run_epoch(a, 1);
  const Epoch b1 = run_epoch(b, 1), b0 = run_epoch(b, 0);  // other call order
  EXPECT_EQ(a0.samples, b0.samples);
  EXPECT_EQ(a1.samples, b1.samples);
  EXPECT_EQ(a0.images, b0.images);
  EXPECT_NE(a0.samples, a1.samples);
  EXPECT_EQ(a0.samples, epoch_order(opt, 50, 0));
  opt.seed = 1235;
  DataLoader c(ds, opt);
  EXPECT_NE(run_epoch(c, 0).samples, a0.samples);
  // Restarting an epoch mid-way starts it over.
  a.begin_epoch(0);
  ASSERT_TRUE(a.next().has_value());
  EXPECT_EQ(run_epoch(a, 0).samples, a0.samples);
}

TEST(DataLoader, ShuffleIsRoughlyUniform) {
  // Position of sample 0 over 400 epochs of a 4-sample set: each position about 100 times.
  LoaderOptions opt;
  opt.seed = 7;
  std::array<int, 4> where{};
  for (int64_t epoch = 0; epoch < 400; ++epoch) {
    const auto order = epoch_order(opt, 4, epoch);
    ++where[size_t(std::find(order.begin(), order.end(), 0) - order.begin())];
  }
  for (int c : where) EXPECT_TRUE(c > 60 && c < 140) << c;
}

TEST(DataLoader, EvaluationOrderIsFixed) {
  const Dataset ds = synthetic(10, 2, 3, 3);
  LoaderOptions train;
  train.batch_size = 4;
  train.seed = 5;
  train.crop_padding = 1;
  train.hflip = true;
  train.drop_last = true;
  const LoaderOptions eval = eval_options(train);
  EXPECT_FALSE(eval.shuffle);
  EXPECT_FALSE(eval.hflip);
  EXPECT_EQ(eval.crop_padding, 0);
  EXPECT_FALSE(eval.drop_last);
  DataLoader loader(ds, eval);
  for (int64_t epoch : {0, 4}) {
    const Epoch e = run_epoch(loader, epoch);
    EXPECT_EQ(e.samples, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
    EXPECT_EQ(e.sizes, (std::vector<int64_t>{4, 4, 2}));
    for (int64_t k = 0; k < 10; ++k) EXPECT_EQ(identify(ds, e.images.data() + k * ds.image_bytes()), k);
  }
}

TEST(DataLoader, NormalisationValues) {
  const Dataset ds = synthetic(4, 2, 3, 3);
  LoaderOptions opt;
  opt.batch_size = 4;
  opt.shuffle = false;
  opt.mean = {0.1f, 0.5f, 0.9f};
  opt.std = {0.5f, 0.25f, 2.0f};
  DataLoader loader(ds, opt);
  const Epoch e = run_epoch(loader, 0);
  ASSERT_EQ(e.images.size(), ds.images.size());
  const double mean[3] = {0.1, 0.5, 0.9}, sd[3] = {0.5, 0.25, 2.0};
  for (size_t k = 0; k < ds.images.size(); ++k) {
    const size_t ch = k % 3;
    const double want = (double(ds.images[k]) / 255.0 - mean[ch]) / sd[ch];
    EXPECT_NEAR(e.images[k], want, 1e-5) << k;
  }
}

TEST(DataLoader, PrepareSampleCropAndFlipOnAKnownImage) {
  // A 2x2 image [[1,2],[3,4]] with padding 1: padded (4,4) rows 0 0 0 0 / 0 1 2 0 / 0 3 4 0 / 0 0 0 0.
  const uint8_t img[4] = {1, 2, 3, 4};
  LoaderOptions opt;
  opt.crop_padding = 1;
  float out[4];
  auto run = [&](int64_t dy, int64_t dx, bool flip) {
    prepare_sample(opt, img, 2, 2, 1, AugmentDraw{dy, dx, flip}, out);
    return std::vector<float>{out[0] * 255, out[1] * 255, out[2] * 255, out[3] * 255};
  };
  auto near = [](const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::abs(a[i] - b[i]) > 1e-4f) return false;
    }
    return true;
  };
  EXPECT_TRUE(near(run(1, 1, false), {1, 2, 3, 4}));  // centre crop: the image itself
  EXPECT_TRUE(near(run(0, 0, false), {0, 0, 0, 1}));  // top-left corner of the padded image
  EXPECT_TRUE(near(run(2, 2, false), {4, 0, 0, 0}));
  EXPECT_TRUE(near(run(1, 2, false), {2, 0, 4, 0}));
  EXPECT_TRUE(near(run(1, 2, true), {0, 2, 0, 4}));  // crop, then mirror left-right
  EXPECT_TRUE(near(run(1, 1, true), {2, 1, 4, 3}));
  // Padding is zero before normalisation: (0 - mean) / std.
  opt.mean = {0.5f};
  opt.std = {0.25f};
  prepare_sample(opt, img, 2, 2, 1, AugmentDraw{0, 0, false}, out);
  EXPECT_NEAR(out[0], -2.0f, 1e-6);
  EXPECT_NEAR(out[3], (1.0f / 255.0f - 0.5f) / 0.25f, 1e-5);
}

TEST(DataLoader, AugmentedBatchesFollowTheDocumentedDraws) {
  const int64_t n = 300, h = 3, w = 4, c = 2, p = 2;
  const Dataset ds = synthetic(n, h, w, c);
  LoaderOptions opt;
  opt.batch_size = 32;
  opt.seed = 99;
  opt.crop_padding = p;
  opt.hflip = true;
  DataLoader loader(ds, opt);
  const Epoch e = run_epoch(loader, 2);
  int flips = 0;
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = e.samples[size_t(k)];
    EXPECT_EQ(e.labels[size_t(k)], i % 7);
    const AugmentDraw d = draw_augment(opt, 2, i);
    ASSERT_TRUE(d.dy >= 0 && d.dy <= 2 * p && d.dx >= 0 && d.dx <= 2 * p);
    flips += d.flip;
    offsets.insert({d.dy, d.dx});
    // Expected output, written out from the definition: pad, crop at (dy, dx), mirror.
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        const int64_t xc = d.flip ? w - 1 - x : x;    // column in the crop
        const int64_t py = y + d.dy, px = xc + d.dx;  // position in the padded image
        const bool inside = py >= p && py < h + p && px >= p && px < w + p;
        for (int64_t ch = 0; ch < c; ++ch) {
          const float want = inside ? float(test_pixel(i, py - p, px - p, ch)) : 0.0f;
          ASSERT_NEAR(e.images[size_t(((k * h + y) * w + x) * c + ch)] * 255.0f, want, 1e-3f)
              << "sample " << i << " draw (" << d.dy << "," << d.dx << "," << d.flip << ")";
        }
      }
    }
  }
  EXPECT_TRUE(flips > 110 && flips < 190) << flips << " flips in " << n;
  EXPECT_EQ(offsets.size(), size_t((2 * p + 1) * (2 * p + 1)));
  // Another epoch draws differently.
  int same = 0;
  for (int64_t i = 0; i < n; ++i) {
    const AugmentDraw a = draw_augment(opt, 2, i), b = draw_augment(opt, 3, i);
    same += a.dy == b.dy && a.dx == b.dx && a.flip == b.flip;
  }
  EXPECT_LT(same, 30);
}

// Alternating flips (airbench's derandomised flips): epoch 0 flips a seeded half of the samples, as
// random flips would; every odd epoch flips exactly the others and every even one the same again,
// so each image is seen both ways in any two consecutive epochs. The crops stay random per epoch,
// and the loader's batches show the flips the draws say.
TEST(DataLoader, AlternatingFlipsReverseEachSamplesFlipEveryEpoch) {
  const int64_t n = 300, h = 3, w = 4, c = 2;
  const Dataset ds = synthetic(n, h, w, c);
  LoaderOptions opt;
  opt.batch_size = 32;
  opt.seed = 5;
  opt.crop_padding = 1;
  opt.hflip = true;
  opt.alternate_flips = true;
  LoaderOptions random_flips = opt;
  random_flips.alternate_flips = false;
  int flips0 = 0, crops_same = 0;
  for (int64_t i = 0; i < n; ++i) {
    const AugmentDraw d0 = draw_augment(opt, 0, i);
    EXPECT_EQ(d0.flip, draw_augment(random_flips, 0, i).flip) << i;  // epoch 0: the random draw
    flips0 += d0.flip;
    for (int64_t e = 1; e < 6; ++e) {
      const AugmentDraw d = draw_augment(opt, e, i);
      EXPECT_EQ(d.flip, e % 2 == 1 ? !d0.flip : d0.flip) << "sample " << i << " epoch " << e;
      EXPECT_EQ(d.dy, draw_augment(random_flips, e, i).dy);  // crops as without alternation
      EXPECT_EQ(d.dx, draw_augment(random_flips, e, i).dx);
    }
    const AugmentDraw d2 = draw_augment(opt, 2, i);
    crops_same += d0.dy == d2.dy && d0.dx == d2.dx;
  }
  EXPECT_TRUE(flips0 > 110 && flips0 < 190) << flips0 << " flips in " << n;
  EXPECT_LT(crops_same, 100);  // 1 in 9 expected
  // The batches: a sample of epoch 3 is epoch 0's image mirrored (crop aside: no padding here).
  opt.crop_padding = 0;
  DataLoader loader(ds, opt);
  const Epoch e0 = run_epoch(loader, 0), e3 = run_epoch(loader, 3);
  std::map<int64_t, size_t> at0, at3;
  for (size_t k = 0; k < e0.samples.size(); ++k) at0[e0.samples[k]] = k;
  for (size_t k = 0; k < e3.samples.size(); ++k) at3[e3.samples[k]] = k;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t ch = 0; ch < c; ++ch)
          ASSERT_EQ(e3.images[size_t(((int64_t(at3[i]) * h + y) * w + x) * c + ch)],
                    e0.images[size_t(((int64_t(at0[i]) * h + y) * w + (w - 1 - x)) * c + ch)])
              << "sample " << i;
}

TEST(DataLoader, OutputDoesNotDependOnBatchSizeOrPrefetch) {
  const Dataset ds = synthetic(37, 4, 4, 3);
  LoaderOptions opt;
  opt.seed = 3;
  opt.crop_padding = 1;
  opt.hflip = true;
  opt.mean = {0.2f, 0.3f, 0.4f};
  opt.std = {0.3f, 0.3f, 0.3f};
  opt.batch_size = 4;
  opt.prefetch = 1;
  DataLoader a(ds, opt);
  opt.batch_size = 7;
  opt.prefetch = 3;
  DataLoader b(ds, opt);
  const Epoch ea = run_epoch(a, 5), eb = run_epoch(b, 5);
  EXPECT_EQ(ea.samples, eb.samples);
  EXPECT_EQ(ea.images, eb.images);
  EXPECT_EQ(ea.labels, eb.labels);
}

TEST(DataLoader, DestroyMidEpochReturnsPromptly) {
  const Dataset ds = synthetic(3000, 32, 32, 3);
  LoaderOptions opt;
  opt.batch_size = 16;
  opt.crop_padding = 4;
  opt.hflip = true;
  // Destroyed: right after begin_epoch; after one batch (worker blocked on a full queue); never
  // started; at the end of an epoch.
  for (int mode = 0; mode < 4; ++mode) {
    auto loader = std::make_unique<DataLoader>(ds, opt);
    if (mode != 2) loader->begin_epoch(0);
    if (mode == 1) {
      ASSERT_TRUE(loader->next().has_value());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the queue fill up
    }
    if (mode == 3) {
      while (loader->next()) {
      }
    }
    auto done = std::async(std::launch::async, [l = std::move(loader)]() mutable { l.reset(); });
    // A hang, not a slow machine, is what this catches: the limit is far above the ~ms it takes.
    ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready) << "mode " << mode;
  }
}

TEST(DataLoader, BadUse) {
  const Dataset ds = synthetic(4, 2, 2, 3);
  LoaderOptions opt;
  opt.batch_size = 0;
  EXPECT_THROW(DataLoader(ds, opt), Error);
  opt.batch_size = 2;
  opt.mean = {0.5f};
  EXPECT_THROW(DataLoader(ds, opt), Error);
  opt.mean = {};
  opt.std = {1.0f, 0.0f, 1.0f};
  EXPECT_THROW(DataLoader(ds, opt), Error);
  opt.std = {};
  DataLoader loader(ds, opt);
  try {
    loader.next();
    ADD_FAILURE() << "next() before begin_epoch() did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("begin_epoch"), std::string::npos) << e.what();
  }
  EXPECT_THROW(loader.begin_epoch(-1), Error);
  Dataset broken = synthetic(4, 2, 2, 3);
  broken.labels[2] = 9;  // >= num_classes (7)
  EXPECT_THROW(DataLoader(broken, opt), Error);
}

// Float32 images handed over without a copy (Python's arrays): the loader takes the values as they
// are (no /255), applies mean/std, and gives the same batches the uint8 path gives for v / 255.
TEST(DataLoader, FloatImagesAndRegressionTargets) {
  const Dataset u8 = synthetic(10, 3, 4, 2);
  std::vector<float> values(u8.images.size());
  for (size_t i = 0; i < values.size(); ++i) values[i] = float(u8.images[i]) / 255.0f;
  Dataset f = u8;
  f.images.clear();
  f.float_images = values.data();
  f.labels.clear();
  f.num_classes = 0;
  f.target_dim = 2;
  for (int64_t i = 0; i < f.n; ++i) {
    f.targets.push_back(float(i));
    f.targets.push_back(-float(i));
  }
  f.check();
  LoaderOptions opt;
  opt.batch_size = 4;
  opt.seed = 5;
  opt.crop_padding = 1;
  opt.hflip = true;
  opt.mean = {0.25f, 0.5f};
  opt.std = {0.5f, 2.0f};
  DataLoader a(u8, opt), b(f, opt);
  a.begin_epoch(1);
  b.begin_epoch(1);
  while (auto ba = a.next()) {
    auto bb = b.next();
    ASSERT_TRUE(bb.has_value());
    EXPECT_EQ(ba->samples, bb->samples);
    const auto va = ba->images.to_vector<float>(), vb = bb->images.to_vector<float>();
    ASSERT_EQ(va.size(), vb.size());
    for (size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(va[i], vb[i], 1e-5f) << i;
    EXPECT_FALSE(bb->labels.defined());
    ASSERT_TRUE(bb->targets.defined());
    EXPECT_EQ(bb->targets.shape(), (Shape{bb->size, 2}));
    const auto t = bb->targets.to_vector<float>();
    for (int64_t k = 0; k < bb->size; ++k) {
      EXPECT_EQ(t[size_t(2 * k)], float(bb->samples[size_t(k)]));
      EXPECT_EQ(t[size_t(2 * k + 1)], -float(bb->samples[size_t(k)]));
    }
  }
  EXPECT_FALSE(b.next().has_value());
  // Inconsistent data sets are refused.
  Dataset both = f;
  both.images = u8.images;
  EXPECT_THROW(both.check(), Error);
  Dataset short_targets = f;
  short_targets.targets.pop_back();
  EXPECT_THROW(short_targets.check(), Error);
  Dataset labels_and_targets = f;
  labels_and_targets.labels = u8.labels;
  EXPECT_THROW(labels_and_targets.check(), Error);
}

TEST(DataLoader, ChannelStats) {
  Dataset d = synthetic(6, 2, 3, 2);
  const auto [mean, stdev] = channel_stats(d);
  ASSERT_EQ(mean.size(), 2u);
  for (int64_t ch = 0; ch < 2; ++ch) {
    double s = 0, s2 = 0;
    const int64_t pixels = d.n * d.h * d.w;
    for (int64_t i = 0; i < pixels; ++i) {
      const double v = d.images[size_t(i * 2 + ch)] / 255.0;
      s += v;
      s2 += v * v;
    }
    const double m = s / double(pixels);
    EXPECT_NEAR(mean[size_t(ch)], m, 1e-6);
    EXPECT_NEAR(stdev[size_t(ch)], std::sqrt(s2 / double(pixels) - m * m), 1e-5);
  }
}

// Data-parallel shards: each global batch of batch_size * world_size samples of the epoch's order
// is cut into consecutive parts, one per rank, with augmentation unchanged; put back together, the
// ranks' batches are the unsharded loader's batches of the global size.
TEST(DataLoader, RankShardsTogetherAreTheGlobalBatches) {
  const Dataset ds = synthetic(45, 4, 4, 1);
  for (const int world : {2, 3}) {
    for (const bool drop_last : {false, true}) {
      LoaderOptions global;
      global.batch_size = 4 * world;
      global.seed = 5;
      global.crop_padding = 1;
      global.hflip = true;
      global.drop_last = drop_last;
      DataLoader whole(ds, global);
      const Epoch want = run_epoch(whole, 2);
      std::vector<Epoch> parts;
      std::vector<std::vector<int64_t>> globals(static_cast<size_t>(world));
      for (int r = 0; r < world; ++r) {
        LoaderOptions o = global;
        o.batch_size = 4;
        o.rank = r;
        o.world_size = world;
        DataLoader loader(ds, o);
        // 45 = 5 global batches of 8 and 5 more (world 2); 3 of 12 and 9 (world 3)
        EXPECT_EQ(loader.num_batches(), whole.num_batches()) << "world " << world;
        loader.begin_epoch(2);
        while (auto b = loader.next()) globals[size_t(r)].push_back(b->global_size);
        parts.push_back(run_epoch(loader, 2));
      }
      for (int r = 1; r < world; ++r) EXPECT_EQ(globals[size_t(r)], globals[0]) << "every rank, every batch";
      EXPECT_EQ(globals[0], want.sizes);
      // Interleave: global batch b is rank 0's batch b, then rank 1's, ...
      std::vector<int64_t> samples;
      std::vector<float> images;
      std::vector<size_t> at(size_t(world), 0), at_img(size_t(world), 0);
      for (size_t b = 0; b < want.sizes.size(); ++b) {
        int64_t total = 0;
        for (int r = 0; r < world; ++r) {
          const Epoch& e = parts[size_t(r)];
          ASSERT_LT(b, e.sizes.size());
          const int64_t n = e.sizes[b];
          total += n;
          const int64_t m = want.sizes[b];
          EXPECT_EQ(n, m / world + (r < m % world ? 1 : 0)) << "batch " << b << " rank " << r;
          samples.insert(samples.end(), e.samples.begin() + long(at[size_t(r)]),
                         e.samples.begin() + long(at[size_t(r)] + size_t(n)));
          const size_t img = size_t(n * ds.image_bytes());
          images.insert(images.end(), e.images.begin() + long(at_img[size_t(r)]),
                        e.images.begin() + long(at_img[size_t(r)] + img));
          at[size_t(r)] += size_t(n);
          at_img[size_t(r)] += img;
        }
        EXPECT_EQ(total, want.sizes[b]);
      }
      EXPECT_EQ(samples, want.samples) << "world " << world << " drop_last " << drop_last;
      EXPECT_EQ(images, want.images) << "the same augmentation draws";
    }
  }
  // A last global batch with fewer samples than ranks is dropped on every rank.
  const Dataset small = synthetic(9, 2, 2, 1);
  LoaderOptions o;
  o.batch_size = 2;
  o.world_size = 4;  // global batches of 8: one, and a tail of 1 < 4 ranks
  for (int r = 0; r < 4; ++r) {
    o.rank = r;
    DataLoader loader(small, o);
    EXPECT_EQ(loader.num_batches(), 1);
    EXPECT_EQ(loader.num_samples(), 8);
    EXPECT_EQ(run_epoch(loader, 0).sizes, (std::vector<int64_t>{2}));
  }
  o.rank = 4;
  EXPECT_THROW(
      {
        try {
          DataLoader bad(small, o);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("rank 4 is not in [0, 4)"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}
