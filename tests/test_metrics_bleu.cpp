// Corpus BLEU (metrics/bleu.h): the 13a tokenizer rule by rule, scores worked out by hand from their
// n-gram counts, smoothing, brevity penalty, several references, sacreBLEU's output line, bad input.
#include <cmath>

#include "metrics/bleu.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::metrics;
using namespace tapestry::testing;

TEST_CASE("metrics: tokenize_13a splits punctuation, keeps numbers whole") {
  // '!' is in the punctuation class; ',' splits off after a non-digit.
  CHECK(tokenize_13a("Hello, world!") == "Hello , world !");
  // '$' splits; "3.50" and "1,000" keep their digit-bounded separators; the ',' after "50" is
  // followed by a space and the final '.' by the padding space, so both split off.
  CHECK(tokenize_13a("It costs $3.50, or 1,000 yen.") == "It costs $ 3.50 , or 1,000 yen .");
  // '-' splits only after a digit.
  CHECK(tokenize_13a("pages 10-20 and well-known") == "pages 10 - 20 and well-known");
  CHECK(tokenize_13a("3-") == "3 -");
  // The apostrophe is not in the class.
  CHECK(tokenize_13a("don't stop") == "don't stop");
  // Leading '.' before a digit: preceded by the padding space, so it splits ("5" then stands
  // alone); "5." splits because '.' is followed by a space; "5.x" because it is followed by 'x'.
  CHECK(tokenize_13a(".5 and 5. and 5.x") == ". 5 and 5 . and 5 . x");
  // Non-overlapping scan: "a.." → the pair "a." splits, then the second '.' is followed by space.
  CHECK(tokenize_13a("a.. b,,") == "a . . b , ,");
  CHECK(tokenize_13a("a(b)c[d]{e}|f~g^h_i`j\\k/l@m?n=o;p:q*r+s#t%u") ==
        "a ( b ) c [ d ] { e } | f ~ g ^ h _ i ` j \\ k / l @ m ? n = o ; p : q * r + s # t % u");
}

TEST_CASE("metrics: tokenize_13a's language-independent part") {
  CHECK(tokenize_13a("x<skipped>y") == "xy");
  CHECK(tokenize_13a("line-\nbreak\nnext") == "linebreak next");
  // Entities unescape once each, in the order &quot; &amp; &lt; &gt;, then '&', '<', '"' split.
  CHECK(tokenize_13a("a &amp; b &lt;c&gt; &quot;q&quot;") == "a & b < c > \" q \"");
  CHECK(tokenize_13a("&amp;lt;") == "<");  // &amp; → & makes "&lt;", which the next rule turns into <
  CHECK(tokenize_13a("  spaced \t out  ") == "spaced out");
  CHECK(tokenize_13a("") == "");
}

TEST_CASE("metrics: corpus_bleu of a perfect match is 100") {
  // 6 tokens; every n-gram matches: 6/6, 5/5, 4/4, 3/3; c = r = 6.
  const BleuScore s = corpus_bleu({"the cat sat on the mat"}, {"the cat sat on the mat"});
  CHECK(s.score == doctest::Approx(100.0).epsilon(1e-12));
  for (double p : s.precisions) CHECK(p == 100.0);
  CHECK(s.bp == 1.0);
  CHECK(s.sys_len == 6);
  CHECK(s.ref_len == 6);
  CHECK(s.to_string() == "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)");
}

TEST_CASE("metrics: corpus_bleu by hand, one substituted word") {
  // hyp "the cat sat on a mat" vs ref "the cat sat on the mat":
  //   1-grams the cat sat on a mat          → 5 of 6 match (not "a")
  //   2-grams the·cat cat·sat sat·on on·a a·mat → 3 of 5
  //   3-grams the·cat·sat cat·sat·on sat·on·a on·a·mat → 2 of 4
  //   4-grams the·cat·sat·on cat·sat·on·a sat·on·a·mat → 1 of 3
  // BLEU = 100·(5/6 · 3/5 · 2/4 · 1/3)^(1/4) = 100·(1/12)^(1/4) = 53.7285; BP = 1 (c = r = 6).
  const BleuScore s = corpus_bleu({"the cat sat on a mat"}, {"the cat sat on the mat"});
  CHECK(s.matches == std::array<int64_t, 4>{5, 3, 2, 1});
  CHECK(s.totals == std::array<int64_t, 4>{6, 5, 4, 3});
  CHECK(s.precisions[0] == doctest::Approx(500.0 / 6));
  CHECK(s.precisions[3] == doctest::Approx(100.0 / 3));
  CHECK(s.score == doctest::Approx(100.0 * std::pow(1.0 / 12, 0.25)).epsilon(1e-12));
  CHECK(s.to_string() == "BLEU = 53.73 83.3/60.0/50.0/33.3 (BP = 1.000 ratio = 1.000 hyp_len = 6 ref_len = 6)");
}

