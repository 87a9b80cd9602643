#include "tests/testing.h"

#include <algorithm>
#include <fstream>

#include "data/classification.h"
#include "data/parallel_text.h"
#include "data/sentencepiece.h"

using namespace tapestry;
using namespace tapestry::testing;
using data::SentencePiece;
using data::SentencePieceOptions;
using data::SubwordModel;

namespace {

// `count` sentences of 3 to 10 words from a small vocabulary, lower case, single spaces.
std::vector<std::string> sentences(int64_t count, uint64_t seed) {
  static const std::vector<std::string> words = {
      "the", "a", "cat", "dog", "sat", "on", "mat", "ran", "fast", "slowly", "big", "small", "red", "blue",
      "house", "tree", "over", "under", "quickly", "jumped", "garden", "river", "walked", "towards", "old"};
  Generator gen(seed);
  const std::vector<int64_t> sizes = randint(3, 11, {count}, gen).to_vector<int64_t>();
  const std::vector<int64_t> picks =
      randint(0, static_cast<int64_t>(words.size()), {count * 10}, gen).to_vector<int64_t>();
  std::vector<std::string> lines;
  for (int64_t i = 0; i < count; ++i) {
    std::string line;
    for (int64_t w = 0; w < sizes[i]; ++w) line += (w ? " " : "") + words[picks[i * 10 + w]];
    lines.push_back(line);
  }
  return lines;
}

void write_file(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
  REQUIRE(out.good());
}

std::string write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  write_file(path, text);
  return path;
}

SentencePieceOptions small(SubwordModel model) {
  SentencePieceOptions options;
  options.vocab_size = 40;
  options.model = model;
  return options;
}

}  // namespace

TEST_CASE("data: SentencePiece trains, encodes and decodes round trip, with fixed special ids") {
  TempDir dir;
  const std::vector<std::string> lines = sentences(300, 1);
  const std::string text = write_lines(dir.file("text.txt"), lines);
  for (const SubwordModel model : {SubwordModel::Unigram, SubwordModel::Bpe}) {
    CAPTURE(static_cast<int>(model));
    const SentencePiece sp = SentencePiece::train({text}, small(model));
    CHECK(sp.vocab_size() == 40);
    CHECK(sp.id_to_piece(SentencePiece::kPadId) == "<pad>");
    CHECK(sp.id_to_piece(SentencePiece::kUnkId) == "<unk>");
    CHECK(sp.id_to_piece(SentencePiece::kBosId) == "<s>");
    CHECK(sp.id_to_piece(SentencePiece::kEosId) == "</s>");
    for (int64_t id = 0; id < sp.vocab_size(); ++id) CHECK(sp.piece_to_id(sp.id_to_piece(id)) == id);
    CHECK(sp.piece_to_id("no-such-piece") == SentencePiece::kUnkId);

    int64_t pieces = 0, characters = 0;
    for (const auto& line : lines) {
      const std::vector<int64_t> ids = sp.encode(line);
      for (const int64_t id : ids) {
        CHECK(id >= 4);  // the training text has no unknown characters
        CHECK(id < 40);
      }
      CHECK(sp.decode(ids) == line);
      pieces += static_cast<int64_t>(ids.size());
      characters += static_cast<int64_t>(line.size());
    }
    CHECK(pieces * 10 < characters * 9);  // some pieces are longer than one character

    // An unseen character becomes <unk>; special ids decode to nothing.
    const std::vector<int64_t> unknown = sp.encode("cat Z");
    CHECK(std::find(unknown.begin(), unknown.end(), SentencePiece::kUnkId) != unknown.end());
    std::vector<int64_t> framed = sp.encode("the cat");
    framed.insert(framed.begin(), SentencePiece::kBosId);
    framed.push_back(SentencePiece::kEosId);
    framed.push_back(SentencePiece::kPadId);
    CHECK(sp.decode(framed) == "the cat");
    CHECK(sp.encode("").empty());
  }
}

