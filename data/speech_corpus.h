/// @file
/// A speech corpus from its name or folder to the labelled utterances a CTC model trains and is
/// evaluated on: the pipeline `tapestry asr` runs before any model hears a file (docs/DATA.md).
///
///   SpeechCorpusOptions o;
///   o.data = "speech";       // or a folder of the same layout
///   o.eval_split = "valid";  // train | valid | test | asterisk
///   const SpeechCorpus c = read_speech_corpus(o);
///   c.inventory;  // phonemes.txt: class i + 1 is its i-th symbol, 0 the CTC blank
///
/// Layout: train.tsv, valid.tsv, test.tsv (lines of a WAV path, a tab and its phonemes) and phonemes.txt (data/speech.h);
/// `speech` is the espeak-ng corpus `make data` prepares, `asterisk` the recorded prompts of the
/// asterisk set (asterisk/phonemes.tsv, the same inventory).
///
/// Nothing here prints: what a user should hear comes through the options' callbacks. Errors name the
/// setting to change as `names_data` spells it (a command line passes its flag).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/features.h"
#include "data/speech.h"

namespace tapestry::data {

/// The settings of the pipeline.
struct SpeechCorpusOptions {
  std::string data = "speech";       ///< speech | a folder of the same layout
  std::string eval_split = "valid";  ///< train | valid | test | asterisk: what evaluations score
  int64_t max_train = 0;             ///< the first N training utterances (0: all)
  int64_t max_eval = 0;              ///< the first N utterances of eval_split (0: all; for train: max_train)
  bool read_train = true;            ///< false: read the evaluation split alone (a saved model evaluated)
  FilterbankOptions filterbank;      ///< the features, and the sample rate every file must have
  int64_t stack = 1;                 ///< frames a model stacks into one position (SpeechListOptions::stack)
  std::string names_data = "data";   ///< what errors call `data`
  /// Told, as one line, of the utterances of a list left out as too short for their labels; unset: not told.
  std::function<void(const std::string&)> on_infeasible;
  /// Told, as one line, of the utterances and phonemes read and the time it took; unset: not told.
  std::function<void(const std::string&)> on_progress;
};

/// The folder options.data names: the prepared `speech` set, or a folder. Throws Error naming
/// options.names_data for anything else, and dataset_directory's when `speech` is not prepared.
std::string speech_corpus_folder(const SpeechCorpusOptions& options);

/// What a speech recogniser works on.
struct SpeechCorpus {
  std::vector<std::string> inventory;  ///< the label symbols (phonemes.txt)
  LabelledUtterances train;            ///< empty unless options.read_train
  LabelledUtterances eval;             ///< options.eval_split's

  /// The sampler of the training batches for rank `rank` of `ranks` (data/batch.h): shuffled, at
  /// most `batch_frames` padded frames each, utterances sorted by length in windows of 256, one
  /// longer than the budget a batch alone. Without a training split (options.read_train false) it
  /// samples the evaluation split, and is not to be drawn from.
  BatchSampler train_sampler(int64_t batch_frames, uint64_t seed, int64_t rank, int64_t ranks) const;
  /// The evaluation batches (rows of eval), batched as train_sampler's but in order.
  BatchList eval_batches(int64_t batch_frames) const;
};

/// Reads the inventory, the training split (when options.read_train) and the evaluation split; the
/// training split evaluated with no max_eval of its own is the utterances trained on, read once.
/// Throws the readers' Errors (data/speech.h).
SpeechCorpus read_speech_corpus(const SpeechCorpusOptions& options);

}  // namespace tapestry::data
