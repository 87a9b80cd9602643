/// @file
/// A SpeechRecognizer (models/speech_recognizer.h) on labelled utterances (data/speech_corpus.h):
/// batches of them through the model with their CTC loss, decoding (greedy or prefix beam search),
/// the scores an evaluation reports, and audio files recognised.
///
///   const RecognitionScores s = evaluate_recognition(model, corpus.eval, batches, beam, device, gen);
///   s.metrics;  // {per, loss, forward_ms}
///
/// Shape letters: B utterances, N' encoder positions, K labels (the blank, class 0, included).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/batch.h"
#include "data/features.h"
#include "data/speech.h"
#include "models/speech_recognizer.h"

namespace tapestry::models {

/// The labels of log_probs (N', K) on the host, its first `length` positions decoded: greedily for
/// beam 0, else by CTC prefix beam search keeping `beam` prefixes (nn/decode/ctc.h).
std::vector<int64_t> ctc_decode(const Tensor& log_probs, int64_t length, int64_t beam);

/// Utterances through a SpeechRecognizer.
struct RecognizedBatch {
  SpeechRecognizer::Output out;  ///< the model's output; out.log_probs (B, N', K)
  Tensor loss;                   ///< 0-d: CTC, the mean per label of each utterance, over the batch
  int64_t frames = 0;            ///< the utterances' frames
};

/// The utterances `rows` of `u` as one padded batch (data::make_frame_batch) on `device`, their
/// features masked by `augment` when given and enabled (training), through `model`; the forward
/// pass's time (the device synchronised) is added to *seconds when given.
RecognizedBatch recognition_batch(SpeechRecognizer& model, const data::LabelledUtterances& u,
                                  const std::vector<int64_t>& rows, Device device, Generator& gen,
                                  double* seconds = nullptr, const data::SpecAugmentOptions* augment = nullptr);

/// What evaluate_recognition reports.
struct RecognitionScores {
  /// {per (phone error rate of the decoded labels, metrics/edit_distance.h), loss (CTC, the mean over
  /// the utterances), forward_ms (the forward pass per utterance, decoding excluded)}
  std::vector<std::pair<std::string, double>> metrics;
  int64_t frames = 0;  ///< the frames scored
};

/// Scores `model` on every utterance of `eval`, batched as `batches` (rows of eval), each decoded by
/// ctc_decode with `beam`.
RecognitionScores evaluate_recognition(SpeechRecognizer& model, const data::LabelledUtterances& eval,
                                       const data::BatchList& batches, int64_t beam, Device device, Generator& gen);

/// The labels `model` (on the host, in eval mode, under NoGradGuard) hears in the audio file `file`:
/// mono at filterbank.sample_rate (others are refused, naming the file), its features as `filterbank`
/// computes them, decoded by ctc_decode with `beam`. Class ids: 0 is the blank, never returned.
std::vector<int64_t> recognize_file(SpeechRecognizer& model, const std::string& file,
                                    const data::FilterbankOptions& filterbank, int64_t beam, Generator& gen);

/// The symbols `model` hears in each of `files`: recognize_file's labels, class i + 1 read as
/// inventory[i], with the model put in eval mode and no gradient recorded. Throws recognize_file's
/// Errors.
std::vector<std::vector<std::string>> transcribe_files(SpeechRecognizer& model, const std::vector<std::string>& files,
                                                       const data::FilterbankOptions& filterbank, int64_t beam,
                                                       const std::vector<std::string>& inventory, Generator& gen);

}  // namespace tapestry::models
