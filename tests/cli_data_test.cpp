// Tests of the `aether` commands on data (run as a child process, as cli_test): predict's lines for
// one-sigmoid, regression and image inputs, and one's own image folders (train, evaluate per class,
// predict on image files, data verify).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "aether/core/random.h"
#include "aether/data/readers.h"
#include "aether/model/model.h"
#include "cli_util.h"

namespace fs = std::filesystem;
using namespace cli_util;

namespace {
// A saved model Flatten -> Linear(784, outputs) with `loss`, for predict on 28x28 images.
void save_linear_model(const std::string& path, int64_t outputs, const std::string& loss, uint64_t seed) {
  aether::manual_seed(seed);
  aether::Model m;
  m.add(std::make_shared<aether::nn::Flatten>()).add(std::make_shared<aether::nn::Linear>(784, outputs));
  aether::ModelConfig c;
  c.loss = loss;
  m.configure(c).finalize({28, 28, 1});
  m.save(path);
}

// The first n images of an IDX image file as a data set, and the outputs of model `checkpoint`
// for them in-process (predict()): (n, K) row-major.
std::vector<float> predicted(const std::string& checkpoint, const std::string& images, int64_t n) {
  const aether::data::IdxImages idx = aether::data::read_idx_images(images);
  aether::data::Dataset d;
  d.name = "t10k";
  d.n = n, d.h = idx.rows, d.w = idx.cols, d.c = 1;
  d.images.assign(idx.pixels.begin(), idx.pixels.begin() + n * idx.rows * idx.cols);
  d.labels.assign(size_t(n), 0);
  d.num_classes = 1;
  return aether::Model::load(checkpoint).predict(d).to_vector<float>();
}
}  // namespace

// predict with a model of one sigmoid output (binary_cross_entropy): class 1 when the sigmoid is over
// 0.5, with the chosen class's probability (before, argmax of one output: always class 0).
TEST(CliPredict, OneSigmoidOutputIsABinaryDecision) {
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  const std::string images = tmp.file("data/t10k-images-idx3-ubyte"), ck = tmp.file("bce.aether");
  save_linear_model(ck, 1, "binary_cross_entropy", 6);
  const CliResult r = run("predict --checkpoint '" + ck + "' '" + images + "' --limit 0");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::vector<float> s = predicted(ck, images, 8);  // the 8 images' sigmoids
  std::string want;
  int64_t ones = 0;
  for (int64_t i = 0; i < 8; ++i) {
    const bool one = s[size_t(i)] > 0.5f;
    ones += one;
    char line[64];
    std::snprintf(line, sizeof line, "%lld\tclass %d\tp=%.3f\n", static_cast<long long>(i), int(one),
                  one ? s[size_t(i)] : 1 - s[size_t(i)]);
    want += line;
  }
  EXPECT_NE(r.out.find(want), std::string::npos) << r.out << "\nexpected:\n" << want;
  EXPECT_GT(ones, 0) << "every image got class 0: the test would not tell the decision from argmax";
}

