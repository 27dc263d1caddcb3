// aether/data/data.h - the data layer: readers, data sets, the DataLoader, fetch and verify.
#pragma once

#include "aether/data/byte_reader.h"
#include "aether/data/checksum.h"
#include "aether/data/dataset.h"
#include "aether/data/image_folder.h"
#include "aether/data/loader.h"
#include "aether/data/readers.h"
#include "aether/data/verify.h"
