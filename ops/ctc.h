/// @file
/// Connectionist temporal classification (Graves, Fernández, Gomez, Schmidhuber, ICML 2006): the
/// negative log-likelihood of a label sequence summed over every frame-level alignment of it.
///
/// Shapes: B batch, T frames, C classes (including the blank), S the padded target length.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tapestry {

/// How ctc_loss combines the batch's per-utterance losses ℓ_b = −log p(z_b | x_b).
enum class CtcReduction {
  None,  ///< (B): ℓ_b
  Sum,   ///< 0-d: Σ_b ℓ_b
  Mean,  ///< 0-d: (1/B) Σ_b ℓ_b / max(S_b, 1), each loss divided by its target length first (as
         ///< PyTorch does; the max keeps an empty target's loss as it is); 0 when B = 0
};

/// What ctc_loss does with an infinite ℓ_b: an input too short for its target (T_b < S_b + the
/// number of adjacent repeated labels, each repeat needing a blank between its two frames), or
/// log-probabilities of −inf on every path.
enum class CtcInfinity {
  Keep,  ///< ℓ_b = +inf (and so Sum and Mean are +inf)
  Zero,  ///< ℓ_b = 0: a batch with an infeasible utterance still trains on the others
};

/// CTC loss of log_probs (B, T, C) (floating; log-probabilities per frame, normally a log_softmax
/// over C; batch first, as the models produce them) against targets (B, S) (int64; row b holds the
/// labels z_b in its first target_lengths[b] entries, the rest is padding and never read),
/// input_lengths (B) (int64, each in [0, T]; frames at or after T_b are ignored and get a zero
/// gradient) and target_lengths (B) (int64, each in [0, S]). Every label z_b[i] lies in [0, C) and
/// differs from blank ∈ [0, C). All four tensors live on one device.
///
/// ℓ_b = −log Σ_{π ∈ B⁻¹(z_b)} Π_{t < T_b} y_t^{π_t}, where B removes repeats and then blanks
/// (Graves et al. 2006, eq. 2–3), computed by the log-space forward recursion (eq. 6–8). An empty
/// target over zero frames has probability 1 (ℓ_b = 0).
///
/// The gradient is the exact derivative with respect to log_probs taken as free inputs (eq. 14–15):
/// −(1/p) Σ_{s: z'_s = k} α_t(s) β_t(s) / y_t^k, which is minus the posterior of class k at frame t.
/// (PyTorch returns e^log_probs minus that posterior instead, which is right only after a
/// log_softmax; both give the same gradient to the logits before one.) An infinite ℓ_b has a zero
/// gradient under either CtcInfinity: no direction of the inputs makes it finite.
///
/// The lengths and targets are read on the host to be checked (a copy when they are on a GPU).
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank = 0, CtcReduction reduction = CtcReduction::Mean,
                CtcInfinity infinity = CtcInfinity::Keep);

}  // namespace tapestry
