#include "data/text_lines.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>

#include "core/error.h"

namespace tapestry::data {

namespace fs = std::filesystem;

namespace {

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// The file at `path`, open for reading; errors name `where`.
File open_file(const std::string& reader, const std::string& path, const std::string& where) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  TP_CHECK(fs::exists(status), reader, where, ": no such file");
  TP_CHECK(!fs::is_directory(status), reader, where, ": is a folder, not a file");
  File file(std::fopen(path.c_str(), "rb"), &std::fclose);
  TP_CHECK(file, reader, where, ": cannot open: ", std::strerror(errno));
  return file;
}

}  // namespace

std::string read_file(const std::string& reader, const std::string& path, uint64_t max_bytes,
                      const std::string& where_given) {
  const std::string& where = where_given.empty() ? path : where_given;
  const File file = open_file(reader, path, where);
  std::string bytes;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) {
    TP_CHECK(bytes.size() + n <= max_bytes, reader, where, ": larger than the limit of ", max_bytes, " bytes");
    bytes.append(buffer, n);
  }
  TP_CHECK(!std::ferror(file.get()), reader, where, ": read error: ", std::strerror(errno));
  return bytes;
}

LineReader::LineReader(std::string reader, std::string where, std::FILE* file, Utf8 utf8)
    : reader_(std::move(reader)), where_(std::move(where)), file_(file), utf8_(utf8) {}

bool LineReader::next(std::string& line) {
  line.clear();
  int c = 0;
  bool any = false;
  while ((c = getc_unlocked(file_)) != EOF) {
    any = true;
    if (c == '\n') break;
    TP_CHECK(c != 0, reader_, where_, ", line ", number_ + 1, ", byte ", line.size() + 1,
             ": a NUL byte (is this a text file?)");
    TP_CHECK(line.size() < kMaxLineBytes, reader_, where_, ", line ", number_ + 1, ": longer than the limit of ",
             kMaxLineBytes, " bytes (is this a text file of one sentence a line?)");
    line.push_back(char(c));
  }
  TP_CHECK(!std::ferror(file_), reader_, where_, ": read error: ", std::strerror(errno));
  if (!any) return false;
  ++number_;
  if (at_start_ && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);  // a byte-order mark
  at_start_ = false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (utf8_ == Utf8::Check) {
    const size_t bad = invalid_utf8_offset(line);
    TP_CHECK(bad == std::string_view::npos, reader_, where_, ", line ", number_, ", byte ", bad + 1,
             ": not valid UTF-8");
  }
  return true;
}

std::vector<std::string> read_lines(const std::string& reader, const std::string& path, Utf8 utf8) {
  const File file = open_file(reader, path, path);
  LineReader lines_of(reader, path, file.get(), utf8);
  std::vector<std::string> lines;
  for (std::string line; lines_of.next(line);) lines.push_back(line);
  return lines;
}

size_t invalid_utf8_offset(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    size_t length = 0;
    uint32_t min = 0, code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2, min = 0x80, code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, min = 0x800, code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, min = 0x10000, code = c & 0x07;
    } else {
      return i;  // a continuation byte without a lead, or 0xF8..0xFF
    }
    if (i + length > text.size()) return i;
    for (size_t k = 1; k < length; ++k) {
      if ((byte(i + k) & 0xC0) != 0x80) return i;
      code = (code << 6) | (byte(i + k) & 0x3F);
    }
    if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return std::string_view::npos;
}

std::string resolve_listed_path(const std::string& list_path, const std::string& listed) {
  const fs::path path(listed);
  if (path.is_absolute()) return listed;
  return (fs::path(list_path).parent_path() / path).string();
}

std::vector<std::string> words(const std::string& line) {
  const char* space = " \t\n\v\f\r";
  std::vector<std::string> out;
  for (size_t start = line.find_first_not_of(space); start != std::string::npos;) {
    const size_t end = line.find_first_of(space, start);
    out.push_back(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
    start = line.find_first_not_of(space, end == std::string::npos ? line.size() : end);
  }
  return out;
}

}  // namespace tapestry::data
