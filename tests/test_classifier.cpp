// models::Classifier: shapes, pooling over real tokens only, and gradients through the pooling; and
// models::NaiveBayes, the bag-of-words baseline.
#include <cmath>
#include <vector>

#include "models/classifier.h"
#include "models/naive_bayes.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using attention::AttentionConfig;

namespace {

models::ClassifierOptions small(const std::string& attention, models::Pooling pooling) {
  models::ClassifierOptions o;
  o.vocabulary = 11;
  o.classes = 3;
  o.encoder = {/*layers=*/2, /*heads=*/2, /*head_dim=*/4, /*ff=*/16, /*dropout=*/0.0, AttentionConfig::parse(attention),
               /*clustering=*/{}};
  o.pooling = pooling;
  return o;
}

// Documents {3 1 4 1 5} and {9 2 6}, padded to `width` with `pad` after each.
Tensor documents(int64_t width, int64_t pad) {
  std::vector<int64_t> rows = {3, 1, 4, 1, 5, 9, 2, 6};
  std::vector<int64_t> tokens;
  size_t at = 0;
  for (int64_t length : {5, 3}) {
    for (int64_t n = 0; n < width; ++n) tokens.push_back(n < length ? rows[at + size_t(n)] : pad);
    at += size_t(length);
  }
  return from_vector(tokens, {2, width});
}

}  // namespace

TEST_CASE("classifier: logits (B, K), and the auxiliary loss only for neural-clustering") {
  for (const char* config : {"full", "improved-clustered:clusters=2,topk=2", "neural-clustering:clusters=2"}) {
    CAPTURE(config);
    Generator gen(1);
    models::Classifier model(small(config, models::Pooling::Mean), gen);
    const auto out = model.forward(documents(6, 0), from_vector<int64_t>({5, 3}, {2}), gen);
    CHECK(out.logits.shape() == Shape{2, 3});
    CHECK(out.aux_loss.defined() == (std::string(config).rfind("neural", 0) == 0));
  }
  Generator gen(1);
  models::Classifier model(small("full", models::Pooling::Cls), gen);
  CHECK(model.embedding->weight.shape() == Shape{12, 8});  // V + 1 rows: the last is [CLS]
  CHECK(model.forward(documents(5, 0), Tensor(), gen).logits.shape() == Shape{2, 3});
  check_error([&] { model.forward(documents(5, 11), from_vector<int64_t>({5, 3}, {2}), gen); },
              {"Classifier", "token 11", "outside the vocabulary [0, 11)"});
}

TEST_CASE("classifier: more padding, or other tokens in it, leave a document's logits unchanged") {
  for (const auto pooling : {models::Pooling::Mean, models::Pooling::Cls}) {
    for (const char* config : {"full", "improved-clustered:clusters=2,topk=2", "neural-clustering:clusters=2"}) {
      CAPTURE(config);
      CAPTURE(models::to_string(pooling));
      Generator init(2);
      models::Classifier model(small(config, pooling), init);
      model.eval();
      const Tensor lengths = from_vector<int64_t>({5, 3}, {2});
      Generator a(7), b(7);
      const Tensor tight = model.forward(documents(5, 0), lengths, a).logits;
      const Tensor loose = model.forward(documents(12, 8), lengths, b).logits;
      check_close(loose, tight, 1e-5, 1e-5);
    }
  }
}

TEST_CASE("masked_mean: the mean over real positions; padding gets no gradient, NaN in it stays out") {
  const Tensor x = uniform({2, 4, 3}, 3);
  const Tensor lengths = from_vector<int64_t>({4, 2}, {2});
  check_gradients([&](const std::vector<Tensor>& in) { return models::masked_mean(in[0], lengths); }, {x});
  const Tensor y = models::masked_mean(x, lengths);
  check_close(select(y, 0, 0), mean(select(x, 0, 0), {0}));
  check_close(select(y, 0, 1), mean(slice(select(x, 0, 1), 0, 0, 2), {0}));
  std::vector<double> values = x.to_vector<double>();
  values[size_t(1 * 12 + 3 * 3)] = std::nan("");  // row 1, position 3: padding
  check_close(models::masked_mean(from_vector(values, {2, 4, 3}), lengths), y);
  check_error([&] { models::masked_mean(x, from_vector<int64_t>({4, 0}, {2})); }, {"masked_mean", "lengths[1] = 0"});
  check_error([&] { models::masked_mean(x, from_vector<int64_t>({5, 1}, {2})); }, {"masked_mean", "[1, 4]"});
}

TEST_CASE("naive Bayes: counts by hand, normalised posteriors, bad input") {
  // Class 0 documents use tokens 0 and 1, class 1 tokens 2 and 3; vocabulary 4, alpha 1.
  models::NaiveBayes nb(4, 2);
  nb.fit({{0, 0, 1}, {1, 0}, {2, 3, 3}}, {0, 0, 1});
  // class 0: π = 2/3, counts (3, 2, 0, 0) → θ = (4, 3, 1, 1) / 9; class 1: π = 1/3, θ = (1, 1, 2, 3) / 7.
  const std::vector<double> p = nb.log_posterior({0, 2});
  const double s0 = std::log(2.0 / 3) + std::log(4.0 / 9) + std::log(1.0 / 9);
  const double s1 = std::log(1.0 / 3) + std::log(1.0 / 7) + std::log(2.0 / 7);
  const double z = std::log(std::exp(s0) + std::exp(s1));
  CHECK(p[0] == doctest::Approx(s0 - z).epsilon(1e-12));
  CHECK(p[1] == doctest::Approx(s1 - z).epsilon(1e-12));
  CHECK(nb.predict({0, 1, 0}) == 0);
  CHECK(nb.predict({3, 3, 2}) == 1);
  CHECK(nb.predict({}) == 0);  // the prior alone
  check_error([&] { nb.fit({{4}}, {0}); }, {"NaiveBayes::fit", "token 4", "[0, 4)"});
  check_error([&] { nb.fit({{0}}, {2}); }, {"NaiveBayes::fit", "label 2"});
  check_error([] { models::NaiveBayes(4, 2).log_posterior({0}); }, {"no training document"});
  check_error([] { models::NaiveBayes(4, 2, 0.0); }, {"alpha"});
}
