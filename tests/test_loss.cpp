#include <cmath>

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
