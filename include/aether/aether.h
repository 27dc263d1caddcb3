// aether/aether.h - everything a program needs: tensors, the lazy graph, autograd, functional
// ops, layers (nn::), optimizers and schedules, data sets and the loader, checkpoints and the Model
// API. Every example in the README and in aether/model/model.h compiles with this header alone.
// (aether/all.h is the same.)
#pragma once

#include "aether/backend/backend.h"
#include "aether/core/buffer.h"
#include "aether/core/device.h"
#include "aether/core/dtype.h"
#include "aether/core/error.h"
#include "aether/core/random.h"
#include "aether/core/shape.h"
#include "aether/graph/autograd.h"
#include "aether/graph/op.h"
#include "aether/graph/primitives.h"
#include "aether/graph/print.h"
#include "aether/graph/tensor.h"
#include "aether/ops/conv.h"
#include "aether/ops/nn.h"
// Layers, optimizers, data and the Model API.
#include "aether/data/data.h"
#include "aether/dist/communicator.h"
#include "aether/model/model.h"
#include "aether/model/presets.h"
#include "aether/nn/layers.h"
#include "aether/nn/module.h"
#include "aether/optim/optimizer.h"
#include "aether/optim/schedule.h"
