// aether/all.h - the same as aether/aether.h (everything), kept for programs that include it.
#pragma once

#include "aether/aether.h"
