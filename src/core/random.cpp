// The global Philox generator state.
#include "aether/core/random.h"

namespace aether {
namespace {
GeneratorState g_state{0x5eed, 0};
}

void manual_seed(uint64_t seed) { g_state = {seed, 0}; }
GeneratorState generator_state() { return g_state; }
void set_generator_state(const GeneratorState& s) { g_state = s; }
uint64_t next_random_stream() { return g_state.next_stream++; }
uint64_t current_seed() { return g_state.seed; }

}  // namespace aether
