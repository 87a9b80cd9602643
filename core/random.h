/// @file
/// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC 2011) with an explicit Generator.
///
/// A draw of n elements reserves n consecutive counters [offset, offset + n) of the generator;
/// element i is computed from the Philox block of counter offset + i under the key `seed`. Nothing
/// depends on thread order, so CPU and CUDA (cuRAND's Philox core function evaluates the same
/// rounds) draw the same bits for the same generator state: uniform and integer draws are
/// bit-identical across devices. Normal draws go through log, cos and sqrt, whose device versions
/// may differ from the host's libm by an ulp or two, so they agree to a few ulp, not bitwise.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/macros.h"

namespace tapestry {

/// An explicit random state: a Philox key (the seed) and a counter (the offset). Every op that
/// draws takes one and reserves the counters it uses, so a (seed, offset) names the same numbers on
/// every device.
class Generator {
 public:
  /// A generator at offset 0 of `seed`'s stream.
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }  ///< the seed (Philox key)
  uint64_t offset() const { return offset_; }  ///< the next unused counter
  /// Restores a state read from seed() and offset() (checkpoints).
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed, offset_ = offset; }
  /// Reserves n counters; returns the first.
  uint64_t reserve(uint64_t n) {
    const uint64_t first = offset_;
    offset_ += n;
    return first;
  }

 private:
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

/// The four 32-bit words of one Philox4x32-10 output block.
struct PhiloxBlock {
  uint32_t w[4];  ///< the words
};

/// Philox4x32-10: ten rounds of the 128-bit counter `ctr` under the 64-bit key (k0, k1).
TP_HOST_DEVICE inline PhiloxBlock philox4x32_10(PhiloxBlock ctr, uint32_t k0, uint32_t k1) {
  uint32_t c0 = ctr.w[0], c1 = ctr.w[1], c2 = ctr.w[2], c3 = ctr.w[3];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    c0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    c1 = static_cast<uint32_t>(p1);
    c2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c3 = static_cast<uint32_t>(p0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

/// The block of counter (counter, 0) under the key `seed`: what a Generator draw uses.
TP_HOST_DEVICE inline PhiloxBlock philox_block(uint64_t counter, uint64_t seed) {
  const PhiloxBlock ctr{{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0, 0}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

/// Draws from one Philox block. Uniforms lie in [0, 1).
TP_HOST_DEVICE inline float uniform_float(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}
/// A uniform float in [0, 1) from the block's first word.
TP_HOST_DEVICE inline float uniform_float(const PhiloxBlock& b) { return uniform_float(b.w[0]); }
/// Eight 16-bit draws from one block, j in [0, 8): the low (j even) or high half of word j / 2.
TP_HOST_DEVICE inline uint32_t uniform_bits16(const PhiloxBlock& b, int64_t j) {
  return (b.w[j >> 1] >> (16 * (j & 1))) & 0xFFFFu;
}
/// A uniform double in [0, 1) from 53 bits of two words.
TP_HOST_DEVICE inline double uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 32 | lo) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}
/// A uniform double in [0, 1) from the block's first two words.
TP_HOST_DEVICE inline double uniform_double(const PhiloxBlock& b) { return uniform_double(b.w[0], b.w[1]); }

/// Standard normal by Box–Muller on two uniforms of the block (1 − u keeps the log finite).
TP_HOST_DEVICE inline float normal_float(const PhiloxBlock& b) {
  const float u1 = 1.0f - static_cast<float>(b.w[0] >> 8) * (1.0f / 16777216.0f);
  const float u2 = static_cast<float>(b.w[1] >> 8) * (1.0f / 16777216.0f);
  return std::sqrt(-2.0f * std::log(u1)) * std::cos(6.283185307179586f * u2);
}
/// A standard normal double by Box–Muller on the block's four words.
TP_HOST_DEVICE inline double normal_double(const PhiloxBlock& b) {
  const double u1 = 1.0 - uniform_double(b.w[0], b.w[1]);
  const double u2 = uniform_double(b.w[2], b.w[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

/// Uniform integer in [0, range) from 64 random bits; the modulo bias is below range / 2^64.
TP_HOST_DEVICE inline uint64_t uniform_below(const PhiloxBlock& b, uint64_t range) {
  return (static_cast<uint64_t>(b.w[0]) << 32 | b.w[1]) % range;
}

}  // namespace tapestry
