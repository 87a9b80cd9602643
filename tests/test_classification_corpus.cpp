// The classification corpus pipeline (data/classification_corpus.h) on small corpora written here:
// reading by name or path, the hash-ordered split, SentencePiece trained or read, the tokenized
// splits with the majority-class floor, what the callbacks hear, and each bad input refused with a
// message that names the setting as the caller calls it.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "data/classification_corpus.h"
#include "data/sentencepiece.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::data;
using namespace tapestry::testing;

namespace {

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// `per_class` documents in each class folder of `root`: three lines of eight of its class's words
// (the classes' vocabularies are disjoint), each document in an order of its own.
void write_classes(const std::string& root, const std::vector<std::string>& classes, int per_class) {
  const std::vector<std::vector<std::string>> words = {{"river", "stone", "water", "bridge", "fish", "boat"},
                                                       {"market", "price", "trade", "coin", "buyer", "seller"},
                                                       {"planet", "orbit", "rocket", "star", "comet", "moon"}};
  for (size_t c = 0; c < classes.size(); ++c)
    for (int d = 0; d < per_class; ++d) {
      std::ostringstream text;
      for (int line = 0; line < 3; ++line) {
        for (int i = 0; i < 8; ++i) text << words[c % 3][size_t((d + line + i * (line + 1)) % 6)] << ' ';
        text << ".\n";
      }
      write(root + "/" + classes[c] + "/" + std::to_string(d) + ".txt", text.str());
    }
}

ClassificationCorpusOptions small(const std::string& data) {
  ClassificationCorpusOptions o;
  o.data = data;
  o.vocab_size = 30;
  o.max_length = 16;
  o.valid_fraction = o.test_fraction = 0.2;
  return o;
}

// $TAPESTRY_DATA set to a folder for the scope, restored after.
class DataDirectory {
 public:
  explicit DataDirectory(const std::string& root) {
    if (const char* old = std::getenv("TAPESTRY_DATA")) saved_ = old, had_ = true;
    ::setenv("TAPESTRY_DATA", root.c_str(), 1);
  }
  ~DataDirectory() { had_ ? void(::setenv("TAPESTRY_DATA", saved_.c_str(), 1)) : void(::unsetenv("TAPESTRY_DATA")); }
  DataDirectory(const DataDirectory&) = delete;
  DataDirectory& operator=(const DataDirectory&) = delete;

