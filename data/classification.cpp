#include "data/classification.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <system_error>
#include <utility>

#include "core/error.h"
#include "data/text_lines.h"

namespace tapestry::data {

namespace fs = std::filesystem;

namespace {

constexpr const char* kReader = "classification";

// The text of the document at `path`; errors name `where` (the path, or the list entry that gave it).
std::string read_document(const std::string& path, const std::string& where) {
  const std::string text = read_file(kReader, path, kMaxDocumentBytes, where);
  const size_t nul = text.find('\0');
  TP_CHECK(nul == std::string::npos, kReader, where, ": byte ", nul + 1, " is NUL (a binary file, not a text document)");
  return text;
}

bool hidden(const fs::path& path) { return path.filename().string().rfind('.', 0) == 0; }

// The entries of a folder, sorted by name; filesystem errors become Error naming the folder.
std::vector<fs::directory_entry> sorted_entries(const fs::path& folder) {
  std::vector<fs::directory_entry> entries;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
  TP_CHECK(!ec, kReader, folder.string(), ": cannot list the folder: ", ec.message());
  std::sort(entries.begin(), entries.end(),
            [](const fs::directory_entry& a, const fs::directory_entry& b) { return a.path() < b.path(); });
  return entries;
}

}  // namespace

ClassifiedDocuments read_class_folders(const std::string& root) {
  std::error_code ec;
  TP_CHECK(fs::exists(root, ec), kReader, root, ": no such folder");
  TP_CHECK(fs::is_directory(root, ec), kReader, root, ": not a folder (expected one sub-folder per class)");
  ClassifiedDocuments result;
  result.root = root;
  std::vector<fs::path> class_folders;
  for (const auto& entry : sorted_entries(root)) {
    if (hidden(entry.path())) {
      result.skipped.push_back(entry.path().string() + ": hidden");
    } else if (fs::is_directory(entry.path(), ec)) {
      class_folders.push_back(entry.path());
    } else {
      result.skipped.push_back(entry.path().string() + ": a file outside the class folders");
    }
  }
  TP_CHECK(!class_folders.empty(), kReader, root, ": no class folders (expected one sub-folder per class)");
  for (const fs::path& folder : class_folders) {
    const auto label = static_cast<int64_t>(result.classes.size());
    result.classes.push_back(folder.filename().string());
    size_t count = 0;
    for (const auto& entry : sorted_entries(folder)) {
      const std::string path = entry.path().string();
      if (hidden(entry.path())) {
        result.skipped.push_back(path + ": hidden");
      } else if (fs::is_directory(entry.path(), ec)) {
        result.skipped.push_back(path + ": a folder inside a class folder");
      } else {
        result.documents.push_back({path, read_document(path, path), label});
        ++count;
      }
    }
    TP_CHECK(count > 0, kReader, folder.string(), ": the class '", result.classes.back(), "' has no documents");
  }
  return result;
}

ClassifiedDocuments read_class_list(const std::string& list_path, std::vector<std::string> classes) {
  const std::vector<std::string> lines = read_lines(kReader, list_path, Utf8::Check);
  struct Entry {
    size_t line;
    std::string path, label;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    TP_CHECK(tab != std::string::npos, kReader, list_path, ", line ", i + 1,
             ": no TAB between field 1 (path) and field 2 (label)");
    TP_CHECK(line.find('\t', tab + 1) == std::string::npos, kReader, list_path, ", line ", i + 1,
             ": more than 2 fields (expected path<TAB>label)");
    entries.push_back({i + 1, line.substr(0, tab), line.substr(tab + 1)});
    TP_CHECK(!entries.back().path.empty(), kReader, list_path, ", line ", i + 1, ": field 1 (path) is empty");
    TP_CHECK(!entries.back().label.empty(), kReader, list_path, ", line ", i + 1, ": field 2 (label) is empty");
  }
  TP_CHECK(!entries.empty(), kReader, list_path, ": no entries (expected lines path<TAB>label)");

  const bool given = !classes.empty();
  if (!given) {
    for (const Entry& entry : entries) classes.push_back(entry.label);
  }
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());

