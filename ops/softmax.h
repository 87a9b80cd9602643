/// @file
/// Fused, numerically stable softmax and log-softmax along the last dim.
///
/// Both subtract the row maximum before exponentiating, so inputs of any finite magnitude (±1e4 in
/// float32 included) give finite results. The backward is one pass over each row.
///
/// Masks. `mask` is optional (undefined = none) and must broadcast to x's shape, e.g. (B, 1, 1, S)
/// against scores of shape (B, H, N, S). Its dtype picks its meaning:
///   - bool: true = KEEP the entry, false = mask it out (the convention of fast-transformers'
///     attention masks, which this project implements). A masked entry gets probability exactly 0
///     (log-probability −inf) and no gradient, whatever x holds there.
///   - x's floating dtype: an additive mask, softmax(x + mask); −inf entries mask out exactly as
///     false does above. Its gradient (the same as x's, summed to its shape) flows when it requires
///     grad, so a learned bias works as a mask.
/// The backward ignores the gradient arriving at −inf outputs of log_softmax (it belongs to a loss
/// that is infinite anyway), so that it never leaks into masked entries.
/// A row with every entry masked (or −inf) has no distribution to normalise: softmax gives all
/// zeros there, log_softmax all −inf, and the row passes no gradient. A row holding a NaN (at a kept
/// entry) is NaN throughout, so a NaN never passes for a masked row (docs/PORTING.md, "NaN").
#pragma once

#include "core/tensor.h"

namespace tapestry {

/// y = e^(x − m) / Σ_c e^(x − m), m = max_c x, along the last dim. Floating x of at least 1 dim.
Tensor softmax(const Tensor& x, const Tensor& mask = {});
/// y = x − m − log Σ_c e^(x − m), along the last dim.
Tensor log_softmax(const Tensor& x, const Tensor& mask = {});

}  // namespace tapestry
