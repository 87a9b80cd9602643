#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

TEST_CASE("a tensor used by two branches receives the sum of their gradients") {
  Tensor x = from_vector<double>({1, 2, 3}, {3});
  x.set_requires_grad(true);
  // y = Σ x² + Σ 3x  =>  dy/dx = 2x + 3
  const Tensor y = sum(x * x) + sum(x * 3.0);
  y.backward();
  check_close(x.grad(), from_vector<double>({5, 7, 9}, {3}));
}

TEST_CASE("a gradient passed on uncopied to several tensors stays theirs alone") {
  // add passes dy itself to both inputs (and to the seed's owner): accumulating into one of them
  // later, or a second contribution in the same pass, must not show through in the others.
  Tensor a = from_vector<double>({1, 2}, {2}), b = from_vector<double>({3, 4}, {2});
  a.set_requires_grad(true);
  b.set_requires_grad(true);
  const Tensor seed = from_vector<double>({1, 10}, {2});
  (a + b).backward(seed);
  check_close(a.grad(), seed);
  check_close(b.grad(), seed);
  (a * 2.0).backward(seed);  // only a's gradient grows
  check_close(a.grad(), from_vector<double>({3, 30}, {2}));
  check_close(b.grad(), seed);
  check_close(seed, from_vector<double>({1, 10}, {2}));

  // x reaches y twice through one add, then once more through a mul: 1 + 1 + 3 per element
  Tensor x = from_vector<double>({5, 6}, {2});
  x.set_requires_grad(true);
  const Tensor y = x + x;
  Tensor z = y + x * 3.0;
  sum(z).backward();
  check_close(x.grad(), from_vector<double>({5, 5}, {2}));

  // a retained intermediate's gradient is its own, too
  Tensor p = from_vector<double>({1, 1}, {2});
  p.set_requires_grad(true);
  const Tensor q = p * 1.0;
  q.retain_grad();
  const Tensor r = q + p;
  r.backward(seed);
  check_close(q.grad(), seed);
  check_close(p.grad(), from_vector<double>({2, 20}, {2}));
}

TEST_CASE("a shared gradient and a fresh one are summed in the fresh one's storage") {
  // A residual: add passes dy, shared with its other input, to x first; then x's own branch sends
  // a tensor of its own, which takes the sum (no third tensor). `fresh` records where it lies.
  Tensor x = from_vector<float>({1, 2, 3}, {3});
  x.set_requires_grad(true);
  const void* fresh = nullptr;
  Tensor branch = empty({3}, {DType::Float32});
  copy_(branch, x.detach());
  record("triple", {x}, {branch}, [&fresh](const std::vector<Tensor>& dy, Gradients& g) {
    Tensor mine = dy[0] * 3.0;
    fresh = mine.raw_data();
    g.accumulate(0, std::move(mine));
  });
  const Tensor seed = from_vector<float>({1, 10, 100}, {3});
  (x + branch).backward(seed);
  check_close(x.grad(), from_vector<float>({4, 40, 400}, {3}));
  CHECK(x.grad().raw_data() == fresh);
  check_close(seed, from_vector<float>({1, 10, 100}, {3}));  // the shared gradient is left as it was
}

TEST_CASE("gradients accumulate over backward passes until zero_grad") {
  Tensor x = from_vector<double>({2}, {1});
  x.set_requires_grad(true);
  sum(x * x).backward();
  sum(x * x).backward();
  check_close(x.grad(), from_vector<double>({8}, {1}));
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  sum(x * x * x).backward();
  check_close(x.grad(), from_vector<double>({12}, {1}));
}

TEST_CASE("Retain::Yes keeps the tape for a second backward pass") {
  Tape::current().clear();  // counts entries below: none left over from an earlier test's forward passes
  Tensor x = from_vector<double>({1, -2}, {2});
  x.set_requires_grad(true);
  const Tensor h = exp(x);
  const Tensor a = sum(h * 2.0), b = sum(h * h);
  a.backward(Retain::Yes);
  const std::vector<double> after_a = x.grad().to_vector<double>();
  CHECK(after_a[0] == doctest::Approx(2 * std::exp(1.0)));
  CHECK(Tape::current().size() > 0);
  b.backward();  // Retain::No: the entries this pass ran are released
  CHECK(Tape::current().size() == 2);  // a's mul and sum, which b does not reach, stay
  // d(Σ e^{2x})/dx = 2 e^{2x}, added to the 2 e^x already there
  check_close(x.grad(), from_vector<double>({2 * std::exp(1.0) + 2 * std::exp(2.0),
                                              2 * std::exp(-2.0) + 2 * std::exp(-4.0)}, {2}), 1e-12, 1e-12);
}

