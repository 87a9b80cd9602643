/// @file
/// Decoding a CTC model's output: from the per-frame log-probabilities of one utterance to a label
/// sequence. Host-side (the log-probabilities are copied to the host when they are on a GPU).
///
/// Shapes: T frames, C classes including the blank. Both decoders take log_probs (T, C) of one
/// utterance (floating, usually a log_softmax) and its length, the number of leading frames that
/// are real (0 ≤ length ≤ T; the rest is padding and never read).
///
///   nn::decode::CtcHypothesis best = nn::decode::ctc_beam_search(select(log_probs, 0, b), lengths[b], 8);
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace tapestry::nn::decode {

/// A decoded utterance.
struct CtcHypothesis {
  std::vector<int64_t> labels;  ///< the label sequence, blanks and repeats collapsed
  double log_prob = 0;          ///< its score: see each decoder
};

/// Best-path decoding: the most probable class per frame (the first on a tie), adjacent repeats
/// merged, then blanks dropped (Graves et al. 2006, §3.2). log_prob is the log-probability of that
/// single path, Σ_t max_k log y_t^k, a lower bound on the probability of the labelling it collapses to.
CtcHypothesis ctc_greedy_decode(const Tensor& log_probs, int64_t length, int64_t blank = 0);

/// CTC prefix beam search without a language model (Hannun et al. 2014, "First-pass large
/// vocabulary continuous speech recognition using bi-directional recurrent DNNs", Algorithm 1 with
/// α = β = 0). Every prefix ℓ in the beam carries two log-probabilities over the frames so far: of
/// the paths that collapse to ℓ and end in a blank, p_b(ℓ), and end in ℓ's last label, p_nb(ℓ).
/// Frame t extends each prefix by every class k:
///   k = blank:           p_b(ℓ)   ⊕= (p_b(ℓ) ⊕ p_nb(ℓ)) + log y_t^blank
///   k = last label of ℓ: p_nb(ℓ)  ⊕= p_nb(ℓ) + log y_t^k           (the repeat merges)
///                        p_nb(ℓk) ⊕= p_b(ℓ) + log y_t^k            (a blank separated them)
///   any other k:         p_nb(ℓk) ⊕= (p_b(ℓ) ⊕ p_nb(ℓ)) + log y_t^k
/// (⊕ is log-sum-exp, right-hand sides read the previous frame's values) and keeps the `beam`
/// prefixes of largest p_b ⊕ p_nb (ties broken by the shorter, then lexicographically smaller
/// prefix, so the result is deterministic). The answer is the beam's best prefix after the last
/// frame; log_prob is its p_b ⊕ p_nb: the log-probability summed over the alignments that survived
/// pruning, a lower bound on log p(labels | x), exact when no prefix was ever dropped (beam at least
/// the number of distinct prefixes). beam = 1 is not best-path decoding: it keeps the prefix with
/// the most probability mass, summed over its alignments, at every frame. beam ≥ 1.
CtcHypothesis ctc_beam_search(const Tensor& log_probs, int64_t length, int64_t beam, int64_t blank = 0);

}  // namespace tapestry::nn::decode
