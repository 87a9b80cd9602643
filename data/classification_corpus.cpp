#include "data/classification_corpus.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "data/datasets.h"
#include "data/sentencepiece.h"

namespace tapestry::data {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kDocumentWindow = 256;  // documents sorted by length together (TokenizedCorpus::train_sampler)

ClassifiedDocuments read_named_corpus(const ClassificationCorpusOptions& o) {
  const bool two_way = o.data == "spam-assassin-2way";
  if (o.data == "brown") return read_class_list(dataset_directory("brown") + "/labels.tsv");
  if (o.data == "spam-assassin" || two_way) {
    ClassifiedDocuments corpus = read_class_folders(dataset_directory("spam-assassin"));
    if (two_way) {
      const std::vector<std::string> groups = corpus.classes;
      corpus.classes = {"ham", "spam"};
      for (Document& d : corpus.documents) d.label = groups[size_t(d.label)].rfind("spam", 0) == 0 ? 1 : 0;
    }
    return corpus;
  }
  std::error_code error;
  const fs::file_status status = fs::status(o.data, error);
  TP_CHECK(fs::exists(status), o.names.data, "'", o.data,
           "' is neither brown, spam-assassin, spam-assassin-2way nor an existing folder or list file");
  const bool folders =
      o.layout == CorpusLayout::Folders || (o.layout == CorpusLayout::Auto && fs::is_directory(status));
  return folders ? read_class_folders(o.data) : read_class_list(o.data);
}

SentencePiece train_sentencepiece(const ClassifiedDocuments& corpus, const Split& split,
                                  const ClassificationCorpusOptions& o) {
  SentencePieceOptions spm;
  spm.vocab_size = o.vocab_size;
  // E-mails carry stray bytes and rare symbols: the rarest characters become <unk>.
  spm.character_coverage = 0.9995;
  try {
    return SentencePiece::train_sentences(sample_lines(corpus, split.train, kSentencePieceTextBytes), spm);
  } catch (const Error& e) {
    fail(o.names.vocab_size, "SentencePiece could not train ", o.vocab_size, " pieces on the training split (",
         split.train.size(), " documents); a smaller ", o.names.vocab_size, " may fit: ", e.what());
  }
}

// printf into a string, for the callbacks' lines.
template <typename... Args>
std::string format(const char* pattern, Args... args) {
  const int n = std::snprintf(nullptr, 0, pattern, args...);
  std::string out(size_t(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), pattern, args...);
  out.pop_back();
  return out;
}

}  // namespace

CorpusLayout parse_corpus_layout(const std::string& name) {
  if (name == "auto") return CorpusLayout::Auto;
  if (name == "folders") return CorpusLayout::Folders;
  TP_CHECK(name == "list", "parse_corpus_layout", "'", name, "' is not a layout: auto, folders or list");
  return CorpusLayout::List;
}

EvalSplit parse_eval_split(const std::string& name) {
  if (name == "valid") return EvalSplit::Valid;
  TP_CHECK(name == "test", "parse_eval_split", "'", name, "' is not a held-out split: valid or test");
  return EvalSplit::Test;
}

std::string to_string(EvalSplit split) { return split == EvalSplit::Test ? "test" : "valid"; }

ClassifiedDocuments read_classification_corpus(const ClassificationCorpusOptions& o) {
  ClassifiedDocuments corpus = read_named_corpus(o);
  if (o.on_skipped)
    for (const std::string& s : corpus.skipped)
      if (s.find(": hidden") == std::string::npos) o.on_skipped("skipped " + s);
  return corpus;
}

std::vector<std::vector<int64_t>> hash_order(const ClassifiedDocuments& corpus, int64_t max_per_class) {
  std::vector<int64_t> labels;
  for (const Document& d : corpus.documents) labels.push_back(d.label);
  return hash_order(document_keys(corpus), labels, int64_t(corpus.classes.size()), max_per_class);
}

Split split_corpus(const ClassifiedDocuments& corpus, const ClassificationCorpusOptions& o) {
  return stratified_split(hash_order(corpus, o.max_per_class), o.valid_fraction, o.test_fraction);
}

std::vector<int64_t> TokenizedCorpus::lengths(const std::vector<int64_t>& documents) const {
  std::vector<int64_t> out;
  for (const int64_t i : documents) out.push_back(int64_t(tokens.at(size_t(i)).size()));
  return out;
}

BatchList TokenizedCorpus::batches(const std::vector<int64_t>& documents, const BatchingOptions& batching) const {
  BatchList out;
  for (const std::vector<int64_t>& rows : bucket_batches(lengths(documents), batching)) {
    std::vector<int64_t> batch;
    for (const int64_t r : rows) batch.push_back(documents[size_t(r)]);
    out.push_back(std::move(batch));
  }
  return out;
}