TEST_CASE("a backward releases only the graph it ran") {
  Tape::current().clear();
  Tensor x = from_vector<double>({1, 2}, {2});
  x.set_requires_grad(true);
  const Tensor first = sum(exp(x)), second = sum(x * x);
  first.backward();
  CHECK(Tape::current().size() == 2);  // second's mul and sum
  x.zero_grad();
  second.backward();
  check_close(x.grad(), from_vector<double>({2, 4}, {2}));
  CHECK(Tape::current().size() == 0);
}

TEST_CASE("a second backward through a released graph is refused") {
  Tensor x = from_vector<double>({1}, {1});
  x.set_requires_grad(true);
  const Tensor h = exp(x);
  sum(h).backward();
  check_error([&] { sum(h * 2.0).backward(); }, {"backward", "Retain::Yes"});
}

TEST_CASE("hooks observe the gradient of leaves and intermediates") {
  Tensor x = from_vector<double>({1, 2}, {2});
  x.set_requires_grad(true);
  const Tensor h = x * 3.0;
  std::vector<double> seen_h, seen_x;
  h.register_hook([&](const Tensor& g) { seen_h = g.to_vector<double>(); });
  x.register_hook([&](const Tensor& g) { seen_x = g.to_vector<double>(); });
  sum(h * h).backward();
  CHECK(seen_h == std::vector<double>{6, 12});   // 2h
  CHECK(seen_x == std::vector<double>{18, 36});  // 2h · 3
  check_error([] { zeros({2}).register_hook([](const Tensor&) {}); }, {"register_hook", "does not require grad"});
}

TEST_CASE("a leaf's hook runs as soon as the last op that uses it has run backward") {
  // y = sum((2x) · w): backward reaches the product first, which completes w's gradient; then 2x,
  // whose gradient h sees, and which completes x's. The leaves' gradients are accumulated as before.
  Tensor x = from_vector<double>({1, 2}, {2}), w = from_vector<double>({3, 4}, {2});
  x.set_requires_grad(true);
  w.set_requires_grad(true);
  const Tensor h = x * 2.0;
  std::vector<std::string> order;
  x.register_hook([&](const Tensor&) { order.push_back("x"); });
  w.register_hook([&](const Tensor&) { order.push_back("w"); });
  h.register_hook([&](const Tensor&) { order.push_back("h"); });
  sum(h * w).backward();
  CHECK(order == std::vector<std::string>{"w", "h", "x"});
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2, 4});  // 2x
  CHECK(x.grad().to_vector<double>() == std::vector<double>{6, 8});  // 2w
}

TEST_CASE("retain_grad keeps an intermediate's gradient") {
  Tensor x = from_vector<double>({1, 2}, {2});
  x.set_requires_grad(true);
  Tensor h = x * 2.0;
  h.retain_grad();
  sum(h * h).backward();
  check_close(h.grad(), from_vector<double>({4, 8}, {2}));
  CHECK_FALSE(h.is_leaf());
}

TEST_CASE("NoGradGuard records nothing") {
  Tape::current().clear();
  Tensor x = ones({3}, {DType::Float64});
  x.set_requires_grad(true);
  {
    NoGradGuard guard;
    const Tensor y = exp(x) * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(Tape::current().size() == 0);
  }
  CHECK(grad_mode_enabled());
  const Tensor z = exp(x);
  CHECK(z.requires_grad());
  CHECK(Tape::current().size() == 1);
  Tape::current().clear();
}

TEST_CASE("detach cuts the tape") {
  Tensor x = from_vector<double>({3}, {1});
  x.set_requires_grad(true);
  const Tensor y = x * x.detach();  // d/dx = x (the detached factor is a constant)
  sum(y).backward();
  check_close(x.grad(), from_vector<double>({3}, {1}));
}