TEST_CASE("metrics: corpus_bleu sums counts over the corpus, not scores") {
  // The two sentences above together: matches 6+5, 5+3, 4+2, 3+1 of totals 6+6, 5+5, 4+4, 3+3:
  //   100·(11/12 · 8/10 · 6/8 · 4/6)^(1/4) = 100·(11/30)^(1/4) = 77.8158
  // (the mean of the sentence scores, (100 + 53.73)/2 = 76.86, would differ).
  const BleuScore s = corpus_bleu({"the cat sat on the mat", "the cat sat on a mat"},
                                  {"the cat sat on the mat", "the cat sat on the mat"});
  CHECK(s.score == doctest::Approx(100.0 * std::pow(11.0 / 30, 0.25)).epsilon(1e-12));
  CHECK(s.sys_len == 12);

  // The accumulator merged from halves gives the same statistics.
  Bleu first, second;
  first.add("the cat sat on the mat", {"the cat sat on the mat"});
  second.add("the cat sat on a mat", {"the cat sat on the mat"});
  first.merge(second);
  CHECK(first.score().score == s.score);
  CHECK(first.score().matches == s.matches);
}

TEST_CASE("metrics: corpus_bleu brevity penalty") {
  // hyp "the cat sat on" (c = 4) is a prefix of the 6-token reference: all precisions are 100
  // (4/4, 3/3, 2/2, 1/1), BP = exp(1 − 6/4) = exp(−0.5) = 0.60653.
  const BleuScore s = corpus_bleu({"the cat sat on"}, {"the cat sat on the mat"});
  CHECK(s.bp == doctest::Approx(std::exp(-0.5)).epsilon(1e-15));
  CHECK(s.score == doctest::Approx(100.0 * std::exp(-0.5)).epsilon(1e-12));
  CHECK(s.ratio() == doctest::Approx(4.0 / 6));
  CHECK(s.to_string() == "BLEU = 60.65 100.0/100.0/100.0/100.0 (BP = 0.607 ratio = 0.667 hyp_len = 4 ref_len = 6)");

  // An empty hypothesis against a non-empty reference: c = 0 < r, BP = 0, nothing matches.
  const BleuScore empty = corpus_bleu({""}, {"a b"});
  CHECK(empty.bp == 0.0);
  CHECK(empty.score == 0.0);
  CHECK(empty.ref_len == 2);
}

TEST_CASE("metrics: corpus_bleu clips counts and smooths zero orders exponentially") {
  // hyp "the the the the" vs ref "the cat sat on the mat":
  //   1-grams: "the" ×4, clipped to the reference's 2 → 2/4 = 50
  //   2-grams "the the" ×3: 0/3 → first zero order: 100/(2·3) = 16.667
  //   3-grams ×2: 0/2 → second: 100/(4·2) = 12.5;  4-gram ×1: 0/1 → third: 100/(8·1) = 12.5
  //   BP = exp(1 − 6/4); BLEU = BP·(50 · 50/3 · 12.5 · 12.5)^(1/4) = BP·(25⁴/3)^(1/4) = BP·25/3^(1/4)
  const BleuScore s = corpus_bleu({"the the the the"}, {"the cat sat on the mat"});
  CHECK(s.matches == std::array<int64_t, 4>{2, 0, 0, 0});
  CHECK(s.precisions[1] == doctest::Approx(100.0 / 6));
  CHECK(s.precisions[2] == 12.5);
  CHECK(s.precisions[3] == 12.5);
  CHECK(s.score == doctest::Approx(std::exp(-0.5) * 25 / std::pow(3.0, 0.25)).epsilon(1e-12));

  // Tokenizer and smoothing together: "Hello , world !" (4 tokens) vs "Hello world !" (3):
  //   1-grams 3/4 = 75; 2-grams: only "world !" → 1/3; 3-grams 0/2 → 100/(2·2) = 25;
  //   4-grams 0/1 → 100/(4·1) = 25; BP = 1 (c = 4 > r = 3);
  //   BLEU = (75 · 100/3 · 25 · 25)^(1/4) = 1562500^(1/4) = 25·√2 = 35.355
  const BleuScore t = corpus_bleu({"Hello, world!"}, {"Hello world!"});
  CHECK(t.score == doctest::Approx(25 * std::sqrt(2.0)).epsilon(1e-12));
  CHECK(t.to_string() == "BLEU = 35.36 75.0/33.3/25.0/25.0 (BP = 1.000 ratio = 1.333 hyp_len = 4 ref_len = 3)");
}

