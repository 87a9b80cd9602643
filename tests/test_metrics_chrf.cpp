// Corpus chrF (metrics/chrf.h): scores worked out by hand from their character n-gram counts,
// sacreBLEU's published example values, whitespace, code points rather than bytes, merging.
#include "metrics/chrf.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::metrics;

namespace {

double chrf(const std::string& hypothesis, const std::string& reference) {
  ChrF c;
  c.add(hypothesis, reference);
  return c.score();
}

}  // namespace

TEST_CASE("chrF: hand-computed scores") {
  // "ab" against "abc": order 1 matches 2 of 2 (P 1) and of 3 (R 2/3); order 2 "ab" 1 of 1 (P 1) and
  // of 2 (R 1/2); orders 3..6 have no hypothesis n-gram and do not count. P = 1, R = 7/12:
  // chrF = 100 · 5 · (7/12) / (4 + 7/12) = 100 · 35/55.
  CHECK(chrf("ab", "abc") == doctest::Approx(100.0 * 35 / 55).epsilon(1e-12));
  CHECK(chrf("abc", "abc") == doctest::Approx(100).epsilon(1e-12));
  // No character in common: P = R = 0.
  CHECK(chrf("xyz", "abc") == 0);
  // Nothing to compare: no effective order.
  CHECK(chrf("", "abc") == 0);
  CHECK(ChrF().score() == 0);
}

TEST_CASE("chrF: sacreBLEU's published examples (chrF2, its defaults)") {
  CHECK(chrf("The relationship between Obama and Netanyahu is not exactly friendly.",
             "The ties between Obama and Netanyahu are not particularly friendly.") ==
        doctest::Approx(61.576379378113785).epsilon(1e-12));
  ChrF corpus;
  corpus.add("The relationship between cats and dogs is not exactly friendly.",
             "The relationship between dogs and cats is not exactly friendly.");
  corpus.add("a good bookshop is just a genteel black hole that knows how to read.",
             "A good bookshop is just a genteel Black Hole that knows how to read.");
  CHECK(corpus.score() == doctest::Approx(84.64214891738334).epsilon(1e-12));
}

TEST_CASE("chrF: whitespace is removed; characters are code points; a stray byte is a character") {
  CHECK(chrf("a b\tc\n", "abc") == doctest::Approx(100).epsilon(1e-12));
  CHECK(chrf("a\u00a0b\u3000c", "abc") == doctest::Approx(100).epsilon(1e-12));  // no-break and ideographic spaces
  // "ä" (two bytes) against "äx": order 1 matches 1 of 1 (P 1) and of 2 (R 1/2); order 2 has no
  // hypothesis n-gram. chrF = 100 · 5 · 0.5 / (4 + 0.5). Counting bytes would give 100 · 35/55.
  CHECK(chrf("\u00e4", "\u00e4x") == doctest::Approx(100.0 * 2.5 / 4.5).epsilon(1e-12));
  CHECK(chrf("\xff", "\xff") == doctest::Approx(100).epsilon(1e-12));
  CHECK(chrf("\xff", "\xfe") == 0);
  CHECK(chrf("\xc3", "\xc3\xa4") == 0);  // a truncated sequence is not the character it starts
}

TEST_CASE("chrF: a reference shorter than n adds no hypothesis n-grams of order n (sacreBLEU 2.x)") {
  // "abc"/"abc" and "abcdefg"/"ab". Order 1: hyp 3 + 7, ref 3 + 2, match 3 + 2 (P 1/2, R 1); order 2:
  // 2 + 6, 2 + 1, 2 + 1 (P 3/8, R 1); order 3: the second reference has no trigram, so its
  // hypothesis adds none: 1, 1, 1 (P 1, R 1); orders 4..6: nothing. P = 15/24, R = 1:
  // chrF = 100 · 5 · (15/24) / (4 · 15/24 + 1) = 100 · 25/28. (sacreBLEU 1.x: 72.67, from order 3's
  // P = 1/6.)
  ChrF corpus;
  corpus.add("abc", "abc");
  corpus.add("abcdefg", "ab");
  CHECK(corpus.score() == doctest::Approx(100.0 * 25 / 28).epsilon(1e-12));
}

TEST_CASE("chrF: merged accumulators score as one") {
  ChrF a, b, both;
  a.add("the cat sat", "the cat sat down");
  b.add("a dog", "the dog");
  both.add("the cat sat", "the cat sat down");
  both.add("a dog", "the dog");
  a.merge(b);
  CHECK(a.score() == both.score());
}
