/// @file
/// A translation corpus from its name or folder to encoded training and evaluation pairs: the
/// pipeline `tapestry translate` runs before any model sees a sentence (docs/DATA.md).
///
///   TranslationCorpusOptions o;
///   o.data = "de-en";                     // or a folder of {train,valid,test}.{SRC,TGT}
///   o.save_sentencepiece = {"model.spm"};
///   const TranslationCorpus c = prepare_translation_corpus(o);
///   c.train;  // the training pairs a model learns from (data::Filter::Training)
///   c.eval;   // every pair of o.eval_split (its first o.eval_sentences)
///
/// Reading: line-aligned parallel text (data/parallel_text.h), `de-en` prepared by `make data`.
/// Tokens: one joint SentencePiece model trained on both sides of the training pairs with no empty
/// side, or the model options.load_sentencepiece gives (a checkpoint's). Evaluation translates every
/// pair, so a source too long to translate is refused before any work.
///
/// Nothing here prints: what a user should hear comes through the options' callbacks. Errors name the
/// setting to change as `names` spells it (a command line passes its flags).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/parallel_text.h"
#include "data/sentencepiece.h"

namespace tapestry::data {

/// The most pieces of a source sentence that is translated: its attention and its decoding would
/// otherwise take memory and time without bound.
inline constexpr int64_t kMaxSourcePieces = 1024;

/// Refuses a source of more than kMaxSourcePieces pieces: throws Error naming `op`, then `where` and
/// its line.
void check_source_pieces(int64_t pieces, const std::string& op, const std::string& where, int64_t line);

/// Lines of text to translate, encoded as sources.
struct SourceLines {
  std::vector<std::vector<int64_t>> sources;  ///< each non-empty line's pieces + eos, in order
  std::vector<size_t> lines;                  ///< the index of each source's line (empty lines have none)
};

/// `lines` encoded by `sp`, an empty line left out; `first_line` numbers the first of them in errors.
/// Throws Error naming `op` for a line that is not UTF-8 or longer than kMaxLineBytes bytes
/// (data/text_lines.h), and check_source_pieces's Error naming `program` for one of more than
/// kMaxSourcePieces pieces.
SourceLines encode_source_lines(const SentencePiece& sp, const std::vector<std::string>& lines, int64_t first_line,
                                const std::string& op, const std::string& program);

/// What errors call the settings of TranslationCorpusOptions: a command line passes its flags
/// (`{"--data", "--vocab-size", ...}`), so that a message names what the user set.
struct TranslationCorpusNames {
  std::string program = "translation corpus";  ///< names the caller in errors of a source too long
  std::string data = "data";                    ///< names TranslationCorpusOptions::data
  std::string vocab_size = "vocab_size";        ///< names vocab_size
  std::string max_length = "max_length";        ///< names max_length
  std::string max_tokens = "max_tokens";        ///< names max_tokens
};

/// The settings of the pipeline.
struct TranslationCorpusOptions {
  std::string data = "de-en";       ///< de-en | a folder of line-aligned {train,valid,test}.{SRC,TGT} files
  std::string source_lang = "de";   ///< SRC: the source files' suffix
  std::string target_lang = "en";   ///< TGT: the target files' suffix
  int64_t max_pairs = 0;            ///< keep the first N pairs of the training split (0: all)
  int64_t vocab_size = 8000;        ///< SentencePiece pieces, when one is trained
  int64_t max_length = 128;         ///< pieces per side of a training pair (longer pairs are left out)
  int64_t max_tokens = 4096;        ///< padded tokens per training batch: the longest pair must fit
  std::string eval_split = "valid";  ///< valid | test | train: the pairs evaluations translate
  int64_t eval_sentences = 0;       ///< keep the first N pairs of eval_split (0: all)
  /// The SentencePiece model to use instead of training one, called once the splits are read
  /// (unset: train one).
  std::function<SentencePiece()> load_sentencepiece;
  std::vector<std::string> save_sentencepiece;  ///< files to write the model to
  TranslationCorpusNames names;     ///< what errors call the settings above
  /// Told, as one line, of the training pairs left out (an empty side, a side too long); unset: not told.
  std::function<void(const std::string&)> on_left_out;
  /// Told, as one line, of the pairs, the vocabulary and the time preparing took; unset: not told.
  std::function<void(const std::string&)> on_progress;
};

/// The folder options.data names: a folder as it is, else a prepared data set (data/datasets.h).
/// Throws Error naming `names.data` for a file.
std::string translation_corpus_folder(const TranslationCorpusOptions& options);

/// The file of `split` (train, valid, test) in language `lang`.
std::string translation_split_path(const TranslationCorpusOptions& options, const std::string& split,
                                   const std::string& lang);

/// The SentencePiece model beside the translation checkpoint `checkpoint` (`CHECKPOINT.spm`), the
/// vocabulary the checkpoint was trained with. Throws Error naming `flag` when there is no such file,
/// and when it does not hold `vocab_size` pieces (the model setting `vocab_size_name`).
SentencePiece checkpoint_sentencepiece(const std::string& checkpoint, int64_t vocab_size, const std::string& flag,
                                       const std::string& vocab_size_name);

/// What a translation model works on.
struct TranslationCorpus {
  std::unique_ptr<SentencePiece> sp;  ///< the joint vocabulary
  EncodedPairs train;                 ///< the training pairs, filtered (Filter::Training)
  EncodedPairs eval;                  ///< every pair of the evaluation split (Filter::None)

  /// The sampler of the training batches for rank `rank` of `ranks` (data/batch.h): shuffled, at
  /// most `max_tokens` padded tokens each, pairs sorted by length in windows of 65,536.
  BatchSampler train_sampler(int64_t max_tokens, uint64_t seed, int64_t rank, int64_t ranks) const;
  /// The evaluation batches (rows of eval) in order, batched as train_sampler's; a pair longer than
  /// the budget is a batch alone.
  BatchList eval_batches(int64_t max_tokens) const;
};

/// Reads, tokenizes and encodes the corpus as the top of this file says, then writes the SentencePiece
/// model to each of options.save_sentencepiece. Throws Error naming `names.data` when no training
/// pair has two non-empty sides, `names.vocab_size` when SentencePiece cannot train vocab_size
/// pieces, `names.max_length` when every training pair is longer, `names.max_tokens` when the
/// longest training pair does not fit a batch, `names.program` for an evaluation source of more
/// than kMaxSourcePieces pieces, and the readers' errors.
TranslationCorpus prepare_translation_corpus(const TranslationCorpusOptions& options);

}  // namespace tapestry::data