BatchSampler TokenizedCorpus::train_sampler(int64_t batch_tokens, uint64_t seed, int64_t rank, int64_t ranks) const {
  return BatchSampler(lengths(split.train), {batch_tokens, /*max_batch=*/0, kDocumentWindow}, seed, rank, ranks);
}

BatchList TokenizedCorpus::eval_batches(int64_t batch_tokens) const {
  return batches(held_out(), {batch_tokens, /*max_batch=*/0, kDocumentWindow, Shuffle::No});
}

TokenizedCorpus tokenize_corpus(const ClassifiedDocuments& corpus, const ClassificationCorpusOptions& o,
                                const std::optional<Split>& given) {
  const Split split = given ? *given : split_corpus(corpus, o);
  TokenizedCorpus t;
  t.classes = corpus.classes;
  t.eval_split = o.eval_split;
  t.skipped_entries = int64_t(corpus.skipped.size());
  TP_CHECK(!split.train.empty(), o.names.data, "'", o.data, "' leaves no training document");
  TP_CHECK(t.classes.size() >= 2, o.names.data, "'", o.data, "' has one class (", t.classes.empty() ? "" : t.classes[0],
           "): classifying needs at least two");

  const auto start = std::chrono::steady_clock::now();
  if (o.on_progress)  // tokenizing a large corpus takes a while: say so before it starts
    o.on_progress(o.sentencepiece.empty()
                      ? format("training %lld SentencePiece pieces on %zu training documents, then tokenizing %zu "
                               "documents...",
                               (long long)o.vocab_size, split.train.size(), corpus.documents.size())
                      : format("tokenizing %zu documents with %s...", corpus.documents.size(), o.sentencepiece.c_str()));
  const SentencePiece sp =
      !o.sentencepiece.empty() ? SentencePiece::load(o.sentencepiece) : train_sentencepiece(corpus, split, o);
  for (const std::string& path : o.save_sentencepiece) sp.save(path);
  t.vocabulary = sp.vocab_size();
  t.vocabulary_fingerprint = sp.fingerprint();

  // A count every few seconds while encoding (minutes on a large corpus), none on a small one.
  auto last_count = std::chrono::steady_clock::now();
  const auto count = [&](size_t done, size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (!o.on_progress || done == total || now - last_count < std::chrono::seconds(5)) return;
    last_count = now;
    o.on_progress(format("tokenized %zu of %zu documents...", done, total));
  };
  EncodedDocuments encoded = encode_documents(sp, corpus, split, o.max_length, count);
  t.tokens = std::move(encoded.tokens);
  t.split = std::move(encoded.split);
  for (const Document& d : corpus.documents) t.labels.push_back(d.label);
  t.empty_documents = int64_t(encoded.empty.size());
  if (!encoded.empty.empty() && o.on_left_out)
    o.on_left_out(format("left out %zu document(s) with no tokens, e.g. %s", encoded.empty.size(),
                         encoded.empty.front().c_str()));
  TP_CHECK(!t.split.train.empty(), o.names.data, "'", o.data, "' has no training document with a token");

  const std::string held_out = to_string(o.eval_split);
  TP_CHECK(!t.held_out().empty(), o.names.eval_split, "the ", held_out, " split of '", o.data, "' is empty (raise ",
           o.eval_split == EvalSplit::Test ? o.names.test_fraction : o.names.valid_fraction,
           ", or use more documents)");

  if (o.on_progress)
    o.on_progress(format("%zu / %zu / %zu documents (train / valid / test), %lld pieces, tokenized in %.1f s",
                         t.split.train.size(), t.split.valid.size(), t.split.test.size(), (long long)t.vocabulary,
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));

  std::vector<int64_t> counts(t.classes.size(), 0);
  for (const int64_t i : t.split.train) {
    ++counts[size_t(t.labels[size_t(i)])];
    t.train_tokens += int64_t(t.tokens[size_t(i)].size());
  }
  // A class nothing trains on (its documents all empty, or all held out) cannot be learned, and
  // its absence would inflate the accuracy.
  for (size_t c = 0; c < counts.size(); ++c)
    TP_CHECK(counts[c] > 0, o.names.data, "'", o.data, "': class '", t.classes[c], "' has no training document ",
             "with a token (its documents are empty or all held out)");
  const int64_t majority = int64_t(std::max_element(counts.begin(), counts.end()) - counts.begin());
  int64_t hits = 0;
  for (const int64_t i : t.held_out()) hits += t.labels[size_t(i)] == majority;
  t.majority_accuracy = double(hits) / double(t.held_out().size());
  return t;
}

}  // namespace tapestry::data