// predict with an mse model prints each image's outputs (before: an argmax of them, called a class).
TEST(CliPredict, RegressionPrintsTheOutputs) {
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  const std::string images = tmp.file("data/t10k-images-idx3-ubyte"), ck = tmp.file("mse.aether");
  save_linear_model(ck, 3, "mse", 7);
  const CliResult r = run("predict --checkpoint '" + ck + "' '" + images + "' --limit 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("class"), std::string::npos) << r.out;
  const std::vector<float> v = predicted(ck, images, 3);  // (3, 3)
  std::string want;
  for (int64_t i = 0; i < 3; ++i) {
    char line[128];
    std::snprintf(line, sizeof line, "%lld\tvalues %.6g %.6g %.6g\n", static_cast<long long>(i),
                  double(v[size_t(3 * i)]), double(v[size_t(3 * i + 1)]), double(v[size_t(3 * i + 2)]));
    want += line;
  }
  EXPECT_NE(r.out.find(want), std::string::npos) << r.out << "\nexpected:\n" << want;
  EXPECT_EQ(r.out.find("3\tvalues"), std::string::npos) << "--limit 3: " << r.out;
}

// --dataset image-folder: one's own images, a folder per class; train, evaluate (per class, by the
// folders' names), data verify, and the error without --data-dir.
TEST(CliImageFolder, TrainEvaluateAndVerify) {
  TempDir tmp;
  const fs::path dir = tmp.path / "shapes";
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> noise(0, 50);
  for (const std::string split : {"train", "test"})
    for (int i = 0; i < (split == "train" ? 30 : 10); ++i)
      for (const std::string cls : {"dark", "light"}) {
        fs::create_directories(dir / split / cls);
        std::ofstream f(dir / split / cls / (std::to_string(i) + ".pgm"), std::ios::binary);
        f << "P5\n8 8\n255\n";
        for (int p = 0; p < 64; ++p) f.put(char((cls == "light" ? 160 : 30) + noise(gen)));
      }
  const std::string ck = tmp.file("f.aether"), js = tmp.file("e.json"), d = "'" + dir.string() + "'";
  const CliResult t = run("train --dataset image-folder --data-dir " + d +
                          " --model mlp --epochs 3 --batch-size 10 --quiet --save '" + ck + "'");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("image-folder"), std::string::npos) << t.out;
  const CliResult e =
      run("evaluate --checkpoint '" + ck + "' --data-dir " + d + " --metrics-json '" + js + "'");
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("per class: dark "), std::string::npos) << e.out;
  nlohmann::json j;
  std::ifstream(js) >> j;
  EXPECT_EQ(j.at("class_names"), nlohmann::json({"dark", "light"}));
  EXPECT_EQ(j.at("samples"), 20);
  EXPECT_GE(j.at("test_accuracy").get<double>(), 0.9) << e.out;  // dark and light images are easy
  // --image-size resizes the training images, and evaluate resizes the test images to the model's.
  const std::string ck16 = tmp.file("f16.aether");
  const CliResult t16 = run("train --dataset image-folder --data-dir " + d +
                            " --model lenet --epochs 1 --image-size 16x12 --quiet --save '" + ck16 + "'");
  ASSERT_EQ(t16.code, 0) << t16.out;
  EXPECT_EQ(aether::Model::load(ck16).input_shape(), aether::Shape({16, 12, 1}));
  const CliResult e16 = run("evaluate --checkpoint '" + ck16 + "' --data-dir " + d);
  EXPECT_EQ(e16.code, 0) << e16.out;
  // --resume without --dataset: the checkpoint's data set and image size; --image-size may repeat it.
  const CliResult r16 =
      run("train --resume '" + ck16 + "' --data-dir " + d + " --epochs 2 --image-size 16x12 --quiet");
  EXPECT_EQ(r16.code, 0) << r16.out;
  expect_one_line_error(run("train --resume '" + ck16 + "' --data-dir " + d + " --epochs 3 --image-size 8"),
                        {"--image-size 8 differs from 16x12"});
  // A checkpoint of another data set: --image-size is refused before any data is read.
  write_tiny_fashion(tmp.path / "fashion", 28, 28);
  const std::string fck = tmp.file("fashion.aether");
  ASSERT_EQ(run("train --dataset fashion-mnist --model mlp --epochs 1 --quiet --data-dir '" +
                tmp.file("fashion") + "' --save '" + fck + "'")
                .code,
            0);
  for (const std::string how : {"--dataset fashion-mnist ", ""})
    expect_one_line_error(run("train --resume '" + fck + "' " + how +
                              "--epochs 2 --image-size 8 --data-dir '" + tmp.file("fashion") + "'"),
                          {"--image-size is for --dataset image-folder"});
  expect_one_line_error(run("train --dataset cifar10 --image-size 8"),
                        {"--image-size is for --dataset image-folder"});
  expect_one_line_error(run("train --dataset image-folder --data-dir " + d + " --image-size 8y"),
                        {"--image-size"});
  // predict on a folder of images and on one image: each line ends with the class's name (saved with
  // the model) and the file.
  const CliResult pf =
      run("predict --checkpoint '" + ck + "' '" + (dir / "test/light").string() + "' --limit 2");
  ASSERT_EQ(pf.code, 0) << pf.out;
  EXPECT_NE(pf.out.find("0\tclass 1\tp="), std::string::npos) << pf.out;
  EXPECT_NE(pf.out.find("\tlight\t" + (dir / "test/light/0.pgm").string() + "\n"), std::string::npos)
      << pf.out;
  EXPECT_EQ(std::count(pf.out.begin(), pf.out.end(), '\n'), 2) << pf.out;
  const CliResult p1 = run("predict --checkpoint '" + ck + "' '" + (dir / "test/dark/3.pgm").string() + "'");
  ASSERT_EQ(p1.code, 0) << p1.out;
  EXPECT_NE(p1.out.find("0\tclass 0\tp="), std::string::npos) << p1.out;
  EXPECT_NE(p1.out.find("\tdark\t"), std::string::npos) << p1.out;
  fs::create_directories(tmp.path / "no-images");
  expect_one_line_error(run("predict --checkpoint '" + ck + "' '" + tmp.file("no-images") + "'"),
                        {"no-images holds no image"});
  // A file that is no image, IDX or CIFAR-10 batch is named as what it is not.
  std::ofstream(tmp.file("notes.txt")) << "not a batch\n";
  expect_one_line_error(run("predict --checkpoint '" + ck + "' '" + tmp.file("notes.txt") + "'"),
                        {"predict: " + tmp.file("notes.txt") + " is not an image file (",
                         "), an IDX image file (a name with idx3) or a CIFAR-10 batch: ",
                         "expected a 3073-byte record (number 0), file ends after 12 bytes of it"});
  const CliResult v = run("data verify image-folder --data-dir " + d);
  EXPECT_EQ(v.code, 0) << v.out;
  EXPECT_NE(v.out.find("train: 60 images (8, 8, 1), 2 classes: dark 30, light 30"), std::string::npos)
      << v.out;
  expect_one_line_error(run("train --dataset image-folder --model mlp"),
                        {"image-folder has no default folder", "--data-dir"});
}
