#include "data/parallel_text.h"

#include <algorithm>

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

EncodedPairs encode_pairs(const SentencePiece& sp, const std::vector<SentencePair>& pairs, Filter filter,
                          int64_t max_length) {
  const bool training = filter == Filter::Training;
  TP_CHECK(!training || max_length >= 1, "encode_pairs", "max_length must be >= 1, got ", max_length);
  EncodedPairs e;
  for (const SentencePair& pair : pairs) {
    if (training && (pair.source.empty() || pair.target.empty())) {
      ++e.empty;
      continue;
    }
    std::vector<int64_t> source = sp.encode(pair.source), target = sp.encode(pair.target);
    if (training && (int64_t(source.size()) > max_length || int64_t(target.size()) > max_length)) {
      ++e.too_long;
      continue;
    }
    source.push_back(SentencePiece::kEosId);
    std::vector<int64_t> target_in = {SentencePiece::kBosId};
    target_in.insert(target_in.end(), target.begin(), target.end());
    target.push_back(SentencePiece::kEosId);
    e.lengths.push_back(int64_t(std::max(source.size(), target.size())));
    e.source.push_back(std::move(source));
    e.target_in.push_back(std::move(target_in));
    e.target_out.push_back(std::move(target));
    e.references.push_back(pair.target);
  }
  return e;
}

}  // namespace tapestry::data
