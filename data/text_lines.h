/// @file
/// Reading text files for the data readers: whole files with a size limit, files as lines and lines
/// as words, with the checks the readers share. Every error is a tapestry::Error that starts with the
/// reader's name and names the file (and the line and byte where there is one).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace tapestry::data {

/// Whether read_lines checks that every line is valid UTF-8.
enum class Utf8 {
  Check,     ///< throw Error for a line that is not valid UTF-8
  Unchecked  ///< no UTF-8 check (a NUL byte is still refused)
};

/// The bytes of the file at `path`. Throws `Error("<reader>: <where>: ...")` when it does not exist, is
/// a folder, cannot be read, or is larger than max_bytes; `where` is the path unless given (a list
/// file's reader names the list, the line and the field that gave the path).
std::string read_file(const std::string& reader, const std::string& path, uint64_t max_bytes,
                      const std::string& where = "");

/// The longest line the line readers take, in bytes (64 KiB): a sentence, a transcript or a list
/// entry is far shorter. A longer line is refused, naming the file and the line, as soon as this many
/// bytes of it have been read: one endless line (`/dev/zero`, a file without newlines) costs neither
/// memory nor time.
inline constexpr size_t kMaxLineBytes = size_t{1} << 16;

/// Reads the lines of an open stream (a file, standard input) one at a time, as read_lines does,
/// with its checks: a line is refused as soon as it passes kMaxLineBytes, so a line is translated or
/// scored before the next one is read (`translate run` at a terminal).
class LineReader {
 public:
  /// Reads `file` (not owned); errors start with `reader` and name `where` (the path, or "the input").
  LineReader(std::string reader, std::string where, std::FILE* file, Utf8 utf8);
  /// The next line into `line`; false at the end of the stream. Throws Error naming the line (and
  /// the byte) for a line longer than kMaxLineBytes, a NUL byte, invalid UTF-8 under Utf8::Check,
  /// and a read error.
  bool next(std::string& line);
  /// The number of the line `next` returned last, from 1.
  int64_t line_number() const { return number_; }

 private:
  std::string reader_, where_;
  std::FILE* file_;
  Utf8 utf8_;
  int64_t number_ = 0;
  bool at_start_ = true;
};

/// The lines of the file at `path`: ``'\n'`` ends a line and a ``'\r'`` before it is dropped (CRLF
/// files), a last line without ``'\n'`` counts, a UTF-8 byte-order mark at the start is dropped.
/// Besides read_file's errors, throws when a line is longer than kMaxLineBytes, holds a NUL byte
/// or, with Utf8::Check, is not valid UTF-8 (naming the line and the byte).
std::vector<std::string> read_lines(const std::string& reader, const std::string& path, Utf8 utf8);

/// The offset of the first byte that does not start a valid UTF-8 sequence (overlong forms,
/// surrogates and code points above U+10FFFF are invalid), or std::string_view::npos.
size_t invalid_utf8_offset(std::string_view text);

/// The words of a line: the maximal runs of non-whitespace (ASCII whitespace) characters.
std::vector<std::string> words(const std::string& line);

/// A path read from a list file: as it is when absolute, else relative to the list file's folder.
std::string resolve_listed_path(const std::string& list_path, const std::string& listed);

}  // namespace tapestry::data
