#include "data/speech_corpus.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "data/datasets.h"

namespace tapestry::data {

std::string speech_corpus_folder(const SpeechCorpusOptions& o) {
  if (o.data == "speech") return dataset_directory("speech");
  TP_CHECK(std::filesystem::is_directory(o.data), o.names_data, "'", o.data, "' is neither speech nor a folder");
  return o.data;
}

namespace {

std::string split_list(const SpeechCorpusOptions& o, const std::string& split) {
  if (split == "asterisk") return dataset_directory("asterisk") + "/phonemes.tsv";
  return speech_corpus_folder(o) + "/" + split + ".tsv";
}

LabelledUtterances read_split(const SpeechCorpusOptions& o, const std::string& split,
                              const std::vector<std::string>& inventory, int64_t limit) {
  const std::string list = split_list(o, split);
  LabelledUtterances u = read_labelled_utterances(list, inventory, {o.filterbank, o.stack, limit});
  if (o.on_infeasible && u.infeasible > 0)
    o.on_infeasible("left out " + std::to_string(u.infeasible) + " utterance(s) of " + list +
                    " too short for their phonemes (CTC), e.g. " + u.first_infeasible);
  return u;
}

}  // namespace

SpeechCorpus read_speech_corpus(const SpeechCorpusOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  SpeechCorpus c;
  c.inventory = read_symbol_inventory(speech_corpus_folder(o) + "/phonemes.txt");
  if (o.read_train) c.train = read_split(o, "train", c.inventory, o.max_train);
  // The training split as evaluated: the utterances trained on, unless max_eval says otherwise.
  const int64_t eval_limit = o.eval_split == "train" && o.max_eval == 0 ? o.max_train : o.max_eval;
  if (o.eval_split == "train" && eval_limit == o.max_train && o.read_train) c.eval = c.train;
  else c.eval = read_split(o, o.eval_split, c.inventory, eval_limit);
  if (o.on_progress) {
    char line[256];
    std::snprintf(line, sizeof line, "%lld training and %lld %s utterances, %zu phonemes, read in %.1f s",
                  (long long)c.train.size(), (long long)c.eval.size(), o.eval_split.c_str(), c.inventory.size(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    o.on_progress(line);
  }
  return c;
}

namespace {

constexpr int64_t kSpeechWindow = 256;  // utterances sorted by length together

BatchingOptions speech_batching(int64_t batch_frames, Shuffle shuffle) {
  return {batch_frames, /*max_batch=*/0, kSpeechWindow, shuffle, Oversize::Alone};
}

}  // namespace

BatchSampler SpeechCorpus::train_sampler(int64_t batch_frames, uint64_t seed, int64_t rank, int64_t ranks) const {
  return BatchSampler(train.size() > 0 ? train.frames : eval.frames, speech_batching(batch_frames, Shuffle::Yes), seed,
                      rank, ranks);
}

BatchList SpeechCorpus::eval_batches(int64_t batch_frames) const {
  return bucket_batches(eval.frames, speech_batching(batch_frames, Shuffle::No));
}

}  // namespace tapestry::data
