#include "metrics/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "core/error.h"

namespace tapestry::metrics {
namespace {

constexpr int kMaxOrder = 4;

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_not_digit(char c) { return !is_digit(c); }
bool is_period_or_comma(char c) { return c == '.' || c == ','; }
bool is_dash(char c) { return c == '-'; }
// Python's str.split() whitespace within ASCII: \t \n \v \f \r, \x1c–\x1f and the space.
bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }
// mteval-v13a's punctuation class [{-~[-` -&(-+:-@/]: ASCII punctuation less ' , - .
bool is_split_punctuation(char c) {
  return (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') || c == '/' || (c >= ':' && c <= '@') ||
         (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

// Every occurrence of `from`, left to right and without rescanning the replacement, becomes `to`
// (Python's str.replace).
std::string replace_all(const std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  size_t start = 0;
  for (size_t at; (at = s.find(from, start)) != std::string::npos; start = at + from.size())
    out.append(s, start, at - start).append(to);
  return out.append(s, start, std::string::npos);
}

// Python's re.sub(r'([A])([B])', before + r'\1 \2' + after): each adjacent pair with first(a) and
// second(b), found left to right, becomes before·a·' '·b·after; scanning resumes behind b.
std::string split_pairs(const std::string& s, bool (*first)(char), bool (*second)(char), const char* before,
                        const char* after) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out.append(before).append(1, s[i]).append(1, ' ').append(1, s[i + 1]).append(after);
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string> split_whitespace(const std::string& s) {
  std::vector<std::string> tokens;
  for (size_t i = 0; i < s.size();) {
    while (i < s.size() && is_space(s[i])) ++i;
    const size_t start = i;
    while (i < s.size() && !is_space(s[i])) ++i;
    if (i > start) tokens.push_back(s.substr(start, i - start));
  }
  return tokens;
}

std::string rstrip(std::string s) {
  while (!s.empty() && is_space(s.back())) s.pop_back();
  return s;
}

// The n-grams of orders 1..4 with their counts, keyed by their tokens joined with ' ' (tokens hold
// no spaces, so the key names the n-gram and its order).
using NgramCounts = std::unordered_map<std::string, int64_t>;

NgramCounts count_ngrams(const std::vector<std::string>& tokens) {
  NgramCounts counts;
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string key = tokens[i];
    for (size_t n = 1; n <= kMaxOrder && i + n <= tokens.size(); ++n) {
      if (n > 1) key.append(1, ' ').append(tokens[i + n - 1]);
      ++counts[key];
    }
  }
  return counts;
}

size_t order_of(const std::string& key) { return size_t(std::count(key.begin(), key.end(), ' ')) + 1; }

std::string format(const char* spec, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

}  // namespace

std::string tokenize_13a(const std::string& line) {
  std::string s = replace_all(line, "<skipped>", "");
  s = replace_all(s, "-\n", "");
  s = replace_all(s, "\n", " ");
  s = replace_all(s, "&quot;", "\"");
  s = replace_all(s, "&amp;", "&");
  s = replace_all(s, "&lt;", "<");
  s = replace_all(s, "&gt;", ">");

  std::string spaced = " ";
  for (char c : s) {
    if (is_split_punctuation(c)) spaced.append(1, ' ').append(1, c).append(1, ' ');
    else spaced += c;
  }
  spaced += ' ';
  spaced = split_pairs(spaced, is_not_digit, is_period_or_comma, "", " ");  // ([^0-9])([.,]) → \1 \2␣
  spaced = split_pairs(spaced, is_period_or_comma, is_not_digit, " ", "");  // ([.,])([^0-9]) → ␣\1 \2
  spaced = split_pairs(spaced, is_digit, is_dash, "", " ");                 // ([0-9])(-) → \1 \2␣

  std::string joined;
  for (const std::string& token : split_whitespace(spaced)) {
    if (!joined.empty()) joined += ' ';
    joined += token;
  }
  return joined;
}

double BleuScore::ratio() const { return ref_len == 0 ? 0.0 : double(sys_len) / double(ref_len); }

std::string BleuScore::to_string() const {
  std::string s = "BLEU = " + format("%.2f", score) + " ";
  for (int n = 0; n < kMaxOrder; ++n) s += (n ? "/" : "") + format("%.1f", precisions[size_t(n)]);
  return s + " (BP = " + format("%.3f", bp) + " ratio = " + format("%.3f", ratio()) +
         " hyp_len = " + std::to_string(sys_len) + " ref_len = " + std::to_string(ref_len) + ")";
}

void Bleu::add(const std::string& hypothesis, const std::vector<std::string>& references) {
  TP_CHECK(!references.empty(), "Bleu::add", "a hypothesis needs at least one reference, got none for \"",
           hypothesis, "\"");
  const std::vector<std::string> hyp = split_whitespace(tokenize_13a(rstrip(hypothesis)));
  const int64_t hyp_len = int64_t(hyp.size());

  // Clipping bound of each n-gram: its largest count in any one reference. The closest reference
  // length: the smallest |ref_len − hyp_len|, the shorter reference on a tie.
  NgramCounts ref_max;
  int64_t closest = -1;
  for (const std::string& reference : references) {
    const std::vector<std::string> ref = split_whitespace(tokenize_13a(rstrip(reference)));
    for (const auto& [key, count] : count_ngrams(ref)) ref_max[key] = std::max(ref_max[key], count);
    const int64_t len = int64_t(ref.size());
    if (closest < 0 || std::abs(len - hyp_len) < std::abs(closest - hyp_len) ||
        (std::abs(len - hyp_len) == std::abs(closest - hyp_len) && len < closest))
      closest = len;
  }

  for (const auto& [key, count] : count_ngrams(hyp)) {
    const size_t n = order_of(key) - 1;
    totals_[n] += count;
    const auto found = ref_max.find(key);
    if (found != ref_max.end()) matches_[n] += std::min(count, found->second);
  }
  sys_len_ += hyp_len;
  ref_len_ += closest;
}

void Bleu::merge(const Bleu& other) {
  sys_len_ += other.sys_len_;
  ref_len_ += other.ref_len_;
  for (size_t n = 0; n < kMaxOrder; ++n) matches_[n] += other.matches_[n], totals_[n] += other.totals_[n];
}

// BP = 1 if c ≥ r, exp(1 − r/c) if 0 < c < r, 0 if c = 0 < r
// p_n = 100·match_n/total_n;  match_n = 0 < total_n: p_n = 100/(2^j·total_n) for the j-th such order
// BLEU = BP · exp((1/4) Σ_n log p_n);  0 when no order matches or some total_n = 0
BleuScore Bleu::score() const {
  BleuScore s;
  s.sys_len = sys_len_, s.ref_len = ref_len_, s.matches = matches_, s.totals = totals_;
  if (sys_len_ < ref_len_) s.bp = sys_len_ > 0 ? std::exp(1.0 - double(ref_len_) / double(sys_len_)) : 0.0;
  if (std::all_of(matches_.begin(), matches_.end(), [](int64_t m) { return m == 0; })) return s;

  double decay = 1, log_sum = 0;
  for (size_t n = 0; n < kMaxOrder; ++n) {
    if (totals_[n] == 0) return s;  // p_n and the orders after it stay 0, so BLEU is 0
    if (matches_[n] == 0) decay *= 2;
    s.precisions[n] = 100.0 * (matches_[n] == 0 ? 1.0 / decay : double(matches_[n])) / double(totals_[n]);
    log_sum += std::log(s.precisions[n]);
  }
  s.score = s.bp * std::exp(log_sum / kMaxOrder);
  return s;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  TP_CHECK(hypotheses.size() == references.size(), "corpus_bleu", hypotheses.size(), " hypotheses but ",
           references.size(), " references; expected one reference per hypothesis");
  Bleu bleu;
  for (size_t i = 0; i < hypotheses.size(); ++i) bleu.add(hypotheses[i], {references[i]});
  return bleu.score();
}

}  // namespace tapestry::metrics
