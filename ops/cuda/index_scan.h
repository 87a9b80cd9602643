// Validating integer indices that live on a GPU (ops/cuda/index_scan.cu), before an op launches
// anything that would read through them. Plain C++: ops/embedding.cpp and ops/loss.cpp call it.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace tapestry::cuda {

struct IndexScan {
  int64_t bad_position = -1;  // row-major position of the first invalid index; −1 when none
  int64_t bad_value = 0;      // the index found there
  int64_t valid = 0;          // indices in [0, limit) (those equal to `skip` are neither)
};

// Scans contiguous int32 / int64 `indices` on their GPU: every index must lie in [0, limit) unless
// it equals `skip` (cross-entropy's ignore_index), which is passed over. One kernel reads the indices
// in place and combines per-block results with integer atomics (max of n − position, a count: exact,
// so the result does not depend on the order blocks finish); then 16 bytes come back to the host,
// plus the offending index when there is one. Waits for the device: the caller decides before it
// queues any work that depends on the indices.
IndexScan scan_indices(const char* op, const Tensor& indices, int64_t limit, std::optional<int64_t> skip = {});

}  // namespace tapestry::cuda
