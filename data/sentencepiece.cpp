#include "data/sentencepiece.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "core/error.h"

namespace tapestry::data {

struct SentencePiece::Impl {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

// 'a', 'b', 'c': the files an error is about.
std::string quoted(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "'" : ", '") + name + "'";
  return out;
}

// Refuses a model whose special pieces are not at the ids this wrapper fixes.
void check_special_ids(const sentencepiece::SentencePieceProcessor& sp, const std::string& op,
                       const std::string& source) {
  TP_CHECK(sp.pad_id() == SentencePiece::kPadId && sp.unk_id() == SentencePiece::kUnkId &&
               sp.bos_id() == SentencePiece::kBosId && sp.eos_id() == SentencePiece::kEosId,
           op, source, " has special ids pad ", sp.pad_id(), ", unk ", sp.unk_id(), ", bos ", sp.bos_id(), ", eos ",
           sp.eos_id(), "; expected pad 0, unk 1, bos 2, eos 3");
}

// SentencePiece reports missing files through its status, but reading a directory throws a
// standard library exception from deep inside; naming the file up front gives one clear message.
void check_regular_file(const char* op, const std::string& path) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  TP_CHECK(std::filesystem::exists(status), op, "'", path, "' does not exist");
  TP_CHECK(std::filesystem::is_regular_file(status), op, "'", path, "' is not a regular file");
}

// Runs a SentencePiece call, turning the standard library exceptions that escape its I/O into
// Error naming the operation and the file.
template <class Call>
auto guarded(const char* op, const std::string& files, Call&& call) {
  try {
    return call();
  } catch (const std::exception& e) {
    fail(op, "cannot read ", files, ": ", e.what());
  }
}

}  // namespace

SubwordModel parse_subword_model(const std::string& name) {
  if (name == "unigram") return SubwordModel::Unigram;
  if (name == "bpe") return SubwordModel::Bpe;
  fail("parse_subword_model", "unknown SentencePiece model type '", name, "' (expected unigram or bpe)");
}

SentencePiece::SentencePiece(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePiece::SentencePiece(SentencePiece&&) noexcept = default;
SentencePiece& SentencePiece::operator=(SentencePiece&&) noexcept = default;
SentencePiece::~SentencePiece() = default;

const sentencepiece::SentencePieceProcessor& SentencePiece::processor() const {
  TP_CHECK(impl_ != nullptr, "SentencePiece", "use of a moved-from SentencePiece");
  return impl_->processor;
}

namespace {

void check_training_options(const char* op, const SentencePieceOptions& options) {
  TP_CHECK(options.vocab_size > 4, op, "vocab_size must be greater than 4 (the pad, unk, bos and eos pieces), got ",
           options.vocab_size);
  TP_CHECK(options.character_coverage > 0 && options.character_coverage <= 1, op,
           "character_coverage must be in (0, 1], got ", options.character_coverage);
  TP_CHECK(options.threads >= 1, op, "threads must be at least 1, got ", options.threads);
}

// SentencePiece's trainer arguments for `options`, without the input.
std::unordered_map<std::string, std::string> training_arguments(const SentencePieceOptions& options) {
  return {
      {"vocab_size", std::to_string(options.vocab_size)},
      {"model_type", options.model == SubwordModel::Bpe ? "bpe" : "unigram"},
      {"character_coverage", std::to_string(options.character_coverage)},
      {"num_threads", std::to_string(options.threads)},
      {"pad_id", std::to_string(SentencePiece::kPadId)},
      {"unk_id", std::to_string(SentencePiece::kUnkId)},
      {"bos_id", std::to_string(SentencePiece::kBosId)},
      {"eos_id", std::to_string(SentencePiece::kEosId)},
      {"minloglevel", "2"},  // errors only: SentencePiece logs every training step otherwise
  };
}

// The sentences of a vector, as SentencePiece's trainer reads its input.
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& sentences) : sentences_(sentences) {}
  bool done() const override { return i_ >= sentences_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return sentences_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& sentences_;
  size_t i_ = 0;
};

}  // namespace

SentencePiece SentencePiece::train(const std::vector<std::string>& text_files, const SentencePieceOptions& options) {
  const char* op = "SentencePiece::train";
  TP_CHECK(!text_files.empty(), op, "no text files to train on");
  std::string inputs;
  for (const auto& file : text_files) {
    TP_CHECK(!file.empty(), op, "an empty file name among ", quoted(text_files));
    TP_CHECK(file.find(',') == std::string::npos, op, "the file name '", file,
             "' holds a comma, which SentencePiece reads as a separator; rename the file");
    check_regular_file(op, file);
    inputs += (inputs.empty() ? "" : ",") + file;
  }
  check_training_options(op, options);
  auto args = training_arguments(options);
  args["input"] = inputs;
  return trained(op, quoted(text_files), args, nullptr);
}

