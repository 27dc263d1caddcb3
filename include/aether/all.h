// aether/all.h - everything: tensors and ops, layers, optimizers, data, checkpoints, the Model API.
#pragma once

#include "aether/aether.h"
#include "aether/data/data.h"
#include "aether/io/checkpoint.h"
#include "aether/model/model.h"
#include "aether/model/presets.h"
#include "aether/nn/layers.h"
#include "aether/nn/module.h"
#include "aether/optim/optimizer.h"
#include "aether/optim/schedule.h"