TEST_CASE("data: SentencePiece trained on sentences in memory equals the model trained on the same lines in a file") {
  TempDir dir;
  const std::vector<std::string> lines = sentences(300, 2);
  const std::string text = write_lines(dir.file("text.txt"), lines);
  for (const SubwordModel model : {SubwordModel::Unigram, SubwordModel::Bpe}) {
    CAPTURE(static_cast<int>(model));
    const SentencePiece from_file = SentencePiece::train({text}, small(model));
    const SentencePiece from_memory = SentencePiece::train_sentences(lines, small(model));
    REQUIRE(from_memory.vocab_size() == 40);
    for (int64_t id = 0; id < 40; ++id) CHECK(from_memory.id_to_piece(id) == from_file.id_to_piece(id));
    for (const std::string& line : sentences(20, 3)) CHECK(from_memory.encode(line) == from_file.encode(line));
  }
  check_error([] { SentencePiece::train_sentences({}, small(SubwordModel::Unigram)); },
              {"SentencePiece::train_sentences", "no sentences"});
  SentencePieceOptions too_many = small(SubwordModel::Unigram);
  too_many.vocab_size = 100000;
  check_error([&] { SentencePiece::train_sentences(lines, too_many); },
              {"SentencePiece::train_sentences", "300 sentences", "Vocabulary size"});
}

TEST_CASE("data: a saved SentencePiece model loads and encodes the same") {
  TempDir dir;
  const std::vector<std::string> lines = sentences(200, 2);
  const std::string text = write_lines(dir.file("text.txt"), lines);
  const SentencePiece sp = SentencePiece::train({text}, small(SubwordModel::Unigram));
  sp.save(dir.file("spm.model"));
  sp.save(dir.file("spm.model"));  // replaces the file
  CHECK(dir.list() == std::vector<std::string>{"spm.model", "text.txt"});  // no temporary left behind
  SentencePiece loaded = SentencePiece::load(dir.file("spm.model"));
  CHECK(loaded.vocab_size() == sp.vocab_size());
  for (const auto& line : sentences(50, 3)) CHECK(loaded.encode(line) == sp.encode(line));

  // Training is deterministic: the same text and options give the same model.
  const SentencePiece again = SentencePiece::train({text}, small(SubwordModel::Unigram));
  for (const auto& line : lines) CHECK(again.encode(line) == sp.encode(line));

  const SentencePiece moved = std::move(loaded);
  CHECK(moved.vocab_size() == 40);
  check_error([&] { loaded.vocab_size(); }, {"SentencePiece", "moved-from"});
}

