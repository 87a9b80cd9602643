#include <cmath>
#include <limits>

#include "tests/oracle.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Cross-entropy from primitive ops: log-softmax by max / exp / sum / log, the target's term through
// a one-hot constant, ignored rows weighted 0.
Tensor reference_cross_entropy(const Tensor& logits, const std::vector<int64_t>& targets, int64_t ignore_index,
                               double eps) {
  const int64_t C = logits.shape().back(), R = static_cast<int64_t>(targets.size());
  std::vector<double> onehot(static_cast<size_t>(R * C), 0.0), valid(static_cast<size_t>(R), 0.0);
  double count = 0;
  for (int64_t r = 0; r < R; ++r) {
    if (targets[r] == ignore_index) continue;
    onehot[static_cast<size_t>(r * C + targets[r])] = 1;
    valid[static_cast<size_t>(r)] = 1;
    ++count;
  }
  const Tensor x = reshape(logits, {R, C});
  const Tensor shifted = x - max(x, {-1}, KeepDim::Yes);
  const Tensor logp = shifted - log(sum(exp(shifted), {-1}, KeepDim::Yes));
  const Tensor nll = -sum(logp * from_vector<double>(onehot, {R, C}), {-1});
  const Tensor smooth = -mean(logp, {-1});
  const Tensor row = nll * (1 - eps) + smooth * eps;
  return sum(row * from_vector<double>(valid, {R})) / count;
}

Tensor reference_bce(const Tensor& x, const Tensor& t) { return mean(relu(x) - x * t + log(exp(-abs(x)) + 1.0)); }

}  // namespace

TEST_CASE("cross_entropy: gradcheck, with ignore_index and label smoothing") {
  const Tensor logits = uniform({2, 3, 5}, 1, -3, 3);
  const Tensor t = from_vector<int64_t>({4, 0, 2, -100, 1, 4}, {2, 3});
  check_gradients([t](const std::vector<Tensor>& in) { return cross_entropy(in[0], t); }, {logits});
  check_gradients([t](const std::vector<Tensor>& in) { return cross_entropy(in[0], t, -100, 0.1); }, {logits});
  const Tensor t4 = from_vector<int64_t>({4, 0, 2, 3, 1, 4}, {2, 3});  // class 4 doubles as ignore_index
  check_gradients([t4](const std::vector<Tensor>& in) { return cross_entropy(in[0], t4, 4, 0.3); }, {logits});
  const Tensor t32 = from_vector<int32_t>({1, 2, 3}, {3});
  check_gradients([t32](const std::vector<Tensor>& in) { return cross_entropy(in[0], t32); }, {uniform({3, 4}, 2)});
}

TEST_CASE("cross_entropy equals its composition from primitive ops: values and gradients") {
  const Tensor logits = uniform({4, 3, 6}, 3, -4, 4);
  const std::vector<int64_t> t = {0, 5, 2, -100, 3, 3, 1, -100, 4, 0, 2, 5};
  const Tensor targets = from_vector<int64_t>(t, {4, 3});
  for (double eps : {0.0, 0.1, 0.5}) {
    INFO("label_smoothing = " << eps);
    check_matches_reference([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets, -100, eps); },
                            [&](const std::vector<Tensor>& in) { return reference_cross_entropy(in[0], t, -100, eps); },
                            {logits}, 1e-12, 1e-10);
  }
  // ignore_index may be a real class id (a padding token 0, say)
  const std::vector<int64_t> u = {0, 5, 2, 0, 3, 3, 1, 0, 4, 0, 2, 5};
  const Tensor padded = from_vector<int64_t>(u, {4, 3});
  check_matches_reference([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], padded, 0, 0.2); },
                          [&](const std::vector<Tensor>& in) { return reference_cross_entropy(in[0], u, 0, 0.2); },
                          {logits}, 1e-12, 1e-10);
}

TEST_CASE("cross_entropy with every target ignored is 0 with a zero gradient") {
  Tensor logits = uniform({3, 4}, 4);
  logits.set_requires_grad(true);
  const Tensor loss = cross_entropy(logits, full({3}, -100, {DType::Int64}), -100, 0.1);
  CHECK(loss.item<double>() == 0.0);
  loss.backward();
  REQUIRE(logits.grad().defined());
  for (double g : logits.grad().to_vector<double>()) CHECK(g == 0.0);
  CHECK(cross_entropy(zeros({0, 4}), zeros({0}, {DType::Int64})).item<float>() == 0.0f);
}

