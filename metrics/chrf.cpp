#include "metrics/chrf.h"

#include <algorithm>
#include <map>
#include <vector>

namespace tapestry::metrics {

namespace {

// The code point of the UTF-8 sequence at text[i], advancing i past it; a byte that does not start
// a valid sequence is returned as 0x110000 + byte (no code point has that value) and skipped alone.
char32_t next_character(const std::string& text, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  const int length = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  char32_t c = length == 1 ? b : length == 2 ? b & 0x1F : length == 3 ? b & 0x0F : b & 0x07;
  bool valid = length > 0 && i + size_t(length) <= text.size();
  for (int k = 1; valid && k < length; ++k) {
    valid = (byte(i + size_t(k)) & 0xC0) == 0x80;
    c = (c << 6) | (byte(i + size_t(k)) & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8.
  static const char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  valid = valid && c >= kSmallest[length] && c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF);
  if (!valid) {
    ++i;
    return char32_t(0x110000 + b);
  }
  i += size_t(length);
  return c;
}

// Python's str.isspace(), which `\s` follows for str patterns.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::u32string characters(const std::string& text) {
  std::u32string out;
  for (size_t i = 0; i < text.size();) {
    const char32_t c = next_character(text, i);
    if (!is_space(c)) out.push_back(c);
  }
  return out;
}

std::map<std::u32string, int64_t> ngrams(const std::u32string& s, size_t n) {
  std::map<std::u32string, int64_t> counts;
  for (size_t i = 0; i + n <= s.size(); ++i) ++counts[s.substr(i, n)];
  return counts;
}

}  // namespace

void ChrF::add(const std::string& hypothesis, const std::string& reference) {
  const std::u32string hyp = characters(hypothesis), ref = characters(reference);
  for (int n = 1; n <= kOrder; ++n) {
    const auto h = ngrams(hyp, size_t(n)), r = ngrams(ref, size_t(n));
    const size_t i = size_t(n - 1);
    const int64_t ref_count = int64_t(ref.size() >= size_t(n) ? ref.size() - size_t(n) + 1 : 0);
    // sacreBLEU 2.x: a sentence whose reference has no n-gram of this order adds none of its
    // hypothesis's either (1.x added them, lowering the precision of short references' sentences).
    if (ref_count > 0) hyp_[i] += int64_t(hyp.size() >= size_t(n) ? hyp.size() - size_t(n) + 1 : 0);
    ref_[i] += ref_count;
    for (const auto& [gram, count] : h) {
      const auto found = r.find(gram);
      if (found != r.end()) match_[i] += std::min(count, found->second);
    }
  }
}

void ChrF::merge(const ChrF& other) {
  for (size_t i = 0; i < size_t(kOrder); ++i) {
    hyp_[i] += other.hyp_[i];
    ref_[i] += other.ref_[i];
    match_[i] += other.match_[i];
  }
}

double ChrF::score() const {
  double precision = 0, recall = 0;
  int effective = 0;
  for (size_t i = 0; i < size_t(kOrder); ++i)
    if (hyp_[i] > 0 && ref_[i] > 0) {
      precision += double(match_[i]) / double(hyp_[i]);
      recall += double(match_[i]) / double(ref_[i]);
      ++effective;
    }
  if (effective == 0) return 0;
  precision /= effective;
  recall /= effective;
  if (precision + recall == 0) return 0;
  const double b2 = kBeta * kBeta;
  return 100 * (1 + b2) * precision * recall / (b2 * precision + recall);
}

}  // namespace tapestry::metrics
