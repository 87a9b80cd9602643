// Edit distance and error rates (metrics/edit_distance.h): alignments worked out by hand, the
// tie-break between optimal alignments, PER/WER accumulation, reference length 0.
#include <cmath>

#include "data/text_lines.h"
#include "metrics/edit_distance.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::metrics;

namespace {
void check_counts(const EditCounts& e, int64_t s, int64_t i, int64_t d) {
  CHECK(e.substitutions == s);
  CHECK(e.insertions == i);
  CHECK(e.deletions == d);
}
}  // namespace

TEST_CASE("metrics: edit_distance by hand") {
  // kitten → sitting: k→s, e→i (2 substitutions), insert g: 3.
  check_counts(edit_distance(std::string("kitten"), std::string("sitting")), 2, 1, 0);
  // The other way round the g is deleted.
  check_counts(edit_distance(std::string("sitting"), std::string("kitten")), 2, 0, 1);
  CHECK(edit_distance(std::string("flaw"), std::string("lawn")).distance() == 2);  // delete f, insert n
  check_counts(edit_distance(std::string("flaw"), std::string("lawn")), 0, 1, 1);
  // Empty sides: everything inserted, or everything deleted.
  check_counts(edit_distance(std::vector<int64_t>{}, std::vector<int64_t>{4, 5}), 0, 2, 0);
  check_counts(edit_distance(std::vector<int64_t>{4, 5, 6}, std::vector<int64_t>{}), 0, 0, 3);
  check_counts(edit_distance(std::vector<int64_t>{}, std::vector<int64_t>{}), 0, 0, 0);
  check_counts(edit_distance(std::vector<int64_t>{1, 2, 3}, std::vector<int64_t>{1, 2, 3}), 0, 0, 0);
}

TEST_CASE("metrics: edit_distance breaks ties toward substitutions") {
  // "a b" → "b a": two substitutions, or delete a + insert a; both cost 2. The diagonal step is
  // preferred, so two substitutions are reported.
  check_counts(edit_distance(std::vector<int64_t>{1, 2}, std::vector<int64_t>{2, 1}), 2, 0, 0);
  // "a b c" → "b c d": delete a, insert d (2) beats three substitutions (3).
  check_counts(edit_distance(std::vector<int64_t>{1, 2, 3}, std::vector<int64_t>{2, 3, 4}), 0, 1, 1);
}

TEST_CASE("metrics: ErrorRate as WER and PER") {
  // ref "the cat sat on the mat" (6), hyp "the cat sit on mat": sat→sit, "the" deleted → 2/6.
  ErrorRate wer;
  const EditCounts e = wer.add(data::words("the cat sat on the mat"), data::words(" the  cat sit\ton mat\n"));
  check_counts(e, 1, 0, 1);
  CHECK(wer.value() == doctest::Approx(2.0 / 6));
  // A second utterance, ref "hello" (1), hyp "hello there": one insertion. Totals: 3 edits over 7
  // reference words (not the mean of 1/3 and 1).
  wer.add(data::words("hello"), data::words("hello there"));
  CHECK(wer.counts().insertions == 1);
  CHECK(wer.reference_length() == 7);
  CHECK(wer.value() == doctest::Approx(3.0 / 7));

  // PER over phoneme ids; an error rate can exceed 1: ref (1), hyp (2 3 4): one substitution and two
  // insertions over one phoneme = 3.
  ErrorRate per;
  per.add(std::vector<int64_t>{7}, std::vector<int64_t>{2, 3, 4});
  CHECK(per.value() == 3.0);
  ErrorRate other;
  other.add(std::vector<int64_t>{1, 2, 3}, std::vector<int64_t>{1, 2, 3});
  per.merge(other);  // 3 edits over 4
  CHECK(per.value() == 0.75);
}

TEST_CASE("metrics: ErrorRate with reference length 0") {
  ErrorRate rate;
  CHECK(rate.value() == 0.0);  // nothing added
  rate.add(std::vector<int64_t>{}, std::vector<int64_t>{});
  CHECK(rate.value() == 0.0);  // nothing to recognise, nothing output
  rate.add(std::vector<int64_t>{}, std::vector<int64_t>{9});
  CHECK(std::isinf(rate.value()));
}
