/// @file
/// Sliding-window (local) attention: each query attends to the keys within W positions of its own,
/// the banded baseline of Longformer (Beltagy et al. 2020, §3.1, "sliding window") and BigBird
/// (Zaheer et al. 2020). Neither paper is in papers/; the band here is the plain one, without their
/// global or random keys.
///
/// Query i sees key j iff i − W ≤ j ≤ i + W, or i − W ≤ j ≤ i with Causal::Yes (so W is one side of
/// the window, which holds 2W + 1 keys, or W + 1 causally); padded keys are never seen. W ≥ N − 1 is
/// full attention. Query i and key i are the same position, so N must equal S.
#pragma once

#include "nn/attention/common.h"

namespace tapestry::attention {

/// q (B, H, N, E), k (B, H, N, E), v (B, H, N, M) -> (B, H, N, M): the softmax of q_i · k_j / √E over
/// the keys of i's window and the weighted sum of their values (a row that sees no key gives zeros).
/// Differentiable in q, k and v; runs on listed_keys_attention (nn/attention/full.h), O(N·W·E).
Tensor local_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t window, const Padding& padding = {},
                       Causal causal = Causal::No);

}  // namespace tapestry::attention
