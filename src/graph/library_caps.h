// src/graph/library_caps.h - (internal) what a device's library calls can do, as the device runtime
// answers: the scheduler reads it (which epilogues a conv absorbs), and so do the gradient rules
// (whether a conv's backward may take uneven padding). The backends register the source of the
// answer at start-up (backend/registry.cpp); the graph does not see the backends.
#pragma once

#include <algorithm>
#include <vector>

#include "aether/core/device.h"
#include "aether/core/dtype.h"

namespace aether {

struct LibraryCaps {
  // The dtypes in which a convolution runs an epilogue of per-channel adds / subtracts / multiplies,
  // one residual add and ReLUs as one call (oneDNN post-ops: {float32}); empty: none.
  std::vector<DType> conv_epilogue;
  // Convs take their padding per side as they are (oneDNN and the naive loops); cuDNN pads
  // symmetrically, so an uneven conv there first copies its input into a padded buffer.
  bool conv_pads_each_side = false;
  bool conv_epilogue_in(DType t) const {
    return std::find(conv_epilogue.begin(), conv_epilogue.end(), t) != conv_epilogue.end();
  }
};
// The capabilities of `device`'s library calls, from its runtime (the backends register the source
// of this answer at start-up; none registered: no capabilities). Setting a source returns the one
// it replaces (tests put it back).
using LibraryCapsSource = LibraryCaps (*)(Device);
LibraryCaps library_caps(Device device);
LibraryCapsSource set_library_caps_source(LibraryCapsSource source);

}  // namespace aether
