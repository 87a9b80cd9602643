// CTC decoding: greedy by hand; prefix beam search against the most probable labelling found by
// enumerating every alignment, its score against the CTC loss, beam = 1's actual behaviour, a case
// where greedy decoding is wrong, and bad input.
#include <cmath>
#include <limits>

#include "nn/decode/ctc.h"
#include "tests/ctc_brute_force.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using nn::decode::CtcHypothesis;
using nn::decode::ctc_beam_search;
using nn::decode::ctc_greedy_decode;

namespace {

using Labels = std::vector<int64_t>;

// log of per-frame probabilities (T, C), given row by row.
Tensor log_of(const std::vector<double>& p, int64_t T, int64_t C) {
  std::vector<double> l(p.size());
  for (size_t i = 0; i < p.size(); ++i) l[i] = std::log(p[i]);
  return from_vector<double>(l, {T, C});
}

// −ctc_loss of one utterance: log p(labels | x) summed over every alignment.
double exact_log_prob(const Tensor& log_probs, int64_t length, const Labels& labels, int64_t blank) {
  const int64_t T = log_probs.shape()[0], C = log_probs.shape()[1], S = static_cast<int64_t>(labels.size());
  const Tensor targets = S > 0 ? from_vector<int64_t>(labels, {1, S}) : zeros({1, 0}, {DType::Int64});
  return -ctc_loss(reshape(log_probs, {1, T, C}), targets, from_vector<int64_t>({length}, {1}),
                   from_vector<int64_t>({S}, {1}), blank, CtcReduction::Sum)
              .item<double>();
}

}  // namespace

TEST_CASE("ctc_greedy_decode: argmax per frame, repeats merged, blanks dropped") {
  // frames' argmax: 1 1 0 1 2 2 0 0 3 → 1 1 2 3
  const std::vector<int64_t> best{1, 1, 0, 1, 2, 2, 0, 0, 3};
  std::vector<double> p;
  for (int64_t k : best)
    for (int64_t c = 0; c < 4; ++c) p.push_back(c == k ? 0.7 : 0.1);
  const Tensor lp = log_of(p, 9, 4);
  CtcHypothesis h = ctc_greedy_decode(lp, 9);
  CHECK(h.labels == Labels{1, 1, 2, 3});
  CHECK(h.log_prob == doctest::Approx(9 * std::log(0.7)));
  CHECK(ctc_greedy_decode(lp, 5).labels == Labels{1, 1, 2});  // frames beyond the length are padding
  CHECK(ctc_greedy_decode(lp, 0).labels.empty());
  CHECK(ctc_greedy_decode(lp, 0).log_prob == 0.0);
  // another blank: class 1 now separates, class 0 is a label
  CHECK(ctc_greedy_decode(lp, 9, 1).labels == Labels{0, 2, 0, 3});
  // float32 and a non-contiguous view read the same
  CHECK(ctc_greedy_decode(to(lp, DType::Float32), 9).labels == Labels{1, 1, 2, 3});
  CHECK(ctc_greedy_decode(transpose(contiguous(transpose(lp, 0, 1)), 0, 1), 9).labels == Labels{1, 1, 2, 3});
}

TEST_CASE("ctc_beam_search beats greedy decoding where the best path is not the best labelling") {
  // Two frames of (blank 0.6, a 0.4): the best path is blank blank → "" with p = 0.36, but "a"
  // collects a a, a blank, blank a: 0.16 + 0.24 + 0.24 = 0.64.
  const Tensor lp = log_of({0.6, 0.4, 0.6, 0.4}, 2, 2);
  CHECK(ctc_greedy_decode(lp, 2).labels.empty());
  const CtcHypothesis h = ctc_beam_search(lp, 2, 2);
  CHECK(h.labels == Labels{1});
  CHECK(h.log_prob == doctest::Approx(std::log(0.64)).epsilon(1e-14));
  // beam = 1 keeps "" after the first frame (0.6 against 0.4) and never sees "a" win
  const CtcHypothesis one = ctc_beam_search(lp, 2, 1);
  CHECK(one.labels.empty());
  CHECK(one.log_prob == doctest::Approx(std::log(0.36)).epsilon(1e-14));
}

