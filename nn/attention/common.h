/// @file
/// What every attention in Tapestry shares: shape letters and how padding and causality are given.
///
/// Shape letters: B batch, H heads, N queries, S keys, E head dimension (queries/keys), M value
/// dimension, C clusters, k top-k keys, L Lloyd iterations, R hash bits, D model dimension.
#pragma once

#include "core/tensor.h"

namespace tapestry::attention {

/// Whether a query may attend to later keys (No) or only to keys at or before its position (Yes).
enum class Causal { No, Yes };

/// How an attention's softmax over its keys is computed: Fused::No composes matmul, masked softmax
/// and matmul, holding the scores; Fused::Yes runs ops/attention.h's fused kernels, which hold none.
enum class Fused { No, Yes };

/// Padding is given by lengths: positions ≥ lengths[b] of sample b are padding. An undefined tensor
/// means no padding. Lengths are int64 or int32, the dtypes every index tensor may have (ops/index.h).
/// Padded keys are never attended to; outputs at padded queries are defined
/// (finite) but meaningless, and nothing at a padded position influences a real position.
struct Padding {
  Tensor query_lengths;  ///< (B,) int64 or int32, or undefined
  Tensor key_lengths;    ///< (B,) int64 or int32, or undefined
};

/// Checks that `lengths` are (B,) integers in [0, N]; `op` names the caller in errors.
void check_lengths(const Tensor& lengths, int64_t batch, int64_t length, const char* op);

/// Checks lengths against (B, N) (check_lengths) and returns a (B, N) bool tensor, true at real
/// positions; all true without lengths. `op` names the caller in errors.
Tensor valid_positions(const Tensor& lengths, int64_t batch, int64_t length, Device device, const char* op);

/// t / ‖t‖ along the last dim (the keys of shared-QK attention, the vectors of neural clustering's
/// cosine losses). A zero row stays zero, with a zero gradient: the norm is floored at 1e-12.
Tensor unit_rows(const Tensor& t);

}  // namespace tapestry::attention