TEST_CASE("an in-place change to a saved tensor is refused at backward") {
  Tensor x = from_vector<double>({1, 2}, {2});
  x.set_requires_grad(true);
  const Tensor w = from_vector<double>({3, 4}, {2});
  const Tensor y = sum(x * w);  // mul saves w for dx = dy ⊙ w
  add_(w, ones({2}, {DType::Float64}));
  check_error([&] { y.backward(); }, {"mul (backward)", "modified in place", "version 0, now 1"});
  CHECK_FALSE(x.grad().defined());  // nothing was accumulated
}

TEST_CASE("in-place ops refuse tensors that require grad while recording") {
  Tensor x = zeros({2}, {DType::Float64});
  x.set_requires_grad(true);
  check_error([&] { add_(x, ones({2}, {DType::Float64})); }, {"add_", "requires grad"});
  NoGradGuard guard;
  add_(x, ones({2}, {DType::Float64}));  // the optimizer's way
  CHECK(x.to_vector<double>() == std::vector<double>{1, 1});
}

TEST_CASE("the tape lists its entries and, when asked, gradient norms") {
  Tape& tape = Tape::current();
  tape.clear();
  Tensor x = from_vector<double>({3, 4}, {2});
  x.set_requires_grad(true);
  const Tensor y = sum(x * 2.0);
  const std::vector<TapeEntryInfo> entries = tape.entries();
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].op == "mul");
  CHECK(entries[0].inputs == std::vector<Shape>{{2}, {}});
  CHECK(entries[1].op == "sum");
  CHECK(entries[1].outputs == std::vector<Shape>{{}});
  tape.set_grad_norms(GradNorms::Record);
  y.backward();
  tape.set_grad_norms(GradNorms::Skip);
  const auto& ran = tape.last_backward();
  REQUIRE(ran.size() == 2);
  CHECK(ran[0].op == "sum");
  CHECK(ran[0].grad_norms[0] == doctest::Approx(1.0));
  CHECK(ran[1].op == "mul");
  CHECK(ran[1].grad_norms[0] == doctest::Approx(std::sqrt(2.0)));  // ‖(1, 1)‖
}

TEST_CASE("entries nobody can reach are pruned as the tape grows") {
  Tape& tape = Tape::current();
  tape.clear();
  Tensor x = ones({4}, {DType::Float64});
  x.set_requires_grad(true);
  for (int i = 0; i < 5000; ++i) {
    const Tensor unused = exp(x) * 2.0;  // dropped at once: its entries become unreachable
  }
  CHECK(tape.size() < 2048);
  const Tensor kept = sum(exp(x));
  for (int i = 0; i < 3000; ++i) exp(x);
  kept.backward();
  check_close(x.grad(), full({4}, std::exp(1.0), {DType::Float64}));
}

TEST_CASE("a backward also drops the branches that did not reach the root, once nobody holds them") {
  // A training step computes values it does not differentiate (a column's max to test for NaN);
  // their entries and saved tensors must go with the step, not gather over a thousand steps.
  Tape& tape = Tape::current();
  tape.clear();
  Tensor x = ones({4}, {DType::Float64});
  x.set_requires_grad(true);
  const Tensor held = exp(x) * 3.0;  // not reached, but its tensor is alive: it stays
  for (int step = 0; step < 3; ++step) {
    const Tensor loss = sum(x * x);
    { const Tensor unreached = max(exp(x)); }
    loss.backward();
    CHECK(tape.size() == 2);  // held's exp and mul
  }
  check_close(x.grad(), full({4}, 6.0, {DType::Float64}));
}

TEST_CASE("backward checks its arguments") {
  check_error([] { ones({2}).backward(); }, {"backward", "does not require grad"});
  Tensor x = ones({2}, {DType::Float64});
  x.set_requires_grad(true);
  const Tensor y = x * 2.0;
  check_error([&] { y.backward(); }, {"backward", "not a scalar"});
  check_error([&] { y.backward(ones({3}, {DType::Float64})); }, {"backward", "seed"});
  y.backward(from_vector<double>({1, 10}, {2}));
  check_close(x.grad(), from_vector<double>({2, 20}, {2}));
  check_error([] { ones({2}, {DType::Int64}).set_requires_grad(true); }, {"set_requires_grad", "int64"});
}