  ClassifiedDocuments result;
  result.classes = std::move(classes);
  result.root = fs::path(list_path).parent_path().string();
  for (const Entry& entry : entries) {
    const auto found = std::lower_bound(result.classes.begin(), result.classes.end(), entry.label);
    TP_CHECK(found != result.classes.end() && *found == entry.label, kReader, list_path, ", line ", entry.line,
             ", field 2 (label): '", entry.label, "' is not one of the ", result.classes.size(), " classes given");
    const std::string path = resolve_listed_path(list_path, entry.path);
    const std::string where = detail::concat(list_path, ", line ", entry.line, ", field 1 (path) ", path);
    result.documents.push_back({path, read_document(path, where), found - result.classes.begin()});
  }
  return result;
}

std::vector<std::string> document_keys(const ClassifiedDocuments& corpus) {
  const fs::path root = corpus.root.empty() ? fs::path(".") : fs::path(corpus.root);
  std::vector<std::string> keys;
  keys.reserve(corpus.documents.size());
  for (const Document& d : corpus.documents) {
    const fs::path relative = fs::path(d.path).lexically_relative(root);
    keys.push_back(relative.empty() ? fs::path(d.path).generic_string() : relative.generic_string());
  }
  return keys;
}

std::vector<std::string> sample_lines(const ClassifiedDocuments& corpus, const std::vector<int64_t>& indices,
                                      int64_t max_bytes) {
  const std::vector<std::string> keys = document_keys(corpus);
  std::vector<std::pair<uint64_t, int64_t>> order;
  for (const int64_t i : indices) {
    TP_CHECK(i >= 0 && i < int64_t(keys.size()), "sample_lines", "document ", i, " is outside the corpus of ",
             keys.size());
    order.push_back({fnv1a(keys[size_t(i)]), i});
  }
  std::sort(order.begin(), order.end());
  std::vector<std::string> lines;
  int64_t written = 0;
  for (const auto& [hash, i] : order) {
    const std::string& text = corpus.documents[size_t(i)].text;
    if (written > 0 && written + int64_t(text.size()) > max_bytes) break;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    written += int64_t(text.size()) + 1;
  }
  return lines;
}

EncodedDocuments encode_documents(const SentencePiece& sp, const ClassifiedDocuments& corpus, const Split& split,
                                  int64_t max_length, const std::function<void(size_t done, size_t total)>& on_encoded) {
  TP_CHECK(max_length >= 1, "encode_documents", "max_length must be at least 1, got ", max_length);
  EncodedDocuments encoded;
  encoded.tokens.resize(corpus.documents.size());
  const size_t total = split.train.size() + split.valid.size() + split.test.size();
  size_t done = 0;
  const auto encode = [&](const std::vector<int64_t>& from, std::vector<int64_t>& to) {
    for (const int64_t i : from) {
      if (on_encoded && done > 0) on_encoded(done, total);
      ++done;
      TP_CHECK(i >= 0 && i < int64_t(corpus.documents.size()), "encode_documents", "document ", i,
               " is outside the corpus of ", corpus.documents.size());
      const Document& d = corpus.documents[size_t(i)];
      std::vector<int64_t> ids = sp.encode(d.text);
      if (ids.empty()) {
        encoded.empty.push_back(d.path);
        continue;
      }
      if (int64_t(ids.size()) > max_length) ids.resize(size_t(max_length));
      encoded.tokens[size_t(i)] = std::move(ids);
      to.push_back(i);
    }
  };
  encode(split.train, encoded.split.train);
  encode(split.valid, encoded.split.valid);
  encode(split.test, encoded.split.test);
  if (on_encoded && done > 0) on_encoded(done, total);
  return encoded;
}

}  // namespace tapestry::data
