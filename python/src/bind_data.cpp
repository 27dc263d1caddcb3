// Data sets as NumPy arrays: the C++ readers (Fashion-MNIST IDX, CIFAR-10 batches) load a data set
// once; its images and labels are handed to NumPy without a copy (the arrays keep it alive).
// Arrays from NumPy become data sets the same way (float32 images are not copied; see Dataset).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bind.h"

namespace aether::py {
namespace {

using DatasetPtr = std::shared_ptr<data::Dataset>;

// (images (N,H,W,C) uint8, labels (N) int64) viewing a loaded data set.
nb::tuple dataset_arrays(DatasetPtr d) {
  auto* owner = new DatasetPtr(d);
  nb::capsule cap(owner, [](void* p) noexcept { delete static_cast<DatasetPtr*>(p); });
  const size_t shape[4] = {size_t(d->n), size_t(d->h), size_t(d->w), size_t(d->c)};
  nb::ndarray<nb::numpy, uint8_t> images(d->images.data(), 4, shape, cap);
  const size_t lshape[1] = {size_t(d->n)};
  nb::ndarray<nb::numpy, int64_t> labels(d->labels.data(), 1, lshape, cap);
  return nb::make_tuple(images, labels);
}

// A data set over arrays from Python. x: (N,H,W,C), (N,H,W) or (N,F), C-contiguous uint8 (copied:
// a byte per pixel) or float32 (not copied, kept alive). Exactly one of labels (N) int64 with
// `classes` classes, or targets (N,K) float32 (copied: small).
DatasetPtr dataset_from_arrays(nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu> x, nb::handle x_obj,
                               std::optional<nb::ndarray<nb::ro, int64_t, nb::ndim<1>, nb::c_contig>> labels,
                               std::optional<nb::ndarray<nb::ro, float, nb::ndim<2>, nb::c_contig>> targets,
                               int classes, const std::string& name) {
  auto d = std::make_shared<data::Dataset>();
  d->name = name;
  const size_t nd = x.ndim();
  if (nd < 2 || nd > 4)
    throw nb::value_error(("aether: " + name +
                           ": images must be (N, H, W, C), (N, H, W) or (N, features), got " +
                           std::to_string(nd) + " dimensions")
                              .c_str());
  d->n = int64_t(x.shape(0));
  d->h = int64_t(x.shape(1));
  d->w = nd >= 3 ? int64_t(x.shape(2)) : 1;
  d->c = nd == 4 ? int64_t(x.shape(3)) : 1;
  const DType dt = dtype_from_dlpack(x.dtype());
  const size_t count = size_t(d->n * d->h * d->w * d->c);
  if (dt == DType::uint8) {
    const auto* p = static_cast<const uint8_t*>(x.data());
    d->images.assign(p, p + count);
  } else if (dt == DType::float32) {
    d->float_images = static_cast<const float*>(x.data());
    d->keep_alive = keep_alive(x_obj);
  } else {
    throw nb::type_error(
        ("aether: " + name + ": images must be uint8 or float32, got " + std::string(dtype_name(dt)))
            .c_str());
  }
  if (targets) {
    if (int64_t(targets->shape(0)) != d->n)
      throw nb::value_error(("aether: " + name + ": " + std::to_string(targets->shape(0)) + " targets for " +
                             std::to_string(d->n) + " images")
                                .c_str());
    d->target_dim = int64_t(targets->shape(1));
    d->targets.assign(targets->data(), targets->data() + d->n * d->target_dim);
  } else if (labels) {
    if (int64_t(labels->shape(0)) != d->n)
      throw nb::value_error(("aether: " + name + ": " + std::to_string(labels->shape(0)) + " labels for " +
                             std::to_string(d->n) + " images")
                                .c_str());
    d->labels.assign(labels->data(), labels->data() + d->n);
    d->num_classes = classes;
  }
  d->check();  // labels in range: aether::Error -> ValueError
  return d;
}

}  // namespace

void bind_data(nb::module_& m) {
  nb::class_<data::Dataset>(m, "Dataset", "images (N,H,W,C) and labels (N) or targets (N,K), on the host")
      .def_ro("name", &data::Dataset::name)
      .def_prop_ro("shape",
                   [](const data::Dataset& d) {
                     return std::vector<int64_t>{d.n, d.h, d.w, d.c};
                   })
      .def_ro("num_classes", &data::Dataset::num_classes)
      .def_ro("target_dim", &data::Dataset::target_dim, "targets per sample (0: class labels)")
      .def_ro("class_names", &data::Dataset::class_names)
      .def("__len__", [](const data::Dataset& d) { return d.n; });

  m.def(
      "_load_dataset",
      // height, width: an image folder's size to resize to (0, 0: its images' own size)
      [](const std::string& name, const std::string& split, const std::string& dir, int64_t height,
         int64_t width) {
        nb::gil_scoped_release release;
        const std::string canonical = data::canonical_dataset_name(name);
        AETHER_CHECK(split == "train" || split == "test", "datasets",
                     "split must be 'train' or 'test', got '", split, "'");
        const data::Split s = split == "train" ? data::Split::train : data::Split::test;
        return std::make_shared<data::Dataset>(data::load_dataset(
            canonical, data::resolve_data_dir(canonical, dir, "data_dir"), s, height, width));
      },
      nb::arg("name"), nb::arg("split"), nb::arg("data_dir") = "", nb::arg("height") = 0,
      nb::arg("width") = 0);
  m.def(
      "_image_folder_classes", [](const std::string& dir) { return data::image_folder_classes(dir); },
      nb::arg("data_dir"));
  m.def(
      "_split_validation",
      [](const data::Dataset& d, double fraction) {
        auto [train, val] = data::split_validation(d, fraction);
        return std::make_pair(std::make_shared<data::Dataset>(std::move(train)),
                              std::make_shared<data::Dataset>(std::move(val)));
      },
      nb::arg("dataset"), nb::arg("fraction"));
  m.def("_dataset_arrays", &dataset_arrays);
  m.def("_dataset_from_arrays", &dataset_from_arrays, nb::arg("x"), nb::arg("x_obj"),
        nb::arg("labels").none(), nb::arg("targets").none(), nb::arg("classes"), nb::arg("name"));
  m.def(
      "_channel_stats",
      [](const data::Dataset& d) {
        nb::gil_scoped_release release;
        return data::channel_stats(d);
      },
      nb::arg("dataset"),
      "per-channel mean and std of uint8 images on the [0,1] scale, as `aether train` uses");
}

}  // namespace aether::py
