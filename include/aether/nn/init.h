// aether/nn/init.h - initialisations of a layer's weights beyond its default one: data-dependent
// patch whitening and the dirac (identity) filters of airbench's recipe (issue 18).
#pragma once

#include "aether/nn/layers.h"

namespace aether::nn::init {

// Patch whitening (airbench): `conv` (weight (O, KH, KW, C), groups 1, dilation 1, O even) gets, as
// its first O/2 filters, the top O/2 eigenvectors of the (uncentered) covariance of every KH x KW
// patch of `images` (N, H, W, C), each divided by sqrt(its eigenvalue + eps), and as its other O/2
// filters their negatives; its bias, if any, becomes zero. The filters' responses to those patches
// are then uncorrelated, each with second moment lambda / (lambda + eps). The symmetric
// eigen-decomposition is LAPACK's (dsyevd). Throws aether::Error naming what does not fit.
void patch_whitening(Conv2d& conv, const Tensor& images, double eps = 5e-4);

// Dirac (identity) filters: for o < min(O, C), filter o becomes a 1 at the kernel's centre
// (KH/2, KW/2) on input channel o and 0 elsewhere (torch.nn.init.dirac_ on the first C filters,
// as airbench initialises its convs); the other filters keep their values. groups 1.
void dirac(Conv2d& conv);

// weight /= weight.std() (unbiased, as torch.std): the values scaled to standard deviation 1, not
// centred (airbench94_muon's head: `w *= 1 / w.std()`). float32, 2 or more values, not constant.
void unit_std(Tensor& weight);

}  // namespace aether::nn::init