TEST_CASE("data: SentencePiece failures become errors that name the file") {
  TempDir dir;
  const std::string text = write_lines(dir.file("text.txt"), sentences(200, 4));
  const std::string missing = dir.file("missing.txt");

  check_error([&] { SentencePiece::train({missing}, small(SubwordModel::Unigram)); },
              {"SentencePiece::train", missing, "does not exist"});
  check_error([&] { SentencePiece::train({text, missing}, small(SubwordModel::Bpe)); },
              {"SentencePiece::train", missing});
  check_error([&] { SentencePiece::train({dir.file("")}, small(SubwordModel::Unigram)); },
              {"SentencePiece::train", dir.file(""), "not a regular file"});
  write_file(dir.file("empty.txt"), "");
  check_error([&] { SentencePiece::train({dir.file("empty.txt")}, small(SubwordModel::Unigram)); },
              {"SentencePiece::train", dir.file("empty.txt")});

  // A vocabulary larger than the text can fill, and one smaller than its alphabet.
  SentencePieceOptions options = small(SubwordModel::Unigram);
  options.vocab_size = 5000;
  check_error([&] { SentencePiece::train({text}, options); },
              {"SentencePiece::train", text, "Vocabulary size too high"});
  options.model = SubwordModel::Bpe;
  check_error([&] { SentencePiece::train({text}, options); },
              {"SentencePiece::train", text, "Vocabulary size too high"});
  options.vocab_size = 10;
  check_error([&] { SentencePiece::train({text}, options); },
              {"SentencePiece::train", text, "smaller than required_chars"});

  // Arguments checked before SentencePiece runs.
  check_error([&] { SentencePiece::train({}, small(SubwordModel::Unigram)); },
              {"SentencePiece::train", "no text files"});
  check_error([&] { SentencePiece::train({dir.file("a,b.txt")}, small(SubwordModel::Unigram)); },
              {"SentencePiece::train", "a,b.txt", "comma"});
  options = small(SubwordModel::Unigram);
  options.vocab_size = 4;
  check_error([&] { SentencePiece::train({text}, options); }, {"SentencePiece::train", "vocab_size", "got 4"});
  options = small(SubwordModel::Unigram);
  options.character_coverage = 1.5;
  check_error([&] { SentencePiece::train({text}, options); }, {"SentencePiece::train", "character_coverage", "1.5"});
  options = small(SubwordModel::Unigram);
  options.threads = 0;
  check_error([&] { SentencePiece::train({text}, options); }, {"SentencePiece::train", "threads", "got 0"});

  // Model files that are missing, empty, truncated or not models at all.
  check_error([&] { SentencePiece::load(dir.file("none.model")); },
              {"SentencePiece::load", dir.file("none.model"), "does not exist"});
  write_file(dir.file("empty.model"), "");
  check_error([&] { SentencePiece::load(dir.file("empty.model")); }, {"SentencePiece::load", dir.file("empty.model")});
  write_file(dir.file("text.model"), "this is not a model\n");
  check_error([&] { SentencePiece::load(dir.file("text.model")); }, {"SentencePiece::load", dir.file("text.model")});
  const SentencePiece sp = SentencePiece::train({text}, small(SubwordModel::Unigram));
  sp.save(dir.file("good.model"));
  std::ifstream in(dir.file("good.model"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_file(dir.file("cut.model"), bytes.substr(0, bytes.size() / 2));
  check_error([&] { SentencePiece::load(dir.file("cut.model")); }, {"SentencePiece::load", dir.file("cut.model")});
  check_error([&] { SentencePiece::load(dir.file("")); }, {"SentencePiece::load", "not a regular file"});

  check_error([&] { sp.save(dir.file("no/such/dir/spm.model")); }, {"SentencePiece::save", "no/such/dir/spm.model"});
  check_error([&] { sp.decode({5, 40}); }, {"SentencePiece::decode", "id 40 (position 1)", "[0, 40)"});
  check_error([&] { sp.decode({-1}); }, {"SentencePiece::decode", "id -1"});
  check_error([&] { sp.id_to_piece(40); }, {"SentencePiece::id_to_piece", "id 40"});
  check_error([&] { data::parse_subword_model("wordpiece"); }, {"parse_subword_model", "wordpiece"});
  CHECK(data::parse_subword_model("bpe") == SubwordModel::Bpe);
  CHECK(data::parse_subword_model("unigram") == SubwordModel::Unigram);
}

TEST_CASE("data: encode_pairs gives eos, bos and the references; training leaves out empty and long pairs") {
  const std::vector<std::string> lines = sentences(200, 11);
  const SentencePiece sp = SentencePiece::train_sentences(lines, small(SubwordModel::Unigram));
  std::vector<data::SentencePair> pairs = {{lines[0], lines[1]}, {"", lines[2]}, {lines[3], ""},
                                           {lines[4] + " " + lines[5] + " " + lines[6], lines[7]}};
  const std::vector<int64_t> source = sp.encode(lines[0]), target = sp.encode(lines[1]);
  const int64_t max_length = int64_t(std::max(source.size(), target.size()));
  REQUIRE(int64_t(sp.encode(pairs[3].source).size()) > max_length);

  const data::EncodedPairs train = data::encode_pairs(sp, pairs, data::Filter::Training, max_length);
  REQUIRE(train.size() == 1);
  CHECK(train.empty == 2);
  CHECK(train.too_long == 1);
  std::vector<int64_t> expected = source;
  expected.push_back(SentencePiece::kEosId);
  CHECK(train.source[0] == expected);
  expected = {SentencePiece::kBosId};
  expected.insert(expected.end(), target.begin(), target.end());
  CHECK(train.target_in[0] == expected);
  expected = target;
  expected.push_back(SentencePiece::kEosId);
  CHECK(train.target_out[0] == expected);
  CHECK(train.references[0] == lines[1]);
  CHECK(train.lengths[0] == max_length + 1);

  // Evaluation keeps every pair: an empty reference still counts in BLEU.
  const data::EncodedPairs eval = data::encode_pairs(sp, pairs, data::Filter::None);
  REQUIRE(eval.size() == 4);
  CHECK(eval.source[1] == std::vector<int64_t>{SentencePiece::kEosId});
  CHECK(eval.target_out[2] == std::vector<int64_t>{SentencePiece::kEosId});
  CHECK(eval.references[2].empty());
  CHECK(eval.empty == 0);
  check_error([&] { data::encode_pairs(sp, pairs, data::Filter::Training, 0); },
              {"encode_pairs", "max_length must be >= 1"});
}

TEST_CASE("data: encode_documents cuts each document of a split and leaves out the ones of no piece") {
  const std::vector<std::string> lines = sentences(200, 12);
  const SentencePiece sp = SentencePiece::train_sentences(lines, small(SubwordModel::Unigram));
  data::ClassifiedDocuments corpus;
  corpus.classes = {"a", "b"};
  corpus.root = "/corpus";
  corpus.documents = {{"/corpus/a/1", lines[0] + "\n" + lines[1], 0},
                      {"/corpus/a/2", "", 0},
                      {"/corpus/b/1", lines[2], 1},
                      {"/corpus/b/2", lines[3], 1}};
  data::Split split;
  split.train = {0, 1};
  split.test = {2};  // document 3 is in no split
  const int64_t max_length = 4;
  REQUIRE(int64_t(sp.encode(corpus.documents[0].text).size()) > max_length);

  std::vector<std::pair<size_t, size_t>> counts;  // the progress calls: one per document of the split
  const data::EncodedDocuments encoded = data::encode_documents(
      sp, corpus, split, max_length, [&](size_t done, size_t total) { counts.emplace_back(done, total); });
  CHECK(counts == std::vector<std::pair<size_t, size_t>>{{1, 3}, {2, 3}, {3, 3}});  // the empty one counts
  REQUIRE(encoded.tokens.size() == 4);
  std::vector<int64_t> first = sp.encode(corpus.documents[0].text);
  first.resize(size_t(max_length));
  CHECK(encoded.tokens[0] == first);
  CHECK(encoded.tokens[1].empty());
  CHECK(encoded.tokens[3].empty());
  CHECK(encoded.split.train == std::vector<int64_t>{0});
  CHECK(encoded.split.valid.empty());
  CHECK(encoded.split.test == std::vector<int64_t>{2});
  CHECK(encoded.empty == std::vector<std::string>{"/corpus/a/2"});

  check_error([&] { data::encode_documents(sp, corpus, split, 0); }, {"encode_documents", "max_length", "got 0"});
  split.valid = {4};
  check_error([&] { data::encode_documents(sp, corpus, split, max_length); },
              {"encode_documents", "document 4 is outside the corpus of 4"});
}

TEST_CASE("data: sample_lines takes whole training documents in hash order while the budget lasts") {
  data::ClassifiedDocuments corpus;
  corpus.classes = {"a"};
  corpus.root = "/corpus";
  for (int i = 0; i < 6; ++i)
    corpus.documents.push_back({"/corpus/a/" + std::to_string(i), "first " + std::to_string(i) + "\nsecond", 0});
  const std::vector<std::string> keys = data::document_keys(corpus);
  const std::vector<int64_t> train = {0, 2, 3, 5};
  std::vector<std::pair<uint64_t, int64_t>> order;
  for (const int64_t i : train) order.push_back({data::fnv1a(keys[size_t(i)]), i});
  std::sort(order.begin(), order.end());

  const std::vector<std::string> all = data::sample_lines(corpus, train, 1 << 20);
  REQUIRE(all.size() == 8);  // two lines per document
  for (size_t j = 0; j < order.size(); ++j) {
    CHECK(all[2 * j] == "first " + std::to_string(order[j].second));
    CHECK(all[2 * j + 1] == "second");
  }
  // Each document is 14 bytes and a newline: 31 bytes hold two, and a budget below one still takes one.
  CHECK(data::sample_lines(corpus, train, 31).size() == 4);
  CHECK(data::sample_lines(corpus, train, 1) == std::vector<std::string>{all[0], all[1]});
  check_error([&] { data::sample_lines(corpus, {6}, 100); }, {"sample_lines", "document 6 is outside the corpus"});
}
