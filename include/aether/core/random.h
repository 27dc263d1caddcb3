// aether/core/random.h - counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11).
//
// Element i of a random tensor is a pure function of (seed, stream, i), so results depend only on
// the seed, never on the thread count or the order of evaluation. The global Generator hands each
// random op a fresh stream number; its state (seed, next stream) is saved in checkpoints.
#pragma once

#include <array>
#include <cstdint>

namespace aether {

// One Philox4x32-10 block: 4 x 32-bit outputs for a 128-bit counter and a 64-bit key.
inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kM0) * ctr[0];
    const uint64_t p1 = uint64_t(kM1) * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1],
           uint32_t(p0)};
    key[0] += kW0;
    key[1] += kW1;
  }
  return ctr;
}

// The random bits for element `index` of draw (seed, stream): counter (index lo, index hi,
// stream lo, stream hi), key (seed lo, seed hi).
inline std::array<uint32_t, 4> philox_bits(uint64_t seed, uint64_t stream, uint64_t index) {
  return philox4x32_10({uint32_t(index), uint32_t(index >> 32), uint32_t(stream), uint32_t(stream >> 32)},
                       {uint32_t(seed), uint32_t(seed >> 32)});
}

// Uniform in [0, 1): 24 random bits for float, 53 for double.
inline float philox_uniform_f32(uint64_t seed, uint64_t stream, uint64_t index) {
  return float(philox_bits(seed, stream, index)[0] >> 8) * (1.0f / 16777216.0f);
}
inline double philox_uniform_f64(uint64_t seed, uint64_t stream, uint64_t index) {
  const auto r = philox_bits(seed, stream, index);
  const uint64_t bits = (uint64_t(r[0]) << 21) ^ (uint64_t(r[1]) >> 11);
  return double(bits & ((uint64_t(1) << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// Process-wide generator state. Not thread-safe by design: seed and draw from one thread.
struct GeneratorState {
  uint64_t seed = 0;
  uint64_t next_stream = 0;
};
void manual_seed(uint64_t seed);   // resets the stream counter too
GeneratorState generator_state();  // for checkpoints
void set_generator_state(const GeneratorState& s);
uint64_t next_random_stream();  // used by random ops
uint64_t current_seed();

}  // namespace aether
