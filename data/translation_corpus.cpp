#include "data/translation_corpus.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "data/datasets.h"
#include "data/text_lines.h"

namespace tapestry::data {

namespace fs = std::filesystem;

void check_source_pieces(int64_t pieces, const std::string& op, const std::string& where, int64_t line) {
  TP_CHECK(pieces <= kMaxSourcePieces, op, where, ", line ", line, ": ", pieces, " pieces, more than the limit of ",
           kMaxSourcePieces, " for one sentence (split it into sentences)");
}

SourceLines encode_source_lines(const SentencePiece& sp, const std::vector<std::string>& lines, int64_t first_line,
                                const std::string& op, const std::string& program) {
  SourceLines out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const int64_t line = first_line + int64_t(i);
    const size_t bad = invalid_utf8_offset(lines[i]);
    TP_CHECK(bad == std::string_view::npos, op, "line ", line, " of the input is not valid UTF-8 (byte ", bad + 1, ")");
    TP_CHECK(lines[i].size() <= kMaxLineBytes, op, "line ", line, " of the input is longer than the limit of ",
             kMaxLineBytes, " bytes");
    if (lines[i].empty()) continue;
    std::vector<int64_t> ids = sp.encode(lines[i]);
    check_source_pieces(int64_t(ids.size()), program, "the input", line);
    ids.push_back(SentencePiece::kEosId);
    out.sources.push_back(std::move(ids));
    out.lines.push_back(i);
  }
  return out;
}

std::string translation_corpus_folder(const TranslationCorpusOptions& o) {
  std::error_code error;
  if (fs::is_directory(o.data, error)) return o.data;
  TP_CHECK(!fs::exists(o.data, error), o.names.data, "'", o.data, "' is a file; give de-en or a folder of line-aligned ",
           "{train,valid,test}.", o.source_lang, " and .", o.target_lang, " files");
  return dataset_directory(o.data);
}

std::string translation_split_path(const TranslationCorpusOptions& o, const std::string& split,
                                   const std::string& lang) {
  return translation_corpus_folder(o) + "/" + split + "." + lang;
}

namespace {

std::vector<SentencePair> read_split(const TranslationCorpusOptions& o, const std::string& split) {
  return read_parallel_text(translation_split_path(o, split, o.source_lang), translation_split_path(o, split, o.target_lang));
}

// On both sides of the pairs that will be trained on.
SentencePiece train_sentencepiece(const TranslationCorpusOptions& o, const std::vector<SentencePair>& train) {
  std::vector<std::string> text;
  for (const SentencePair& pair : train)
    if (!pair.source.empty() && !pair.target.empty()) text.push_back(pair.source), text.push_back(pair.target);
  TP_CHECK(!text.empty(), o.names.data, "the training split of '", o.data, "' has no pair with both sides non-empty");
  SentencePieceOptions spm;
  spm.vocab_size = o.vocab_size;
  try {
    return SentencePiece::train_sentences(text, spm);
  } catch (const Error& e) {
    fail(o.names.vocab_size, "SentencePiece could not train ", o.vocab_size, " pieces on the training split (",
         text.size() / 2, " pairs); a smaller ", o.names.vocab_size, " may fit: ", e.what());
  }
}

}  // namespace

TranslationCorpus prepare_translation_corpus(const TranslationCorpusOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<SentencePair> train = read_split(o, "train");
  if (o.max_pairs > 0 && int64_t(train.size()) > o.max_pairs) train.resize(size_t(o.max_pairs));
  std::vector<SentencePair> eval = o.eval_split == "train" ? train : read_split(o, o.eval_split);
  if (o.eval_sentences > 0 && int64_t(eval.size()) > o.eval_sentences) eval.resize(size_t(o.eval_sentences));

  TranslationCorpus c;
  c.sp = std::make_unique<SentencePiece>(o.load_sentencepiece ? o.load_sentencepiece() : train_sentencepiece(o, train));
  for (const std::string& path : o.save_sentencepiece) c.sp->save(path);

  c.train = encode_pairs(*c.sp, train, Filter::Training, o.max_length);
  TP_CHECK(c.train.empty < int64_t(train.size()), o.names.data, "the training split of '", o.data,
           "' has no pair with both sides non-empty");
  TP_CHECK(c.train.size() > 0, o.names.max_length, "every training pair is longer than ", o.max_length, " pieces");
  c.eval = encode_pairs(*c.sp, eval, Filter::None);
  // Evaluation translates every pair: one too long to translate is refused before any work.
  for (size_t i = 0; i < c.eval.source.size(); ++i)
    check_source_pieces(int64_t(c.eval.source[i].size()) - 1, o.names.program,
                        translation_split_path(o, o.eval_split, o.source_lang), int64_t(i) + 1);
  const int64_t longest = *std::max_element(c.train.lengths.begin(), c.train.lengths.end());
  TP_CHECK(longest <= o.max_tokens, o.names.max_tokens, "a batch of ", o.max_tokens, " tokens cannot hold the longest ",
           "training pair (", longest, " pieces with eos); give ", o.names.max_tokens, " ", longest, " or more, or a ",
           o.names.max_length, " below ", longest - 1);
  if (o.on_left_out && c.train.empty > 0)
    o.on_left_out("left out " + std::to_string(c.train.empty) + " training pair(s) with an empty side");
  if (o.on_left_out && c.train.too_long > 0)
    o.on_left_out("left out " + std::to_string(c.train.too_long) + " training pair(s) longer than " +
                  o.names.max_length + " " + std::to_string(o.max_length) + " pieces");
  if (o.on_progress) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.1f",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    o.on_progress(std::to_string(c.train.size()) + " training pairs, " + std::to_string(c.eval.size()) + " " +
                  o.eval_split + " pairs, " + std::to_string(c.sp->vocab_size()) + " pieces, prepared in " + seconds +
                  " s");
  }
  return c;
}

SentencePiece checkpoint_sentencepiece(const std::string& checkpoint, int64_t vocab_size, const std::string& flag,
                                       const std::string& vocab_size_name) {
  const std::string path = checkpoint + ".spm";
  std::error_code error;
  TP_CHECK(fs::is_regular_file(path, error), flag, "'", checkpoint, "' has no SentencePiece model beside it (expected '",
           path, "'): a translation checkpoint needs its vocabulary");
  SentencePiece sp = SentencePiece::load(path);
  TP_CHECK(sp.vocab_size() == vocab_size, flag, "'", path, "' holds ", sp.vocab_size(), " pieces, but the model has ",
           vocab_size_name, " ", vocab_size, ": it is not this checkpoint's vocabulary");
  return sp;
}

namespace {

constexpr int64_t kTranslationWindow = 64 * 1024;  // training pairs sorted together

}  // namespace

BatchSampler TranslationCorpus::train_sampler(int64_t max_tokens, uint64_t seed, int64_t rank, int64_t ranks) const {
  return BatchSampler(train.lengths, {max_tokens, /*max_batch=*/0, kTranslationWindow}, seed, rank, ranks);
}

BatchList TranslationCorpus::eval_batches(int64_t max_tokens) const {
  return bucket_batches(eval.lengths, {max_tokens, /*max_batch=*/0, kTranslationWindow, Shuffle::No, Oversize::Alone});
}

}  // namespace tapestry::data
