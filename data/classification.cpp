#include "data/classification.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

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

}  // namespace tapestry::data
