// `tapestry asr`: CTC phoneme recognition with a Transformer encoder (models/speech_recognizer.h),
// the clustered-attention paper's speech experiment (§4.1) on data a machine can install.
//
//   tapestry asr train [flags]                       train on --data, evaluate on --eval-split
//   tapestry asr eval --resume CKPT [flags]          evaluate a checkpoint (its model settings)
//   tapestry asr transcribe --model CKPT FILE.wav    print the phonemes of audio files
//
// Data (--data): `speech`, the espeak-ng corpus that `make data` prepares (docs/DATA.md), or a
// folder of the same layout: train.tsv, valid.tsv, test.tsv (lines `wav<TAB>phonemes`, the
// phonemes separated by spaces) and phonemes.txt (the inventory, one symbol a line). --eval-split
// picks what evaluations score: train (the training utterances, for learning checks), valid, test,
// or asterisk (the recorded prompts of asterisk/phonemes.tsv, real speech, same inventory).
//
// Audio: 16 kHz mono (anything else is refused, naming the file: resample with sox). Features:
// --mel-bins log-mel filterbanks per 25 ms window every 10 ms (data/features.h) between 0 Hz and
// --high-hz, normalised per utterance. The default 4 kHz top keeps to the band of the 8 kHz
// telephone prompts, so synthetic and real speech are seen through the same filters.
//
// Labels: class 0 is the CTC blank, class i + 1 the inventory's i-th phoneme. A transcript with
// a symbol outside the inventory is an Error naming the list, the line and the symbol. An utterance
// whose ⌈frames / stack⌉ positions cannot hold its labels (CTC needs one position per label and one
// more between equal neighbours) is left out and counted ("infeasible" in the report, a line on
// stderr).
//
// Metrics, on the eval split: per (phone error rate, metrics/edit_distance.h; the best checkpoint
// and --patience follow it) of greedy decoding, or of prefix beam search with --beam N; loss (CTC,
// mean per label); forward_ms (the model's forward pass per utterance, batched as evaluation
// batches them, decoding excluded).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/app.h"
#include "apps/inspect.h"
#include "apps/options.h"
#include "data/features.h"
#include "train/trainer.h"

namespace tapestry::app {

// The sample rate the pipeline takes; others are refused.
inline constexpr int64_t kAsrSampleRate = 16000;
// The widest --beam, in every asr command.
inline constexpr int64_t kAsrMaxBeam = 4096;

struct AsrOptions {
  std::string data = "speech";       // speech | a folder of the same layout
  std::string eval_split = "valid";  // train | valid | test | asterisk
  int64_t max_train = 0;             // the first N training utterances (0: all)
  int64_t max_eval = 0;              // the first N utterances of the eval split (0: all)
  int64_t mel_bins = 40;
  double high_hz = 4000;             // the mel filters' top
  int64_t stack = 4;                 // frames per encoder position
  int64_t batch_frames = 8000;       // padded frames per training batch
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t head_dim = 16;
  int64_t ff = 256;
  double dropout = 0.1;
  attention::AttentionConfig attention = attention::AttentionConfig::parse("full");
  std::optional<attention::AttentionConfig> eval_attention;
  double mu = 1e-3;  // neural-clustering only: the weights of L1 and L2 (ClusterFormer eq. 17)
  double nu = 1e-3;
  int64_t beam = 0;  // 0: greedy decoding; N: prefix beam search keeping N prefixes
  data::SpecAugmentOptions spec_augment;  // masks on the training batches' features (off by default)
  train::TrainOptions train;

  AsrOptions();
};

enum class AsrPreset {
  Default,  // 4 layers of 4 × 16, ff 256, Adam 2e-3, 1500 steps: ~40 epochs of the speech corpus
  Smoke,    // 2 layers of 2 × 16, ff 128, one thread, 300 steps: a few dozen utterances
};
AsrOptions asr_preset(AsrPreset preset);

// Throws Error naming the flag.
Attentions check_asr_options(const AsrOptions& options);

// Reads the data, then trains and evaluates (or, with train.eval_only, evaluates). Throws Error for
// missing data (naming `make data`), unreadable audio, transcripts outside the inventory, a
// checkpoint of other settings, and what the harness refuses.
train::Report run_asr(const AsrOptions& options);

// `options` with the model settings (--mel-bins, --high-hz, --stack, --layers, --heads,
// --head-dim, --ff, --attention) of the checkpoint at `path`, and its phoneme inventory. Throws
// Error naming --resume / --model and the path for a file that is not an asr checkpoint.
struct AsrCheckpoint {
  AsrOptions options;
  std::vector<std::string> phonemes;
};
AsrCheckpoint read_asr_checkpoint(const std::string& path, const AsrOptions& options, const char* flag);

// `tapestry inspect` of an asr checkpoint (apps/inspect.h), on the CPU: the first held-out batches
// of its recorded --eval-split.
InspectedCheckpoint inspect_asr_checkpoint(const CheckpointRequest& request);

// The phonemes the checkpoint at `model` hears in each audio file (16 kHz), decoded greedily or
// with `beam` > 0, with the eval attention of `options` when given. Throws Error naming the file.
std::vector<std::vector<std::string>> transcribe(const std::string& model, const std::vector<std::string>& files,
                                                 const AsrOptions& options);

// Registers `tapestry asr train|eval|transcribe`.
void add_asr(CommandLine& cli);
// `tapestry asr transcribe` (apps/asr_transcribe.cpp), under `group`.
void add_asr_transcribe(CommandLine& cli, CLI::App* group);

}  // namespace tapestry::app
