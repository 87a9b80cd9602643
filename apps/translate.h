// `tapestry translate`: machine translation with an encoder-decoder Transformer (models/translator.h)
// on the harness (train/trainer.h), scored by corpus BLEU as sacreBLEU computes it (metrics/bleu.h).
//
//   tapestry translate train [flags]               train (a preset's values under the given flags)
//   tapestry translate eval --resume CKPT [flags]  BLEU and loss of a checkpoint on --eval-split
//   tapestry translate run --resume CKPT [--beam]  translate the lines of stdin to stdout
//   tapestry translate score --hypotheses H --references R   BLEU and chrF of any translations
//
// eval and run read the checkpoint's model settings, so its flags need not be repeated.
//
// Data (--data): `de-en` (German→English sentence pairs from the Ding dictionary, prepared by
// `make data`; docs/DATA.md) or a folder of line-aligned files {train,valid,test}.{SRC,TGT}
// (--source-lang, --target-lang): line i of one translates line i of the other. Pairs with an empty
// side are left out of training and counted ("empty_pairs"); pairs longer than --max-length pieces
// on either side are left out of training and counted ("long_pairs"). Evaluation uses every pair.
//
// Tokens: one joint SentencePiece model (--vocab-size pieces) trained on both sides of the training
// split. It goes beside each checkpoint as `<checkpoint>.spm`; --resume reads `<resume>.spm`, so a
// checkpoint translates on its own. Source: pieces + eos; target in: bos + pieces; target out:
// pieces + eos.
//
// Training: label-smoothed cross-entropy (--label-smoothing, padding ignored), batches of about
// --max-tokens padded tokens from length buckets (data::BatchSampler over max(source, target)
// lengths), shuffled by the seed and checkpointed.
//
// Evaluation, on --eval-split (valid, test or train; --eval-sentences limits it to the first N pairs):
// "bleu" (corpus BLEU of the detokenised translations against the raw references; the best
// checkpoint and --patience follow it), "bp" (its brevity penalty), "chrf" (corpus chrF2,
// metrics/chrf.h), "loss" (the target tokens' mean
// negative log-likelihood under teacher forcing, no smoothing) and "decode_sentences_per_second".
// Translations: greedy search for --beam 1, else beam search with length penalty --lenpen; at most
// ceil(--max-ratio × source pieces) + 10 pieces; --cache=false decodes without the key/value cache
// (every step re-runs the decoder on the prefix), to measure what the cache saves. A
// neural-clustering decoder (--decoder-attention neural-clustering:clusters=C, appendix B) has no
// cache and always re-runs the prefix; its µ·L1 + ν·L2 join the encoder's in the training loss.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/app.h"
#include "apps/inspect.h"
#include "apps/options.h"
#include "data/sentencepiece.h"
#include "models/translation.h"
#include "models/translator.h"
#include "train/trainer.h"

namespace tapestry::app {

struct TranslateOptions {
  std::string data = "de-en";   // de-en | a folder of {train,valid,test}.{SRC,TGT}
  std::string source_lang = "de";
  std::string target_lang = "en";
  int64_t max_pairs = 0;        // keep the first N training pairs (0: all)
  int64_t vocab_size = 8000;
  int64_t max_length = 128;     // pieces per side of a training pair
  int64_t max_tokens = 4096;    // padded tokens per training batch
  int64_t encoder_layers = 3;
  int64_t decoder_layers = 3;
  int64_t heads = 4;
  int64_t head_dim = 64;
  int64_t ff = 1024;
  double dropout = 0.1;
  bool tie_output = true;       // the output projection is the embedding table
  attention::AttentionConfig encoder_attention;  // full by default
  attention::AttentionConfig decoder_attention;  // any kind with a causal form; full by default
  std::optional<attention::AttentionConfig> eval_attention;  // the encoder's at evaluation (none: encoder_attention)
  // neural-clustering only: the weights µ of L1 and ν of L2 (ClusterFormer eq. 17).
  double mu = 1e-3;
  double nu = 1e-3;
  double label_smoothing = 0.1;
  std::string eval_split = "valid";  // valid | test | train
  int64_t eval_sentences = 0;   // evaluate on the first N pairs of the split (0: all)
  int64_t beam = 1;             // 1: greedy search
  double lenpen = 1.0;          // beam search's length penalty exponent
  double max_ratio = 1.5;       // translations have at most ceil(max_ratio × source pieces) + 10 pieces
  bool cache = true;            // decode with each decoder layer's keys and values kept (false: re-run the prefix)
  train::TrainOptions train;