TEST_CASE("ctc_beam_search with beam = 1 is not best-path decoding; it sums a prefix's alignments") {
  // Frame 1: blank 0.4, a 0.6, b 0; frame 2: blank 0.3, a 0.3, b 0.4. Greedy: a b (path 0.6 · 0.4 =
  // 0.24). Beam 1 keeps "a" after frame 1 (0.6 against "" 0.4), then "a" gathers a blank and a a
  // (0.6 · 0.3 + 0.6 · 0.3 = 0.36) against "ab" 0.24: it returns "a", scored 0.36, below "a"'s true
  // probability 0.48 (blank a, 0.12, went with the pruned "").
  const Tensor lp = log_of({0.4, 0.6, 0.0,  //
                            0.3, 0.3, 0.4},
                           2, 3);
  const CtcHypothesis greedy = ctc_greedy_decode(lp, 2);
  CHECK(greedy.labels == Labels{1, 2});
  CHECK(greedy.log_prob == doctest::Approx(std::log(0.24)));
  const CtcHypothesis one = ctc_beam_search(lp, 2, 1);
  CHECK(one.labels == Labels{1});
  CHECK(one.log_prob == doctest::Approx(std::log(0.36)));
  CHECK(exact_log_prob(lp, 2, {1}, 0) == doctest::Approx(std::log(0.48)));
  const CtcHypothesis wide = ctc_beam_search(lp, 2, 3);
  CHECK(wide.labels == Labels{1});
  CHECK(wide.log_prob == doctest::Approx(std::log(0.48)));
  // Where each frame is certain (one class of probability 1) there is one path, and every decoder
  // returns its labelling with log-probability 0.
  const std::vector<int64_t> best{2, 2, 0, 2, 1, 1};
  std::vector<double> p;
  for (int64_t k : best)
    for (int64_t c = 0; c < 3; ++c) p.push_back(c == k ? 1.0 : 0.0);
  const Tensor certain = log_of(p, 6, 3);
  for (int64_t beam : {1, 2, 5}) {
    const CtcHypothesis h = ctc_beam_search(certain, 6, beam);
    CHECK(h.labels == Labels{2, 2, 1});
    CHECK(h.log_prob == 0.0);
  }
  CHECK(ctc_greedy_decode(certain, 6).labels == Labels{2, 2, 1});
}

TEST_CASE("ctc_beam_search finds the most probable labelling, enumerated over every alignment") {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const int64_t T = 3 + static_cast<int64_t>(seed % 4), C = 3;  // T = 3 … 6: 3^6 = 729 paths at most
    const int64_t blank = static_cast<int64_t>(seed % 3);
    const Tensor lp = log_softmax(uniform({T, C}, 40 + seed, -2, 2));
    INFO("seed " << seed << " T " << T << " blank " << blank);
    const auto p = ctc_labelling_probabilities(lp.to_vector<double>(), T, C, blank);
    Labels best;
    double best_p = -1;
    for (const auto& [labels, prob] : p)
      if (prob > best_p) best = labels, best_p = prob;
    // a beam wide enough never drops a prefix: the search is exact
    const CtcHypothesis h = ctc_beam_search(lp, T, 1000, blank);
    CHECK(h.labels == best);
    CHECK(h.log_prob == doctest::Approx(std::log(best_p)).epsilon(1e-12));
    CHECK(h.log_prob == doctest::Approx(exact_log_prob(lp, T, h.labels, blank)).epsilon(1e-12));
    // any beam: the score is the mass of the alignments kept, at most the labelling's probability
    for (int64_t beam : {1, 2, 3}) {
      INFO("beam " << beam);
      const CtcHypothesis b = ctc_beam_search(lp, T, beam, blank);
      CHECK(b.log_prob <= exact_log_prob(lp, T, b.labels, blank) + 1e-12);
    }
    const CtcHypothesis g = ctc_greedy_decode(lp, T, blank);
    CHECK(g.log_prob <= exact_log_prob(lp, T, g.labels, blank) + 1e-12);
    CHECK(g.log_prob <= std::log(best_p) + 1e-12);
  }
}

TEST_CASE("CTC decoders: length 0, and bad input") {
  const Tensor lp = log_softmax(uniform({4, 3}, 60));
  const CtcHypothesis empty = ctc_beam_search(lp, 0, 3);
  CHECK(empty.labels.empty());
  CHECK(empty.log_prob == 0.0);
  for (const char* op : {"ctc_greedy_decode", "ctc_beam_search"}) {
    const bool greedy = std::string(op) == "ctc_greedy_decode";
    const auto decode = [&](const Tensor& x, int64_t length, int64_t blank) {
      return greedy ? ctc_greedy_decode(x, length, blank) : ctc_beam_search(x, length, 2, blank);
    };
    check_error([&] { decode(lp, 5, 0); }, {op, "length = 5", "[0, 4]"});
    check_error([&] { decode(lp, -1, 0); }, {op, "length = -1"});
    check_error([&] { decode(lp, 4, 3); }, {op, "blank = 3", "3 classes"});
    check_error([&] { decode(lp, 4, -1); }, {op, "blank = -1"});
    check_error([&] { decode(reshape(lp, {1, 4, 3}), 1, 0); }, {op, "(T, C)", "(1, 4, 3)"});
    check_error([&] { decode(zeros({4, 0}), 1, 0); }, {op, "at least one class"});
    check_error([&] { decode(ones({4, 3}, {DType::Int64}), 1, 0); }, {op, "floating", "int64"});
    check_error([&] { decode(Tensor{}, 1, 0); }, {op, "undefined"});
  }
  check_error([&] { ctc_beam_search(lp, 4, 0); }, {"ctc_beam_search", "beam must be at least 1", "0"});
}