TEST_CASE("cross_entropy is stable for logits of ±1e4") {
  Tensor logits = from_vector<float>({1e4f, -1e4f, 0.0f,  //
                                      -1e4f, -1e4f, -1e4f},
                                     {2, 3});
  logits.set_requires_grad(true);
  const Tensor t = from_vector<int64_t>({1, 2}, {2});
  const Tensor loss = cross_entropy(logits, t);
  // row 0: lse = 1e4, loss = 1e4 − (−1e4) = 2e4; row 1: log 3
  CHECK(loss.item<float>() == doctest::Approx((2e4 + std::log(3.0)) / 2));
  loss.backward();
  const std::vector<float> g = logits.grad().to_vector<float>();
  for (float v : g) CHECK(std::isfinite(v));
  CHECK(g[0] == doctest::Approx(0.5));   // (p − onehot) / 2 = (1 − 0) / 2
  CHECK(g[1] == doctest::Approx(-0.5));  // (0 − 1) / 2
  CHECK(std::isfinite(cross_entropy(logits, t, -100, 0.2).item<float>()));
}

TEST_CASE("cross_entropy refuses out-of-range targets and leaves everything unchanged") {
  Tensor logits = uniform({3, 4}, 5);
  logits.set_requires_grad(true);
  const std::vector<double> before = logits.to_vector<double>();
  Tape::current().clear();
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, 4, 1}, {3})); },
              {"cross_entropy", "target 4", "position (1,)", "4 classes", "ignore_index (-100)"});
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({-1, 0, 1}, {3})); }, {"cross_entropy", "target -1"});
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, -100, 1}, {3}), -1); }, {"cross_entropy", "target -100"});
  CHECK(Tape::current().size() == 0);
  CHECK(logits.to_vector<double>() == before);
  CHECK_FALSE(logits.grad().defined());
}

TEST_CASE("cross_entropy checks its arguments") {
  const Tensor logits = uniform({3, 4}, 6);
  const Tensor t = from_vector<int64_t>({0, 1, 2}, {3});
  check_error([&] { cross_entropy(ones({3, 4}, {DType::Int64}), t); }, {"cross_entropy", "floating", "int64"});
  check_error([&] { cross_entropy(logits, ones({3}, {DType::Float64})); }, {"cross_entropy", "targets", "int64", "float64"});
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, 1}, {2})); }, {"cross_entropy", "(2,)", "(3, 4)", "(3,)"});
  check_error([&] { cross_entropy(logits, from_vector<int64_t>({0, 1, 2}, {3, 1})); }, {"cross_entropy", "(3, 1)"});
  check_error([&] { cross_entropy(logits, t, -100, 1.0); }, {"cross_entropy", "label_smoothing", "[0, 1)"});
  check_error([&] { cross_entropy(logits, t, -100, -0.1); }, {"cross_entropy", "label_smoothing", "-0.1"});
  check_error([&] { cross_entropy(zeros({3, 0}), t); }, {"cross_entropy", "at least one class", "(3, 0)"});
  check_error([&] { cross_entropy(scalar(1.0), scalar(0, {DType::Int64})); }, {"cross_entropy", "at least 1 dim"});
}

TEST_CASE("binary_cross_entropy_with_logits: gradcheck of logits and targets, and the primitive composition") {
  const Tensor x = uniform({3, 5}, 7, -4, 4), t = uniform({3, 5}, 8, 0, 1);
  check_gradients([](const std::vector<Tensor>& in) { return binary_cross_entropy_with_logits(in[0], in[1]); }, {x, t});
  check_matches_reference([](const std::vector<Tensor>& in) { return binary_cross_entropy_with_logits(in[0], in[1]); },
                          [](const std::vector<Tensor>& in) { return reference_bce(in[0], in[1]); }, {x, t}, 1e-12, 1e-10);
}

