/// @file
/// Documents with class labels, in the two standard layouts (docs/DATA.md):
///
///   folder per class   `root/<class>/<document>`   (20 Newsgroups; `spam-assassin/<group>/<n>.eml`)
///   list file          `<path>\t<label>` per line  (brown/labels.tsv), paths relative to the list
///
/// A document's text is its bytes as they are: encodings are not checked (500 of the SpamAssassin
/// e-mails are not UTF-8), but a NUL byte is refused as a sign of a binary file, and so is a file
/// larger than kMaxDocumentBytes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/sentencepiece.h"
#include "data/split.h"

namespace tapestry::data {

inline constexpr uint64_t kMaxDocumentBytes = uint64_t{64} << 20;  ///< the largest document read: 64 MiB

/// A labelled document.
struct Document {
  std::string path;   ///< as found, or as resolved from the list file
  std::string text;   ///< the file's bytes
  int64_t label = 0;  ///< index into ClassifiedDocuments::classes
};

/// A corpus of labelled documents, as read_class_folders and read_class_list return it.
struct ClassifiedDocuments {
  std::vector<std::string> classes;    ///< sorted
  std::vector<Document> documents;     ///< folder layout: by class, then by file name; list: list order
  std::vector<std::string> skipped;    ///< `"<path>: <why>"` for each entry left out (folder layout only)
  std::string root;                    ///< the folder the documents' keys are relative to (document_keys)
};

/// The folder-per-class layout. Classes are the sub-folders of `root`, sorted by name; every regular
/// file in a class folder (symbolic links followed) is one document. Left out and listed in
/// `skipped`: files directly in root, names starting with '.', and folders inside a class folder.
/// Throws Error naming the path when root is missing or not a folder, has no class folder, a class
/// folder has no document, or a document is unreadable, too large or holds a NUL byte.
ClassifiedDocuments read_class_folders(const std::string& root);

/// The list-file layout: each line `path<TAB>label` (empty lines are ignored), path absolute or
/// relative to the list file's folder. Classes are `classes` when given (sorted on return; a label
/// outside them is an error), else the sorted distinct labels. Throws Error naming the list file,
/// the line and the field for a line without exactly one TAB, an empty path or label, an unknown
/// label, or a path that is missing, unreadable, too large or holds a NUL byte; and when the list
/// has no entries.
ClassifiedDocuments read_class_list(const std::string& list_path, std::vector<std::string> classes = {});

/// Each document's path relative to the corpus root, with '/' separators: the key a split hashes
/// (data/split.h), so that no split depends on where the corpus lies.
std::vector<std::string> document_keys(const ClassifiedDocuments& corpus);

/// The text a tokenizer trains on: the documents `indices` (a training split) in the order of their
/// keys' hashes, classes mixed, whole documents while `max_bytes` lasts (the first one always), as
/// lines (SentencePiece's trainer reads sentences).
std::vector<std::string> sample_lines(const ClassifiedDocuments& corpus, const std::vector<int64_t>& indices,
                                      int64_t max_bytes);

/// The documents of a split as pieces, for a classifier.
struct EncodedDocuments {
  /// per document of the corpus: its first max_length pieces
  /// (empty for a document outside the split or of no piece)
  std::vector<std::vector<int64_t>> tokens;
  Split split;                               ///< the split given, without the documents of no piece
  std::vector<std::string> empty;            ///< the paths of those, left out
};

/// Encodes the split's documents, train then valid then test, calling `on_encoded(done, total)`
/// after each one when given (progress on a large corpus: total is the split's size). Throws Error
/// naming encode_documents for max_length < 1 or an index outside the corpus.
EncodedDocuments encode_documents(const SentencePiece& sp, const ClassifiedDocuments& corpus, const Split& split,
                                  int64_t max_length,
                                  const std::function<void(size_t done, size_t total)>& on_encoded = {});

}  // namespace tapestry::data