SentencePiece SentencePiece::train_sentences(const std::vector<std::string>& sentences,
                                             const SentencePieceOptions& options) {
  const char* op = "SentencePiece::train_sentences";
  TP_CHECK(!sentences.empty(), op, "no sentences to train on");
  check_training_options(op, options);
  VectorIterator iterator(sentences);
  return trained(op, std::to_string(sentences.size()) + " sentences", training_arguments(options), &iterator);
}

SentencePiece SentencePiece::trained(const char* op, const std::string& input,
                                     const std::unordered_map<std::string, std::string>& args,
                                     sentencepiece::SentenceIterator* sentences) {
  std::string model;
  const auto status = guarded(op, input, [&] { return sentencepiece::SentencePieceTrainer::Train(args, sentences, &model); });
  TP_CHECK(status.ok(), op, "cannot train on ", input, ": ", status.ToString());
  auto impl = std::make_unique<Impl>();
  const auto loaded = impl->processor.LoadFromSerializedProto(model);
  TP_CHECK(loaded.ok(), op, "the model trained on ", input, " does not load: ", loaded.ToString());
  return SentencePiece(std::move(impl));
}

SentencePiece SentencePiece::load(const std::string& path) {
  const char* op = "SentencePiece::load";
  check_regular_file(op, path);
  auto impl = std::make_unique<Impl>();
  const auto status = guarded(op, "'" + path + "'", [&] { return impl->processor.Load(path); });
  TP_CHECK(status.ok(), op, "cannot load '", path, "' as a SentencePiece model: ", status.ToString());
  check_special_ids(impl->processor, op, "'" + path + "'");
  return SentencePiece(std::move(impl));
}

void SentencePiece::save(const std::string& path) const {
  const char* op = "SentencePiece::save";
  TP_CHECK(!path.empty(), op, "empty path");
  const std::string model = processor().serialized_model_proto();
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  TP_CHECK(file != nullptr, op, "cannot write '", temp, "' (for '", path, "'): ", std::strerror(errno));
  const bool written = std::fwrite(model.data(), 1, model.size(), file) == model.size() &&
                       std::fflush(file) == 0 && ::fsync(::fileno(file)) == 0;
  const int write_errno = errno;
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    std::remove(temp.c_str());
    fail(op, "cannot write '", temp, "' (for '", path, "'): ", std::strerror(written ? errno : write_errno));
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    std::remove(temp.c_str());
    fail(op, "cannot rename '", temp, "' to '", path, "': ", std::strerror(rename_errno));
  }
}

std::vector<int64_t> SentencePiece::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = processor().Encode(text, &ids);
  TP_CHECK(status.ok(), "SentencePiece::encode", "cannot encode a text of ", text.size(), " bytes: ",
           status.ToString());
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string SentencePiece::decode(const std::vector<int64_t>& ids) const {
  const char* op = "SentencePiece::decode";
  std::vector<int> narrow(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    TP_CHECK(ids[i] >= 0 && ids[i] < vocab_size(), op, "id ", ids[i], " (position ", i,
             ") is outside the vocabulary [0, ", vocab_size(), ")");
    narrow[i] = static_cast<int>(ids[i]);
  }
  std::string text;
  const auto status = processor().Decode(narrow, &text);
  TP_CHECK(status.ok(), op, "cannot decode ", ids.size(), " ids: ", status.ToString());
  return text;
}

int64_t SentencePiece::vocab_size() const { return processor().GetPieceSize(); }

std::string SentencePiece::fingerprint() const {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a over the pieces in id order, each ended by a NUL
  for (int id = 0; id < processor().GetPieceSize(); ++id) {
    for (const char c : processor().IdToPiece(id) + '\0') hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

int64_t SentencePiece::piece_to_id(const std::string& piece) const { return processor().PieceToId(piece); }

std::string SentencePiece::id_to_piece(int64_t id) const {
  TP_CHECK(id >= 0 && id < vocab_size(), "SentencePiece::id_to_piece", "id ", id, " is outside the vocabulary [0, ",
           vocab_size(), ")");
  return processor().IdToPiece(static_cast<int>(id));
}

}  // namespace tapestry::data
