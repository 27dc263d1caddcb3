// Internal: the geometry of the library ops (convolution, pooling) that every device's library
// kernels take: plain shapes and arguments, shared by backend/cpu and backend/cuda.
#pragma once

#include <cstdint>

#include "aether/graph/op.h"

namespace aether {

// Geometry of one 2-D convolution, NHWC activations and OHWI weights:
//   x (N,H,W,C), w (O,KH,KW,C/groups), y (N,OH,OW,O).
struct ConvGeom {
  int64_t N, H, W, C, O, KH, KW, OH, OW;
  Conv2dArg arg;
};

// Geometry of one 2-D pooling: x (N,H,W,C) -> y (N,OH,OW,C).
struct PoolGeom {
  int64_t N, H, W, C, OH, OW;
  Pool2dArg arg;
};

}  // namespace aether