TEST_CASE("binary_cross_entropy_with_logits is stable for logits of ±1e4") {
  Tensor x = from_vector<float>({1e4f, -1e4f, 1e4f, -1e4f}, {4});
  x.set_requires_grad(true);
  const Tensor t = from_vector<float>({1, 0, 0, 1}, {4});
  const Tensor loss = binary_cross_entropy_with_logits(x, t);
  CHECK(loss.item<float>() == doctest::Approx(2e4 / 4));  // two confident right, two confidently wrong by 1e4
  loss.backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>{0, 0, 0.25f, -0.25f});
  CHECK(binary_cross_entropy_with_logits(zeros({0}), zeros({0})).item<float>() == 0.0f);
}

TEST_CASE("binary_cross_entropy_with_logits checks its arguments") {
  const Tensor x = uniform({2, 3}, 9);
  check_error([&] { binary_cross_entropy_with_logits(x, uniform({3, 2}, 10)); }, {"binary_cross_entropy_with_logits", "(3, 2)", "(2, 3)"});
  check_error([&] { binary_cross_entropy_with_logits(x, ones({2, 3}, {DType::Float32})); },
              {"binary_cross_entropy_with_logits", "float64", "float32"});
  check_error([] { binary_cross_entropy_with_logits(ones({2}, {DType::Int64}), ones({2}, {DType::Int64})); },
              {"binary_cross_entropy_with_logits", "floating", "int64"});
}

TEST_CASE("cross_entropy on inputs large enough to run on several threads matches the composition") {
  const int64_t R = 300, C = 157;
  const Tensor logits = uniform({R, C}, 11, -5, 5);
  Generator gen(12);
  std::vector<int64_t> t = randint(0, C, {R}, gen).to_vector<int64_t>();
  for (int64_t r = 0; r < R; r += 7) t[static_cast<size_t>(r)] = -100;
  const Tensor targets = from_vector<int64_t>(t, {R});
  check_matches_reference([&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets, -100, 0.1); },
                          [&](const std::vector<Tensor>& in) { return reference_cross_entropy(in[0], t, -100, 0.1); },
                          {logits}, 1e-12, 1e-10);
  const Tensor x = uniform({300, 150}, 13, -5, 5), p = uniform({300, 150}, 14, 0, 1);
  check_matches_reference([](const std::vector<Tensor>& in) { return binary_cross_entropy_with_logits(in[0], in[1]); },
                          [](const std::vector<Tensor>& in) { return reference_bce(in[0], in[1]); }, {x, p}, 1e-12, 1e-10);
}

// ---------------------------------------------------------------------------------------------
// nll_loss, mse_loss, kl_div (compositions of ops)

TEST_CASE("nll_loss of log_softmax equals cross_entropy: values and gradients, ignore_index, int32 targets") {
  const Tensor logits = uniform({4, 3, 6}, 40, -4, 4);
  const std::vector<int64_t> t = {0, 5, 2, -100, 3, 3, 1, -100, 4, 0, 2, 5};
  const Tensor targets = from_vector<int64_t>(t, {4, 3});
  check_matches_reference([&](const std::vector<Tensor>& in) { return nll_loss(log_softmax(in[0]), targets); },
                          [&](const std::vector<Tensor>& in) { return cross_entropy(in[0], targets); }, {logits},
                          1e-12, 1e-10);
  const Tensor t32 = from_vector<int32_t>({1, 0, 2}, {3});
  const Tensor lp = log_softmax(uniform({3, 4}, 41));
  check_close(nll_loss(lp, t32), scalar(-(lp.to_vector<double>()[1] + lp.to_vector<double>()[4] +
                                          lp.to_vector<double>()[10]) / 3, {DType::Float64}), 1e-14, 1e-14);
  check_gradients([targets](const std::vector<Tensor>& in) { return nll_loss(in[0], targets); }, {uniform({4, 3, 6}, 42)});
}

TEST_CASE("nll_loss with every target ignored is 0 with a zero gradient, even at −inf log-probabilities") {
  Tensor lp = full({2, 3}, -std::numeric_limits<double>::infinity(), {DType::Float64});
  lp.set_requires_grad(true);
  const Tensor loss = nll_loss(lp, from_vector<int64_t>({-100, -100}, {2}));
  CHECK(loss.item<double>() == 0.0);
  loss.backward();
  check_close(lp.grad(), zeros({2, 3}, {DType::Float64}));
}

