/// @file
/// Subword tokenization with SentencePiece (Kudo & Richardson, 2018), through the system library
/// (Debian's libsentencepiece-dev). This is a thin wrapper: training, segmentation and the model
/// file format are SentencePiece's own; this header does not include SentencePiece's.
///
///   SentencePieceOptions options;
///   options.vocab_size = 8000;
///   const SentencePiece sp = SentencePiece::train({"train.de", "train.en"}, options);
///   sp.save("run/spm.model");                                   // beside run/last.ckpt
///   const SentencePiece loaded = SentencePiece::load("run/spm.model");
///   std::vector<int64_t> ids = loaded.encode("Guten Morgen");  // no bos / eos: add them as needed
///   std::string text = loaded.decode(ids);
///
/// Special ids are fixed, so that batches, losses and decoders can rely on them:
///   0 `<pad>`, 1 `<unk>`, 2 `<s>` (bos), 3 `</s>` (eos); ordinary pieces are 4 .. vocab_size − 1.
/// Padding with 0 therefore matches data::make_batch's default pad id. A model whose special ids
/// differ (one trained elsewhere) is refused by load.
///
/// Every failure, of the arguments or of SentencePiece (a missing or unreadable file, a model file
/// that is not one, a vocabulary too large for the text), throws tapestry::Error naming the
/// operation and the file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
class SentenceIterator;
}

namespace tapestry::data {

/// The kind of subword model SentencePiece trains.
enum class SubwordModel {
  Unigram,  ///< a unigram language model ("unigram")
  Bpe       ///< byte-pair encoding ("bpe")
};

/// "unigram" or "bpe"; throws Error naming the string otherwise.
SubwordModel parse_subword_model(const std::string& name);

/// The settings of SentencePiece::train and SentencePiece::train_sentences.
struct SentencePieceOptions {
  int64_t vocab_size = 8000;  ///< including the 4 special pieces; training fails if the text is too small for it
  SubwordModel model = SubwordModel::Unigram;  ///< the kind of model trained
  /// The fraction of the text's characters that get a piece of their own (the rest become `<unk>`):
  /// 1.0 for small alphabets, 0.9995 for languages with large character sets. SentencePiece's
  /// unigram trainer requires at least 0.98.
  double character_coverage = 1.0;
  int64_t threads = 1;  ///< training threads
};

/// A SentencePiece model: trained or loaded, it turns text into piece ids and back (see above).
class SentencePiece {
 public:
  static constexpr int64_t kPadId = 0;  ///< padding
  static constexpr int64_t kUnkId = 1;  ///< unknown: text that has no piece in the vocabulary
  static constexpr int64_t kBosId = 2;  ///< beginning of sentence (bos)
  static constexpr int64_t kEosId = 3;  ///< end of sentence (eos)

  /// Trains on the lines of `text_files` (one sentence per line, UTF-8; SentencePiece's trainer skips
  /// lines longer than 4192 bytes). Throws Error for no files, a file name holding a comma
  /// (SentencePiece splits its input list on commas), vocab_size ≤ 4, character_coverage outside
  /// (0, 1], threads < 1, and any training failure SentencePiece reports (missing file, empty text,
  /// vocabulary too large or too small for the text).
  static SentencePiece train(const std::vector<std::string>& text_files, const SentencePieceOptions& options);
  /// Trains on `sentences` held in memory (e.g. both sides of a parallel corpus, for a joint
  /// vocabulary), as train does on files. Throws Error for no sentences and as train does.
  static SentencePiece train_sentences(const std::vector<std::string>& sentences, const SentencePieceOptions& options);
  /// Reads a model file written by save (or by SentencePiece's own trainer with the ids above).
  static SentencePiece load(const std::string& path);

  ///@{
  /// Movable, not copyable; a moved-from SentencePiece throws Error when used.
  SentencePiece(SentencePiece&&) noexcept;
  SentencePiece& operator=(SentencePiece&&) noexcept;
  ~SentencePiece();
  ///@}

  /// Writes the model to `path`: to `"<path>.tmp.<pid>"` first, then renamed over `path`, so an
  /// interrupted save leaves a previous model intact.
  void save(const std::string& path) const;

  /// The ids of `text`'s pieces (no bos / eos). Unknown characters become kUnkId.
  std::vector<int64_t> encode(const std::string& text) const;
  /// The text of `ids`; special ids decode to nothing. Throws Error for an id outside
  /// [0, vocab_size).
  std::string decode(const std::vector<int64_t>& ids) const;

  /// The number of pieces, the 4 special ones included.
  int64_t vocab_size() const;
  /// 16 hexadecimal digits that name the pieces and their ids: two models of the same size trained
  /// on other text differ here. Checkpoints record it, so that a model file of another run beside a
  /// checkpoint is refused.
  std::string fingerprint() const;
  /// The id of `piece` (e.g. "▁the"), kUnkId when the vocabulary has no such piece.
  int64_t piece_to_id(const std::string& piece) const;
  /// The piece of `id`; throws Error for an id outside [0, vocab_size).
  std::string id_to_piece(int64_t id) const;

 private:
  struct Impl;
  explicit SentencePiece(std::unique_ptr<Impl> impl);
  /// Runs SentencePiece's trainer with `args` on `sentences` (null: args["input"]); `input` names it in errors.
  static SentencePiece trained(const char* op, const std::string& input,
                               const std::unordered_map<std::string, std::string>& args,
                               sentencepiece::SentenceIterator* sentences);
  const sentencepiece::SentencePieceProcessor& processor() const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tapestry::data