  TranslateOptions();
};

enum class TranslatePreset {
  Small,  // about ClusterFormer's IWSLT model scaled to the data: 3 + 3 layers, D = 256, 4 heads, FF 1024
  Smoke,  // learns within minutes on two CPU cores: 2 + 2 layers, D = 64, FF 256
};
TranslateOptions translate_preset(TranslatePreset preset);

// Returns the encoder's attentions (--encoder-attention, and --eval-attention or, without it, the
// same); throws Error naming the flag for a value out of range or a combination that cannot work.
Attentions check_translate_options(const TranslateOptions& options);
// The model the options describe (vocabulary = vocab_size); throws Error for an attention config
// that does not parse.
models::TranslatorOptions translator_options(const TranslateOptions& options);
// Trains (or with train.eval_only evaluates) as the top of this file says.
train::Report run_translate(const TranslateOptions& options);
// A new table of the translate commands' flags (apps/options.h): each command parses into a table of
// its own, and checkpoints record the settings it names.
std::shared_ptr<OptionTable<TranslateOptions>> translate_table();
// The SentencePiece model beside the checkpoint options.train.resume (`CKPT.spm`): the one it was
// trained with. Throws Error naming --resume for a missing file or another run's vocabulary.
data::SentencePiece translate_vocabulary(const TranslateOptions& options);
// How translations are searched: --beam, --lenpen, --max-ratio, --cache, --max-tokens.
models::TranslationSearch translation_search(const TranslateOptions& options);
// The checkpoint options.train.resume (its SentencePiece model beside it), loaded once, translating
// lines as they come (`translate run` at a terminal; apps/translate_run.cpp). Throws Error for a
// missing or foreign checkpoint or vocabulary.
class LineTranslator {
 public:
  explicit LineTranslator(const TranslateOptions& options);
  ~LineTranslator();
  // One translation per line, in order (an empty line gives an empty translation); `first_line`
  // numbers the first of `lines` in errors. Throws Error naming the line for one that is not UTF-8,
  // longer than data::kMaxLineBytes bytes, or of more than 1024 pieces (its attention and decoding
  // would be unbounded).
  std::vector<std::string> translate(const std::vector<std::string>& lines, int64_t first_line = 1);

 private:
  TranslateOptions o_;
  std::unique_ptr<data::SentencePiece> sp_;
  Device device_;
  Generator decoding_;
  std::unique_ptr<models::Translator> model_;
};

// Translates each of `lines` with the checkpoint options.train.resume: LineTranslator(options).translate(lines).
std::vector<std::string> translate_lines(const TranslateOptions& options, const std::vector<std::string>& lines);
// `tapestry inspect` of a translate checkpoint (apps/inspect.h), on the CPU: the first held-out
// batches of its recorded --eval-split, tokenized by the SentencePiece model beside it; the encoder
// and a neural-clustering decoder.
InspectedCheckpoint inspect_translate_checkpoint(const CheckpointRequest& request);

// BLEU (metrics/bleu.h: sacreBLEU's default) and chrF of the lines of the file `hypotheses` against
// those of `references`, read as a pair of parallel files (data/parallel_text.h: both exist, the
// same number of lines, UTF-8; errors name the file): {hypotheses, references, sentences, bleu, bp,
// ratio, hyp_len, ref_len, precisions, chrf, signature (sacreBLEU's line)}.
nlohmann::json score_translations(const std::string& hypotheses, const std::string& references);

// Registers `tapestry translate train | eval | run | score`.
void add_translate(CommandLine& cli);
// `tapestry translate run` (apps/translate_run.cpp), under `group`.
void add_translate_run(CommandLine& cli, CLI::App* group);
// `tapestry translate score` (apps/translate_score.cpp), under `group`.
void add_translate_score(CommandLine& cli, CLI::App* group);

}  // namespace tapestry::app