TEST_CASE("mse_loss: the mean of squared differences, gradients to both sides") {
  const Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2}), t = from_vector<double>({1, 0, 5, 4}, {2, 2});
  check_close(mse_loss(x, t), scalar(2.0, {DType::Float64}));  // (0 + 4 + 4 + 0) / 4
  CHECK(mse_loss(zeros({0, 3}), zeros({0, 3})).item<double>() == 0.0);
  check_gradients([](const std::vector<Tensor>& in) { return mse_loss(in[0], in[1]); },
                  {uniform({3, 4}, 43), uniform({3, 4}, 44)});
}

TEST_CASE("kl_div: Σ p (log p − log q) per row, averaged over rows; 0 · log 0 = 0 with finite gradients") {
  const Tensor q = from_vector<double>({0.5, 0.25, 0.25, 0.1, 0.1, 0.8}, {2, 3});
  const Tensor p = from_vector<double>({0.25, 0.25, 0.5, 0, 0.5, 0.5}, {2, 3});
  const double row0 = 0.25 * std::log(0.25 / 0.5) + 0.25 * std::log(0.25 / 0.25) + 0.5 * std::log(0.5 / 0.25);
  const double row1 = 0.5 * std::log(0.5 / 0.1) + 0.5 * std::log(0.5 / 0.8);
  check_close(kl_div(log(q), p), scalar((row0 + row1) / 2, {DType::Float64}), 1e-14, 1e-14);
  // KL(p ‖ p) = 0.
  CHECK(std::abs(kl_div(log(p + 1e-300), p).item<double>()) < 1e-12);
  // Gradients in both arguments, with a zero in p (one-sided there: p stays ≥ 0).
  check_gradients([](const std::vector<Tensor>& in) { return kl_div(in[0], in[1]); },
                  {log_softmax(uniform({3, 4}, 45)), softmax(uniform({3, 4}, 46))});
  Tensor pz = from_vector<double>({0, 0.5, 0.5}, {1, 3});
  pz.set_requires_grad(true);
  const Tensor lq = log(from_vector<double>({0.2, 0.3, 0.5}, {1, 3}));
  kl_div(lq, pz).backward();
  // dp = log p − log q + 1 where p > 0, −log q where p = 0
  check_close(pz.grad(), from_vector<double>({-std::log(0.2), std::log(0.5 / 0.3) + 1, 1}, {1, 3}), 1e-14, 1e-14);
}

TEST_CASE("nll_loss, mse_loss and kl_div check their arguments") {
  const Tensor lp = zeros({2, 3}, {DType::Float64});
  check_error([&] { nll_loss(lp, from_vector<int64_t>({0, 3}, {2})); },
              {"nll_loss", "target 3", "out of range for 3 classes", "log_probs of shape (2, 3)"});
  check_error([&] { nll_loss(lp, zeros({2})); }, {"nll_loss", "int64", "float32", "(2,)"});
  check_error([&] { nll_loss(lp, from_vector<int64_t>({0, 1, 2}, {3})); },
              {"nll_loss", "targets of shape (3,)", "log_probs of shape (2, 3)", "(2,)"});
  check_error([&] { nll_loss(zeros({2, 3}, {DType::Int64}), from_vector<int64_t>({0, 1}, {2})); },
              {"nll_loss", "floating", "int64"});
  check_error([&] { mse_loss(lp, zeros({3, 2}, {DType::Float64})); }, {"mse_loss", "(3, 2)", "input of shape (2, 3)"});
  check_error([&] { mse_loss(lp, zeros({2, 3})); }, {"mse_loss", "dtype mismatch", "float64", "float32"});
  check_error([&] { mse_loss(lp, Tensor()); }, {"mse_loss", "undefined"});
  check_error([&] { kl_div(lp, zeros({2, 2}, {DType::Float64})); }, {"kl_div", "(2, 2)", "log_q of shape (2, 3)"});
  check_error([&] { kl_div(scalar(0.0), scalar(0.0)); }, {"kl_div", "last dim", "0-d"});
  check_error([&] { kl_div(zeros({2}, {DType::Int32}), zeros({2}, {DType::Int32})); }, {"kl_div", "floating", "int32"});
}