 private:
  std::string saved_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("classification corpus: a folder per class, split by hash, tokenized with the majority floor") {
  TempDir dir;
  write_classes(dir.file("c"), {"rivers", "trade", "space"}, 10);
  write(dir.file("c/README"), "not a class");
  write(dir.file("c/rivers/.hidden"), "editor state");
  ClassificationCorpusOptions o = small(dir.file("c"));
  std::vector<std::string> heard;
  o.on_skipped = o.on_progress = [&](const std::string& line) { heard.push_back(line); };

  const ClassifiedDocuments corpus = read_classification_corpus(o);
  CHECK(corpus.classes == std::vector<std::string>{"rivers", "space", "trade"});
  CHECK(corpus.documents.size() == 30);
  CHECK(corpus.skipped.size() == 2);
  REQUIRE(heard.size() == 1);  // the hidden file is not told
  CHECK(heard[0] == "skipped " + dir.file("c/README") + ": a file outside the class folders");

  const Split split = split_corpus(corpus, o);
  const Split by_hand = stratified_split(hash_order(corpus, 0), 0.2, 0.2);
  CHECK(split.train == by_hand.train);
  CHECK(split.valid == by_hand.valid);
  CHECK(split.test == by_hand.test);
  CHECK(split.train.size() == 18);
  CHECK(split.valid.size() == 6);
  CHECK(split.test.size() == 6);
  for (const auto& cls : hash_order(corpus, 4)) CHECK(cls.size() == 4);

  o.save_sentencepiece = {dir.file("spm.model")};
  const TokenizedCorpus t = tokenize_corpus(corpus, o);
  CHECK(heard.size() == 3);  // what it is about to do, then what it did
  CHECK(heard[1] == "training 30 SentencePiece pieces on 18 training documents, then tokenizing 30 documents...");
  CHECK(heard[2].find("18 / 6 / 6 documents (train / valid / test), 30 pieces") == 0);
  CHECK(t.classes == corpus.classes);
  CHECK(t.vocabulary == 30);
  CHECK(t.split.train == split.train);
  CHECK(t.empty_documents == 0);
  CHECK(t.skipped_entries == 2);
  int64_t train_tokens = 0;
  for (const int64_t i : t.split.train) {
    CHECK(t.labels[size_t(i)] == corpus.documents[size_t(i)].label);
    CHECK(t.tokens[size_t(i)].size() == 16);  // every document is longer than max_length
    train_tokens += int64_t(t.tokens[size_t(i)].size());
  }
  CHECK(t.train_tokens == train_tokens);
  CHECK(&t.held_out() == &t.split.valid);
  CHECK(t.majority_accuracy == doctest::Approx(1.0 / 3));  // 6 per class in train, 2 per class held out
  CHECK(t.lengths(t.split.valid) == std::vector<int64_t>(6, 16));
  BatchingOptions batching;
  batching.max_tokens = 32;
  batching.shuffle = Shuffle::No;
  const BatchList batches = t.batches(t.split.valid, batching);
  REQUIRE(batches.size() == 3);
  for (const auto& b : batches) CHECK(b.size() == 2);
  CHECK(batches[0][0] == t.split.valid[0]);  // document indices, not rows

  // The model written is the one used: reading it back tokenizes alike, with no training.
  ClassificationCorpusOptions read = o;
  read.vocab_size = 1 << 20;  // would not train
  read.sentencepiece = dir.file("spm.model");
  read.save_sentencepiece.clear();
  read.eval_split = EvalSplit::Test;
  const TokenizedCorpus again = tokenize_corpus(corpus, read);
  CHECK(again.tokens == t.tokens);
  CHECK(&again.held_out() == &again.split.test);

  // A split of one's own: a fold.
  const TokenizedCorpus fold = tokenize_corpus(corpus, read, stratified_fold(hash_order(corpus, 0), 5, 1));
  CHECK(fold.split.train.size() == 24);
  CHECK(fold.split.test.size() == 6);
  CHECK(fold.split.valid.empty());
}

TEST_CASE("classification corpus: a list file; the layout chosen or forced; names of prepared sets") {
  TempDir dir;
  write_classes(dir.file("c"), {"rivers", "trade"}, 3);
  write(dir.file("c/labels.tsv"), "rivers/0.txt\tR\nrivers/1.txt\tR\ntrade/0.txt\tT\ntrade/2.txt\tT\n");
  ClassificationCorpusOptions o = small(dir.file("c/labels.tsv"));
  CHECK(read_classification_corpus(o).documents.size() == 4);
  o.layout = CorpusLayout::List;
  CHECK(read_classification_corpus(o).classes == std::vector<std::string>{"R", "T"});
  o.layout = CorpusLayout::Folders;
  check_error([&] { read_classification_corpus(o); }, {"labels.tsv"});
  o.data = dir.file("c");
  o.layout = CorpusLayout::Auto;
  CHECK(read_classification_corpus(o).documents.size() == 6);

  CHECK(parse_corpus_layout("auto") == CorpusLayout::Auto);
  CHECK(parse_corpus_layout("folders") == CorpusLayout::Folders);
  CHECK(parse_corpus_layout("list") == CorpusLayout::List);
  check_error([] { parse_corpus_layout("tree"); }, {"parse_corpus_layout", "'tree'", "auto, folders or list"});
  CHECK(parse_eval_split("valid") == EvalSplit::Valid);
  CHECK(parse_eval_split("test") == EvalSplit::Test);
  CHECK(to_string(EvalSplit::Test) == "test");
  check_error([] { parse_eval_split("train"); }, {"parse_eval_split", "'train'", "valid or test"});

  // spam-assassin-2way: the groups whose names start with "spam" are spam, the rest ham.
  DataDirectory data(dir.file("sets"));
  write(dir.file("sets/spam-assassin/.stamp"), "test\n");
  write(dir.file("sets/spam-assassin/easy-ham-1/1.eml"), "hello");
  write(dir.file("sets/spam-assassin/hard-ham-1/1.eml"), "meeting");
  write(dir.file("sets/spam-assassin/spam-2/1.eml"), "buy now");
  o.data = "spam-assassin";
  CHECK(read_classification_corpus(o).classes.size() == 3);
  o.data = "spam-assassin-2way";
  const ClassifiedDocuments two = read_classification_corpus(o);
  CHECK(two.classes == std::vector<std::string>{"ham", "spam"});
  REQUIRE(two.documents.size() == 3);
  CHECK(two.documents[0].label == 0);
  CHECK(two.documents[1].label == 0);
  CHECK(two.documents[2].label == 1);
  o.data = "brown";
  check_error([&] { read_classification_corpus(o); }, {"brown", "make data"});
}

TEST_CASE("classification corpus: bad input names the setting as the caller calls it") {
  TempDir dir;
  write_classes(dir.file("c"), {"rivers", "trade"}, 10);
  ClassificationCorpusOptions o = small(dir.file("nothing"));
  check_error([&] { read_classification_corpus(o); }, {"data: '", "nothing", "spam-assassin-2way"});
  o.names = {"--data", "--vocab-size", "--eval-split", "--valid-fraction", "--test-fraction"};
  check_error([&] { read_classification_corpus(o); }, {"--data: '", "nothing", "folder or list file"});

  o.data = dir.file("c");
  const ClassifiedDocuments corpus = read_classification_corpus(o);
  SUBCASE("a vocabulary too large for the text") {
    o.vocab_size = 5000;
    check_error([&] { tokenize_corpus(corpus, o); }, {"--vocab-size: ", "5000", "a smaller --vocab-size"});
  }
  SUBCASE("an empty held-out split names the fraction to raise") {
    o.test_fraction = 0;
    o.eval_split = EvalSplit::Test;
    check_error([&] { tokenize_corpus(corpus, o); }, {"--eval-split: ", "the test split", "raise --test-fraction"});
    o.valid_fraction = 0;
    o.eval_split = EvalSplit::Valid;
    check_error([&] { tokenize_corpus(corpus, o); }, {"--eval-split: ", "the valid split", "raise --valid-fraction"});
  }
  SUBCASE("no training document") {
    Split none;
    none.valid = {0, 10};
    check_error([&] { tokenize_corpus(corpus, o, none); }, {"--data: ", "leaves no training document"});
  }
  SUBCASE("documents of no piece are left out and told; none left to train on is an error") {
    write(dir.file("c/trade/blank.txt"), " \n\t\n");
    o.sentencepiece = dir.file("spm.model");
    o.save_sentencepiece.clear();
    ClassificationCorpusOptions train = o;
    train.sentencepiece.clear();
    train.save_sentencepiece = {o.sentencepiece};
    tokenize_corpus(corpus, train);  // writes the model read below
    const ClassifiedDocuments with_blank = read_classification_corpus(o);
    std::vector<std::string> told;
    o.on_left_out = [&](const std::string& line) { told.push_back(line); };
    const TokenizedCorpus t = tokenize_corpus(with_blank, o);
    CHECK(t.empty_documents == 1);
    REQUIRE(told.size() == 1);
    CHECK(told[0] == "left out 1 document(s) with no tokens, e.g. " + dir.file("c/trade/blank.txt"));
    Split blank_only;
    for (size_t i = 0; i < with_blank.documents.size(); ++i)
      if (with_blank.documents[i].path == dir.file("c/trade/blank.txt")) blank_only.train = {int64_t(i)};
    blank_only.valid = t.split.valid;
    check_error([&] { tokenize_corpus(with_blank, o, blank_only); }, {"--data: ", "no training document with a token"});
  }
  SUBCASE("a missing SentencePiece model") {
    o.sentencepiece = dir.file("gone.spm");
    check_error([&] { tokenize_corpus(corpus, o); }, {"gone.spm"});
  }
}