TEST_CASE("metrics: corpus_bleu with no overlap or too-short hypotheses is 0") {
  // No n-gram of any order matches: 0, and every precision is reported as 0 (no smoothing).
  const BleuScore none = corpus_bleu({"a b c"}, {"x y z"});
  CHECK(none.score == 0.0);
  for (double p : none.precisions) CHECK(p == 0.0);
  CHECK(none.bp == 1.0);

  // A perfect two-word corpus: 2/2 and 1/1 match, but there is no 3-gram (total_3 = 0), so p_3 and
  // p_4 stay 0 and so does BLEU.
  const BleuScore two = corpus_bleu({"the cat"}, {"the cat"});
  CHECK(two.precisions[0] == 100.0);
  CHECK(two.precisions[1] == 100.0);
  CHECK(two.precisions[2] == 0.0);
  CHECK(two.score == 0.0);
}

TEST_CASE("metrics: corpus_bleu of no sentence") {
  const BleuScore s = corpus_bleu({}, {});
  CHECK(s.score == 0.0);
  CHECK(s.bp == 1.0);
  CHECK(s.sys_len == 0);
  CHECK(s.ref_len == 0);
  CHECK(s.to_string() == "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
}

TEST_CASE("metrics: Bleu with several references") {
  // hyp "a b c d" (4 tokens) vs refs "a b c d e f" (6) and "a b c" (3): every hypothesis n-gram is in
  // the first reference, so all precisions are 100; the closest length is 3 (|4−3| < |4−6|), so
  // BP = 1 and BLEU = 100. Against the first reference alone BP = exp(1 − 6/4).
  Bleu both;
  both.add("a b c d", {"a b c d e f", "a b c"});
  CHECK(both.score().ref_len == 3);
  CHECK(both.score().score == doctest::Approx(100.0).epsilon(1e-12));
  Bleu one;
  one.add("a b c d", {"a b c d e f"});
  CHECK(one.score().score == doctest::Approx(100.0 * std::exp(-0.5)).epsilon(1e-12));

  // A tie in distance (|4−5| = |4−3|) picks the shorter reference: r = 3, BP = 1.
  Bleu tie;
  tie.add("a b c d", {"a b c d e", "a b c"});
  CHECK(tie.score().ref_len == 3);
  CHECK(tie.score().bp == 1.0);

  // Clipping takes the largest count in any one reference: "x x" matches twice only because the
  // second reference holds two x's. 1-grams 2/2, 2-gram "x x" 1/1 (second reference) → then no
  // 3-gram: BLEU 0, but the counts show the clipping.
  Bleu clip;
  clip.add("x x", {"x y", "x x"});
  CHECK(clip.score().matches[0] == 2);
  CHECK(clip.score().matches[1] == 1);
}

TEST_CASE("metrics: bleu bad input") {
  check_error([] { corpus_bleu({"a", "b"}, {"a"}); }, {"corpus_bleu", "2 hypotheses", "1 references"});
  check_error([] { corpus_bleu({}, {"a"}); }, {"corpus_bleu", "0 hypotheses", "1 references"});
  Bleu bleu;
  check_error([&] { bleu.add("a b", {}); }, {"Bleu::add", "at least one reference", "a b"});
}
