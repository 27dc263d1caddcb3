// aether/aether.h - the tensor library: tensors, the lazy graph, autograd, functional ops.
// Layers, optimizers, data and the Model API: aether/nn/*.h, aether/optim/*.h, aether/data/data.h,
// aether/model/model.h (or aether/all.h for everything).
#pragma once

#include "aether/backend/backend.h"
#include "aether/core/buffer.h"
#include "aether/core/device.h"
#include "aether/core/dtype.h"
#include "aether/core/error.h"
#include "aether/core/random.h"
#include "aether/core/shape.h"
#include "aether/core/tensor.h"
#include "aether/graph/autograd.h"
#include "aether/graph/op.h"
#include "aether/graph/primitives.h"
#include "aether/graph/print.h"
#include "aether/ops/conv.h"
#include "aether/ops/nn.h"
