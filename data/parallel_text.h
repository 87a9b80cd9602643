/// @file
/// Line-aligned parallel text: line i of the source file translates line i of the target file
/// (the layout of de-en/{train,valid,test}.{de,en}, docs/DATA.md).
///
/// encode_pairs turns pairs into what an encoder-decoder model reads, with SentencePiece's fixed
/// special ids (data/sentencepiece.h): source pieces + eos; bos + target pieces (the decoder's
/// input); target pieces + eos (what it predicts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/sentencepiece.h"

namespace tapestry::data {

/// A sentence and its translation.
struct SentencePair {
  std::string source;  ///< the source file's line
  std::string target;  ///< the target file's line, its translation
};

/// The pairs of `source_path` and `target_path`, in file order. Lines are split as read_lines
/// (data/text_lines.h) does: ``'\n'`` ends a line, CRLF is accepted, a UTF-8 byte-order mark is dropped.
/// Checked, each failure a tapestry::Error naming the file (and the line and byte where there is
/// one): both files exist and are readable; neither is empty; they have the same number of lines;
/// every line is valid UTF-8 and holds no NUL byte. Empty lines are kept as empty sentences.
std::vector<SentencePair> read_parallel_text(const std::string& source_path, const std::string& target_path);

/// Encoded pairs, one column per field, row i of each the same pair.
struct EncodedPairs {
  std::vector<std::vector<int64_t>> source;      ///< pieces + eos
  std::vector<std::vector<int64_t>> target_in;   ///< bos + pieces
  std::vector<std::vector<int64_t>> target_out;  ///< pieces + eos
  std::vector<std::string> references;           ///< the target text as read (BLEU's reference)
  std::vector<int64_t> lengths;                  ///< max(|source|, |target_out|): what batches are budgeted by
  int64_t empty = 0;       ///< pairs left out for an empty side (Filter::Training)
  int64_t too_long = 0;    ///< pairs left out for a side over max_length pieces (Filter::Training)

  /// The number of pairs kept.
  int64_t size() const { return int64_t(source.size()); }
};

/// Training leaves out the pairs a model should not learn from (an empty side; a side of more than
/// max_length pieces, eos not counted), counting them; evaluation keeps every pair, since every
/// reference counts in BLEU.
enum class Filter {
  Training,  ///< leave those pairs out, counted in EncodedPairs::empty and EncodedPairs::too_long
  None       ///< keep every pair (evaluation)
};

/// Throws Error naming encode_pairs for max_length < 1 with Filter::Training.
EncodedPairs encode_pairs(const SentencePiece& sp, const std::vector<SentencePair>& pairs, Filter filter,
                          int64_t max_length = 0);

}  // namespace tapestry::data
