/// @file
/// Autoregressive decoding of a batch of sequences from a model's next-token log-probabilities:
/// greedy search and beam search, batched over sentences and beams.
///
/// The model is seen through two functions. `next(last)` takes the last token of every row being
/// decoded, last (R,) int64, advances the model's state by that token and returns the next token's
/// log-probabilities (R, V). `select_rows(rows)` makes row i of the model's state a copy of row
/// rows[i] (rows (R',) int64, values in [0, R)): searches call it to drop finished sentences and,
/// in beam search, to follow the hypotheses they extend. A decoder with a key/value cache
/// (nn::DecoderCache::select_rows) supplies both cheaply.
///
///   auto best = nn::decode::beam_search(batch, next, select_rows, {/*beam=*/5, /*length_penalty=*/1.0, ...});
///
/// Scores. A hypothesis y_1 .. y_T (y_T = eos, or the last token when a sentence reaches its
/// maximum length without one) has log_prob = Σ_t log p(y_t | y_<t) and
/// score = log_prob / T^length_penalty: 0 ranks by total log-probability, 1 by the mean per token
/// (the normalisation fairseq applies). Selection is host-side: the log-probabilities are copied
/// to the host each step.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace tapestry::nn::decode {

/// Settings shared by greedy_search and beam_search.
struct SearchOptions {
  int64_t beam = 5;             ///< hypotheses kept per sentence (beam_search only), ≥ 1
  double length_penalty = 1.0;  ///< the exponent of T in the score, finite
  int64_t bos = 2;              ///< the token every sentence starts from (fed to the first next call)
  int64_t eos = 3;              ///< the token that ends a sentence
  /// Per sentence, the most tokens it may produce, eos included (each ≥ 1). A sentence that has
  /// not produced eos by then ends there.
  std::vector<int64_t> max_lengths;
};

/// A decoded sentence.
struct Hypothesis {
  std::vector<int64_t> tokens;  ///< the tokens produced, without bos and without the final eos
  bool ended = false;           ///< whether it ended with eos (false: it reached its maximum length)
  double log_prob = 0;          ///< Σ log p over every token produced, eos included
  double score = 0;             ///< log_prob / T^length_penalty, T counting eos
};

/// The next-token log-probabilities (R, V) after feeding `last` (R,) int64; see the top of this file.
using NextLogProbs = std::function<Tensor(const Tensor& last)>;
/// Keeps the model state's rows `rows` (R',) int64 in that order; see the top of this file.
using SelectRows = std::function<void(const Tensor& rows)>;

/// At each step the most probable token of each row (the lowest id on a tie). Sentences that end are
/// dropped from the model's state. Returns one hypothesis per sentence, in batch order.
/// Throws Error for batch < 1, max_lengths not of size batch, a maximum length < 1, or a `next`
/// result that is not (R, V) floating.
std::vector<Hypothesis> greedy_search(int64_t batch, const NextLogProbs& next, const SelectRows& select_rows,
                                      const SearchOptions& options);

/// Beam search. The state is first widened to `beam` copies of each sentence (select_rows). Each step,
/// for every sentence still open, the 2·beam best extensions of its hypotheses by log_prob (only the
/// first hypothesis at step 0, when all are the same) are taken in order: one ending with eos becomes
/// a finished hypothesis, any other an open one, until `beam` open ones are kept. A sentence closes
/// when it holds `beam` finished hypotheses, or at its maximum length (the open ones then count as
/// finished). Returns, per sentence in batch order, its finished hypotheses best score first (at
/// most `beam`). Ties go to the lower parent row, then the lower token id, so beam 1 is greedy search.
/// Throws Error as greedy_search, and for beam < 1.
std::vector<std::vector<Hypothesis>> beam_search(int64_t batch, const NextLogProbs& next, const SelectRows& select_rows,
                                                 const SearchOptions& options);

}  // namespace tapestry::nn::decode
