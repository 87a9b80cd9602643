#include "data/parallel_text.h"

#include "core/error.h"
#include "data/text_lines.h"

namespace tapestry::data {

std::vector<SentencePair> read_parallel_text(const std::string& source_path, const std::string& target_path) {
  const char* reader = "parallel text";
  std::vector<std::string> source = read_lines(reader, source_path, Utf8::Check);
  std::vector<std::string> target = read_lines(reader, target_path, Utf8::Check);
  TP_CHECK(!source.empty(), reader, source_path, ": empty file");
  TP_CHECK(!target.empty(), reader, target_path, ": empty file");
  TP_CHECK(source.size() == target.size(), reader, target_path, " has ", target.size(), " lines but ",
           source_path, " has ", source.size());
  std::vector<SentencePair> pairs(source.size());
  for (size_t i = 0; i < source.size(); ++i) pairs[i] = {std::move(source[i]), std::move(target[i])};
  return pairs;
}

}  // namespace tapestry::data
