#include "nn/decode/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/creation.h"
#include "core/error.h"
#include "ops/shape.h"

namespace tapestry::nn::decode {

namespace {

void check_search(const char* op, int64_t batch, const SearchOptions& o) {
  TP_CHECK(batch >= 1, op, "needs at least one sentence, got batch = ", batch);
  TP_CHECK(o.beam >= 1, op, "beam must be at least 1, got ", o.beam);
  TP_CHECK(std::isfinite(o.length_penalty), op, "length_penalty must be finite, got ", o.length_penalty);
  TP_CHECK(int64_t(o.max_lengths.size()) == batch, op, "needs one maximum length per sentence: ", batch,
           " sentences, ", o.max_lengths.size(), " lengths");
  for (const int64_t m : o.max_lengths) TP_CHECK(m >= 1, op, "maximum lengths must be at least 1, got ", m);
}

// next(last) as host floats, checked to be (rows, V) with no NaN; sets vocab.
std::vector<float> next_log_probs(const char* op, const NextLogProbs& next, const std::vector<int64_t>& last,
                                  int64_t& vocab) {
  const Tensor lp = next(from_vector(last, {int64_t(last.size())}));
  TP_CHECK(lp.defined() && lp.dim() == 2 && lp.size(0) == int64_t(last.size()) && lp.size(1) >= 1 &&
               is_floating(lp.dtype()),
           op, "next must return (", last.size(), ", V) floating log-probabilities, got ",
           lp.defined() ? to_string(lp.shape()) + " " + dtype_name(lp.dtype()) : std::string("an undefined tensor"));
  vocab = lp.size(1);
  const std::vector<float> host = to(lp, DType::Float32).to_vector<float>();
  for (const float x : host) TP_CHECK(!std::isnan(x), op, "next returned a NaN log-probability");
  return host;
}

void set_score(Hypothesis& h, double length_penalty) {
  const double length = double(h.tokens.size()) + (h.ended ? 1.0 : 0.0);
  h.score = h.log_prob / std::pow(length, length_penalty);
}

}  // namespace

std::vector<Hypothesis> greedy_search(int64_t batch, const NextLogProbs& next, const SelectRows& select_rows,
                                      const SearchOptions& options) {
  const char* op = "greedy_search";
  check_search(op, batch, options);
  std::vector<Hypothesis> out(static_cast<size_t>(batch));
  std::vector<int64_t> open(static_cast<size_t>(batch));  // the sentence of each row of the model's state
  std::iota(open.begin(), open.end(), 0);
  std::vector<int64_t> last(size_t(batch), options.bos);
  for (int64_t t = 0; !open.empty(); ++t) {
    int64_t V = 0;
    const std::vector<float> lp = next_log_probs(op, next, last, V);
    std::vector<int64_t> rows, still_open, tokens;
    for (size_t r = 0; r < open.size(); ++r) {
      const float* row = lp.data() + r * size_t(V);
      const int64_t best = int64_t(std::max_element(row, row + V) - row);  // the first maximum
      Hypothesis& h = out[size_t(open[r])];
      h.log_prob += row[best];
      h.ended = best == options.eos;
      if (!h.ended) h.tokens.push_back(best);
      if (h.ended || t + 1 >= options.max_lengths[size_t(open[r])]) {
        set_score(h, options.length_penalty);
      } else {
        rows.push_back(int64_t(r));
        still_open.push_back(open[r]);
        tokens.push_back(best);
      }
    }
    if (!rows.empty() && rows.size() < open.size()) select_rows(from_vector(rows, {int64_t(rows.size())}));
    open = std::move(still_open);
    last = std::move(tokens);
  }
  return out;
}

std::vector<std::vector<Hypothesis>> beam_search(int64_t batch, const NextLogProbs& next, const SelectRows& select_rows,
                                                 const SearchOptions& options) {
  const char* op = "beam_search";
  check_search(op, batch, options);
  const int64_t K = options.beam;
  struct Open {
    std::vector<int64_t> tokens;
    double log_prob = 0;
  };
  struct Candidate {
    double log_prob;
    int64_t beam, token;
  };
  std::vector<std::vector<Hypothesis>> finished(static_cast<size_t>(batch));
  std::vector<int64_t> sentences(static_cast<size_t>(batch));  // the open sentences, each K consecutive rows of the state
  std::iota(sentences.begin(), sentences.end(), 0);
  std::vector<std::vector<Open>> beams(static_cast<size_t>(batch), std::vector<Open>(static_cast<size_t>(K)));

  std::vector<int64_t> rows;
  for (int64_t s = 0; s < batch; ++s) rows.insert(rows.end(), size_t(K), s);
  select_rows(from_vector(rows, {int64_t(rows.size())}));
  std::vector<int64_t> last(rows.size(), options.bos);

  for (int64_t t = 0; !sentences.empty(); ++t) {
    int64_t V = 0;
    const std::vector<float> lp = next_log_probs(op, next, last, V);
    std::vector<int64_t> next_sentences, next_rows, next_last;
    std::vector<std::vector<Open>> next_beams;
    for (size_t i = 0; i < sentences.size(); ++i) {
      const int64_t s = sentences[i];
      // Every extension of the sentence's hypotheses (at step 0 they are all the same: only the first).
      std::vector<Candidate> candidates;
      for (int64_t k = 0; k < (t == 0 ? 1 : K); ++k) {
        const float* row = lp.data() + (i * size_t(K) + size_t(k)) * size_t(V);
        for (int64_t v = 0; v < V; ++v) candidates.push_back({beams[i][size_t(k)].log_prob + row[v], k, v});
      }
      const size_t take = std::min(candidates.size(), size_t(2 * K));
      std::partial_sort(candidates.begin(), candidates.begin() + std::ptrdiff_t(take), candidates.end(),
                        [](const Candidate& a, const Candidate& b) {
                          if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
                          return a.beam != b.beam ? a.beam < b.beam : a.token < b.token;
                        });
      std::vector<Open> kept;
      std::vector<int64_t> parents;
      for (size_t c = 0; c < take && int64_t(kept.size()) < K; ++c) {
        const Candidate& x = candidates[c];
        const Open& parent = beams[i][size_t(x.beam)];
        if (x.token == options.eos) {
          if (int64_t(finished[size_t(s)].size()) < K) {
            Hypothesis h{parent.tokens, true, x.log_prob, 0};
            set_score(h, options.length_penalty);
            finished[size_t(s)].push_back(std::move(h));
          }
          continue;
        }
        Open o{parent.tokens, x.log_prob};
        o.tokens.push_back(x.token);
        kept.push_back(std::move(o));
        parents.push_back(int64_t(i) * K + x.beam);
      }
      const bool at_limit = t + 1 >= options.max_lengths[size_t(s)];
      if (at_limit) {
        for (Open& o : kept) {
          Hypothesis h{std::move(o.tokens), false, o.log_prob, 0};
          set_score(h, options.length_penalty);
          finished[size_t(s)].push_back(std::move(h));
        }
      }
      if (at_limit || kept.empty() || int64_t(finished[size_t(s)].size()) >= K) {
        auto& f = finished[size_t(s)];
        std::stable_sort(f.begin(), f.end(), [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
        if (int64_t(f.size()) > K) f.resize(size_t(K));
        continue;
      }
      // Fewer than K extensions (a vocabulary smaller than the beam): the rest are copies that can never win.
      while (int64_t(kept.size()) < K) {
        kept.push_back({kept.front().tokens, -std::numeric_limits<double>::infinity()});
        parents.push_back(parents.front());
      }
      next_sentences.push_back(s);
      for (size_t k = 0; k < size_t(K); ++k) next_last.push_back(kept[k].tokens.back());
      next_rows.insert(next_rows.end(), parents.begin(), parents.end());
      next_beams.push_back(std::move(kept));
    }
    if (!next_rows.empty()) select_rows(from_vector(next_rows, {int64_t(next_rows.size())}));
    sentences = std::move(next_sentences);
    beams = std::move(next_beams);
    last = std::move(next_last);
  }
  return finished;
}

}  // namespace tapestry::nn::decode
