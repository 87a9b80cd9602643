#include "models/speech_recognition.h"

#include <chrono>

#include "core/autograd.h"
#include "core/creation.h"
#include "core/cuda.h"
#include "data/audio.h"
#include "metrics/edit_distance.h"
#include "nn/decode/ctc.h"
#include "ops/ctc.h"
#include "ops/shape.h"

namespace tapestry::models {

std::vector<int64_t> ctc_decode(const Tensor& log_probs, int64_t length, int64_t beam) {
  return (beam > 0 ? nn::decode::ctc_beam_search(log_probs, length, beam)
                   : nn::decode::ctc_greedy_decode(log_probs, length))
      .labels;
}

RecognizedBatch recognition_batch(SpeechRecognizer& model, const data::LabelledUtterances& u,
                                  const std::vector<int64_t>& rows, Device device, Generator& gen, double* seconds,
                                  const data::SpecAugmentOptions* augment) {
  const data::FrameBatch batch = data::make_frame_batch(u.features, model.options().features, u.labels, rows);
  const Tensor masked = augment && augment->enabled() ? data::spec_augment(batch.features, batch.lengths, *augment, gen)
                                                      : batch.features;
  const Tensor features = to(masked, device), lengths = to(batch.lengths, device);
  RecognizedBatch b;
  const auto start = std::chrono::steady_clock::now();
  b.out = model.forward(features, lengths, gen);
  if (seconds) {
    if (device.is_cuda()) cuda::synchronize(device.index);
    *seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  b.loss = ctc_loss(b.out.log_probs, to(batch.targets, device), b.out.lengths, to(batch.target_lengths, device), 0,
                    CtcReduction::Mean, CtcInfinity::Zero);
  for (const int64_t r : rows) b.frames += u.frames[size_t(r)];
  return b;
}

RecognitionScores evaluate_recognition(SpeechRecognizer& model, const data::LabelledUtterances& eval,
                                       const data::BatchList& batches, int64_t beam, Device device, Generator& gen) {
  metrics::ErrorRate per;
  double loss = 0, seconds = 0;
  RecognitionScores s;
  for (const auto& rows : batches) {
    const RecognizedBatch b = recognition_batch(model, eval, rows, device, gen, &seconds);
    loss += b.loss.item<double>() * double(rows.size());
    s.frames += b.frames;
    const Tensor log_probs = to(b.out.log_probs, Device::cpu());
    const std::vector<int64_t> lengths = to(b.out.lengths, Device::cpu()).to_vector<int64_t>();
    for (size_t r = 0; r < rows.size(); ++r)
      per.add(eval.labels[size_t(rows[r])], ctc_decode(select(log_probs, 0, int64_t(r)), lengths[r], beam));
  }
  const double n = double(eval.size());
  s.metrics = {{"per", per.value()}, {"loss", loss / n}, {"forward_ms", 1000.0 * seconds / n}};
  return s;
}

std::vector<int64_t> recognize_file(SpeechRecognizer& model, const std::string& file,
                                    const data::FilterbankOptions& filterbank, int64_t beam, Generator& gen) {
  const data::Audio audio = data::read_audio(file, {data::MultiChannel::Refuse, filterbank.sample_rate});
  const std::vector<float> features = data::filterbank_features(audio.samples, filterbank, file);
  const int64_t bins = filterbank.mel_bins, frames = int64_t(features.size()) / bins;
  const auto result = model.forward(from_vector(features, {1, frames, bins}), from_vector<int64_t>({frames}, {1}), gen);
  return ctc_decode(select(result.log_probs, 0, 0), model.positions_of(frames), beam);
}

std::vector<std::vector<std::string>> transcribe_files(SpeechRecognizer& model, const std::vector<std::string>& files,
                                                       const data::FilterbankOptions& filterbank, int64_t beam,
                                                       const std::vector<std::string>& inventory, Generator& gen) {
  model.eval();
  NoGradGuard no_grad;
  std::vector<std::vector<std::string>> out;
  for (const std::string& file : files) {
    std::vector<std::string> symbols;
    for (const int64_t id : recognize_file(model, file, filterbank, beam, gen)) symbols.push_back(inventory[size_t(id - 1)]);
    out.push_back(std::move(symbols));
  }
  return out;
}

}  // namespace tapestry::models
