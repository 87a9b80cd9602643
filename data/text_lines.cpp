#include "data/text_lines.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "core/error.h"

namespace tapestry::data {

namespace fs = std::filesystem;

std::string read_file(const std::string& reader, const std::string& path, uint64_t max_bytes,
                      const std::string& where_given) {
  const std::string& where = where_given.empty() ? path : where_given;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  TP_CHECK(fs::exists(status), reader, where, ": no such file");
  TP_CHECK(!fs::is_directory(status), reader, where, ": is a folder, not a file");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  TP_CHECK(file, reader, where, ": cannot open: ", std::strerror(errno));
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

std::vector<std::string> read_lines(const std::string& reader, const std::string& path, Utf8 utf8) {
  // 16 GiB: a bound against reading a device or an endless file, not a limit on real corpora.
  const std::string text = read_file(reader, path, uint64_t{16} << 30);
  std::vector<std::string> lines;
  size_t begin = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t number = lines.size() + 1;
    const size_t nul = line.find('\0');
    TP_CHECK(nul == std::string::npos, reader, path, ", line ", number, ", byte ", nul + 1,
             ": a NUL byte (is this a text file?)");
    if (utf8 == Utf8::Check) {
      const size_t bad = invalid_utf8_offset(line);
      TP_CHECK(bad == std::string_view::npos, reader, path, ", line ", number, ", byte ", bad + 1,
               ": not valid UTF-8");
    }
    lines.push_back(std::move(line));
    begin = end + 1;
  }
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
