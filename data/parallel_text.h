// Line-aligned parallel text: line i of the source file translates line i of the target file
// (the layout of de-en/{train,valid,test}.{de,en}, docs/DATA.md).
#pragma once

#include <string>
#include <vector>

namespace tapestry::data {

struct SentencePair {
  std::string source;
  std::string target;
};

// The pairs of `source_path` and `target_path`, in file order. Lines are split as read_lines
// (data/text_lines.h) does: '\n' ends a line, CRLF is accepted, a UTF-8 byte-order mark is dropped.
// Checked, each failure a tapestry::Error naming the file (and the line and byte where there is
// one): both files exist and are readable; neither is empty; they have the same number of lines;
// every line is valid UTF-8 and holds no NUL byte. Empty lines are kept as empty sentences.
std::vector<SentencePair> read_parallel_text(const std::string& source_path, const std::string& target_path);

}  // namespace tapestry::data
