// src/graph/conv_crop.h - (internal) a conv whose last output rows and columns are dropped computes
// only the kept ones. airbench's max-pools over 31x31, 15x15 and 7x7 drop the last row and column of
// a conv's output; with padding after p and stride s, the conv whose padding after is p - d*s
// produces exactly the first OH - d rows (the same sums, none of the dropped outputs' FLOPs).
// Forward: keep_first (a crop computed by the conv itself). Backward: unpad_conv_grad (the crop's
// gradient, a zero pad, taken into the backward calls). Both only where the device's library pads
// each side on its own (LibraryCaps::conv_pads_each_side).
#pragma once

#include "aether/graph/primitives.h"

namespace aether::prim {

// y's first `rows` x `cols` outputs (N, rows, cols, C) of y (N, H, W, C). Where y is an unrealized
// conv (or a Cast of one) whose padding after covers the dropped rows and columns (times the
// stride), a new conv with that padding reduced, reading the same sources (no history: the caller
// records the gradient against y); else a slice of y. The new conv is a call of its own: if y's
// whole output is also realized, both run.
Tensor keep_first(const Tensor& y, int64_t rows, int64_t cols);

// A conv's output gradient dy (N, OH, OW, O) that is a zero pad after its rows and columns: the
// gradient of a crop of its output. Returns the gradient before the pad(s), with `arg`'s padding after
// reduced by the rows and columns dropped (times the stride), while the padding lasts; nested pads
// are taken off one by one, a Cast on a pad is looked through (a cast of 0 is 0). dy as it is
// otherwise.
Tensor unpad_conv_grad(const Tensor& dy, Conv2dArg& arg);

}  // namespace aether::prim
