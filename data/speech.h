/// @file
/// A labelled speech corpus as a CTC model reads it (the `speech` set's layout, docs/DATA.md): an
/// inventory of label symbols (phonemes.txt, one a line) and list files of `path<TAB>symbols` lines
/// (data/audio.h), read as log-mel features (data/features.h) with each symbol's class id.
///
/// Class ids: 0 is the CTC blank, i + 1 the inventory's i-th symbol.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/features.h"

namespace tapestry::data {

/// The inventory file at `path`: one symbol a line, non-empty, without blanks, each once. Errors
/// (`"speech: <path>, line L: ..."`) name the line; an empty file is refused.
std::vector<std::string> read_symbol_inventory(const std::string& path);

/// The positions CTC needs to emit `labels`: one per label, and one more (a blank) between equal
/// neighbours.
int64_t ctc_positions_needed(const std::vector<int64_t>& labels);

/// The (frames × mel_bins) features of one file's samples, flattened; an Error naming `where` when
/// the samples are fewer than one window.
std::vector<float> filterbank_features(const std::vector<float>& samples, const FilterbankOptions& filterbank,
                                       const std::string& where);

/// How read_labelled_utterances reads a list file.
struct SpeechListOptions {
  FilterbankOptions filterbank;  ///< its sample_rate is also the rate every file must have
  int64_t stack = 1;             ///< frames the model stacks into one position: ⌈frames / stack⌉ positions
  int64_t limit = 0;             ///< read the first `limit` entries only (0: all)
};

/// The utterances of a list file as features and class ids, row i of each the same utterance.
struct LabelledUtterances {
  std::vector<std::vector<float>> features;  ///< frames × mel_bins each, flattened
  std::vector<int64_t> frames;  ///< the number of frames of each
  std::vector<std::vector<int64_t>> labels;  ///< class ids
  int64_t infeasible = 0;        ///< left out: fewer positions than CTC needs for their labels
  std::string first_infeasible;  ///< the path of the first one left out
  /// The number of utterances kept.
  int64_t size() const { return int64_t(frames.size()); }
};

/// The utterances of the list file at `list`, mono at the filterbank's rate (read_audio_list), each
/// transcript split at blanks into inventory symbols. A symbol outside the inventory is an Error naming
/// the list, the line and the symbol, as is a file shorter than one window; an utterance too short for
/// its labels is left out and counted. A list that leaves no utterance is an Error.
LabelledUtterances read_labelled_utterances(const std::string& list, const std::vector<std::string>& inventory,
                                            const SpeechListOptions& options);

}  // namespace tapestry::data
