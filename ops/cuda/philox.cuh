// Philox4x32-10 on the device: cuRAND's core function, with the counter / key layout of
// philox_block (core/random.h), so that a Generator names the same numbers on both devices.
#pragma once

#include <cuda_runtime.h>
#include <curand_philox4x32_x.h>

#include <cstdint>

#include "core/random.h"

namespace tapestry::cuda {

// The block of counter (counter, 0) under the key `seed`: philox_block(counter, seed) on the GPU.
__device__ __forceinline__ PhiloxBlock device_philox_block(uint64_t counter, uint64_t seed) {
  const uint4 ctr = make_uint4(static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u);
  const uint2 key = make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint4 r = curand_Philox4x32_10(ctr, key);
  return {{r.x, r.y, r.z, r.w}};
}

}  // namespace tapestry::cuda
