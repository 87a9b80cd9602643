// The CTC loss: against enumeration of every alignment on tiny cases, gradcheck (through a
// log_softmax and on free log-probabilities), infeasible targets, reductions, independence of the
// batch's utterances and of their padding, float32's vectorised rows and their logarithm, and bad
// input.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/cpu_capability.h"
#include "ops/fast_exp.h"

#include "tests/ctc_brute_force.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

Tensor lengths(const std::vector<int64_t>& v) { return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

// Row b of log_probs (B, T, C), its first T_b frames, as a (T_b, C) row-major vector.
std::vector<double> frames(const Tensor& log_probs, int64_t b, int64_t Tb) {
  const int64_t T = log_probs.shape()[1], C = log_probs.shape()[2];
  const std::vector<double> all = log_probs.to_vector<double>();
  return std::vector<double>(all.begin() + b * T * C, all.begin() + b * T * C + Tb * C);
}

// A batch of 4 utterances over C = 3 classes (blank 0), T = 5: repeated labels, a single label, an
// empty target, a shorter input; targets padded with -1 (never read).
struct Batch {
  Tensor logits = uniform({4, 5, 3}, 11, -2, 2);
  Tensor targets = from_vector<int64_t>({1, 1, -1,  //
                                         1, 2, 1,   //
                                         2, -1, -1,  //
                                         -1, -1, -1},
                                        {4, 3});
  std::vector<int64_t> input_lengths{5, 5, 3, 4};
  std::vector<int64_t> target_lengths{2, 3, 1, 0};
  std::vector<std::vector<int64_t>> labels{{1, 1}, {1, 2, 1}, {2}, {}};
};

}  // namespace

TEST_CASE("ctc_loss equals −log of the sum over every alignment, enumerated") {
  const Batch batch;
  for (int64_t blank : {0, 2}) {
    INFO("blank " << blank);
    // with blank 2 the labels are remapped: 2 ↔ 0
    Tensor targets = batch.targets;
    std::vector<std::vector<int64_t>> labels = batch.labels;
    if (blank == 2) {
      std::vector<int64_t> t = batch.targets.to_vector<int64_t>();
      for (int64_t& k : t) k = k == 2 ? 0 : k;
      targets = from_vector<int64_t>(t, {4, 3});
      for (auto& z : labels)
        for (int64_t& k : z) k = k == 2 ? 0 : k;
    }
    const Tensor lp = log_softmax(batch.logits);
    const Tensor loss = ctc_loss(lp, targets, lengths(batch.input_lengths), lengths(batch.target_lengths), blank,
                                 CtcReduction::None);
    REQUIRE(loss.shape() == Shape{4});
    const std::vector<double> got = loss.to_vector<double>();
    for (int64_t b = 0; b < 4; ++b) {
      INFO("utterance " << b);
      const int64_t Tb = batch.input_lengths[b];
      CHECK(got[b] == doctest::Approx(ctc_brute_force_loss(frames(lp, b, Tb), Tb, 3, labels[b], blank)).epsilon(1e-12));
    }
  }
  // log-probabilities that are not normalised are summed all the same
  const Tensor raw = uniform({1, 4, 3}, 12, -3, 0);
  const Tensor loss = ctc_loss(raw, from_vector<int64_t>({2, 1}, {1, 2}), lengths({4}), lengths({2}), 0, CtcReduction::Sum);
  CHECK(loss.item<double>() == doctest::Approx(ctc_brute_force_loss(frames(raw, 0, 4), 4, 3, {2, 1}, 0)).epsilon(1e-12));
}

TEST_CASE("ctc_loss: gradcheck through log_softmax and on free log-probabilities, every reduction") {
  const Batch batch;
  const Tensor il = lengths(batch.input_lengths), tl = lengths(batch.target_lengths);
  for (CtcReduction reduction : {CtcReduction::None, CtcReduction::Sum, CtcReduction::Mean}) {
    INFO("reduction " << static_cast<int>(reduction));
    check_gradients([&](const std::vector<Tensor>& in) { return ctc_loss(log_softmax(in[0]), batch.targets, il, tl, 0, reduction); },
                    {batch.logits});
    check_gradients([&](const std::vector<Tensor>& in) { return ctc_loss(in[0], batch.targets, il, tl, 0, reduction); },
                    {uniform({4, 5, 3}, 13, -3, 0)});
  }
  // a longer alphabet and a blank in the middle, repeated labels with room to spare
  const Tensor targets = from_vector<int64_t>({1, 1, 4, 4, 0, 3, 0, 0}, {2, 4});
  check_gradients([&](const std::vector<Tensor>& in) {
    return ctc_loss(log_softmax(in[0]), targets, lengths({9, 7}), lengths({4, 3}), 2, CtcReduction::Mean);
  }, {uniform({2, 9, 5}, 14, -2, 2)});
}

TEST_CASE("ctc_loss of a target longer than its input allows is inf, or 0 with a zero gradient") {
  // [1, 1] needs 3 frames (1, blank, 1); [1, 2] needs 2; [] needs none, even zero frames
  const Tensor targets = from_vector<int64_t>({1, 1, 1, 2, 0, 0, 1, 1}, {4, 2});
  const Tensor il = lengths({2, 2, 0, 3}), tl = lengths({2, 2, 0, 2});
  Tensor logits = uniform({4, 3, 3}, 15, -2, 2);
  logits.set_requires_grad(true);
  const Tensor keep = ctc_loss(log_softmax(logits), targets, il, tl, 0, CtcReduction::None);
  const std::vector<double> v = keep.to_vector<double>();
  CHECK(std::isinf(v[0]));
  CHECK(v[0] > 0);
  CHECK(std::isfinite(v[1]));
  CHECK(v[2] == 0.0);  // the empty labelling is certain over zero frames
  CHECK(std::isfinite(v[3]));
  CHECK(std::isinf(ctc_loss(log_softmax(logits), targets, il, tl).item<double>()));
  CHECK(std::isinf(ctc_loss(log_softmax(logits), targets, il, tl, 0, CtcReduction::Sum).item<double>()));
  // a target over zero frames is infeasible too
  CHECK(std::isinf(ctc_loss(log_softmax(logits), targets, lengths({2, 0, 0, 3}), tl, 0, CtcReduction::None)
                       .to_vector<double>()[1]));

  const Tensor zero = ctc_loss(log_softmax(logits), targets, il, tl, 0, CtcReduction::None, CtcInfinity::Zero);
  const std::vector<double> z = zero.to_vector<double>();
  CHECK(z[0] == 0.0);
  CHECK(z[1] == v[1]);
  CHECK(z[3] == v[3]);
  sum(zero).backward();
  const std::vector<double> g = logits.grad().to_vector<double>();
  for (int64_t i = 0; i < 9; ++i) CHECK(g[static_cast<size_t>(i)] == 0.0);  // utterance 0
  for (int64_t i = 18; i < 27; ++i) CHECK(g[static_cast<size_t>(i)] == 0.0);  // utterance 2: zero frames
  double rest = 0;
  for (int64_t i = 9; i < 18; ++i) rest += std::abs(g[static_cast<size_t>(i)]);
  CHECK(rest > 0);
  // the feasible utterances' gradients pass gradcheck with an infeasible one beside them
  check_gradients([&](const std::vector<Tensor>& in) {
    return ctc_loss(log_softmax(in[0]), targets, il, tl, 0, CtcReduction::Mean, CtcInfinity::Zero);
  }, {uniform({4, 3, 3}, 16, -2, 2)});
  // log-probabilities of −inf on every path: inf as well
  std::vector<double> ninf(9, 0.0);
  for (int64_t t = 0; t < 3; ++t) ninf[static_cast<size_t>(t * 3 + 1)] = -std::numeric_limits<double>::infinity();
  const Tensor never = from_vector<double>(ninf, {1, 3, 3});
  CHECK(std::isinf(ctc_loss(never, from_vector<int64_t>({1}, {1, 1}), lengths({3}), lengths({1})).item<double>()));
  CHECK(ctc_loss(never, from_vector<int64_t>({1}, {1, 1}), lengths({3}), lengths({1}), 0, CtcReduction::Mean,
                 CtcInfinity::Zero)
            .item<double>() == 0.0);
  CHECK(ctc_loss(never, from_vector<int64_t>({2}, {1, 1}), lengths({3}), lengths({1})).item<double>() ==
        doctest::Approx(ctc_brute_force_loss(ninf, 3, 3, {2}, 0)));
}

TEST_CASE("ctc_loss reductions: sum of the losses, mean of the losses over their target lengths") {
  const Batch batch;
  const Tensor lp = log_softmax(batch.logits);
  const Tensor il = lengths(batch.input_lengths), tl = lengths(batch.target_lengths);
  const std::vector<double> each = ctc_loss(lp, batch.targets, il, tl, 0, CtcReduction::None).to_vector<double>();
  double total = 0, mean = 0;
  for (size_t b = 0; b < 4; ++b) {
    total += each[b];
    mean += each[b] / static_cast<double>(std::max<int64_t>(batch.target_lengths[b], 1)) / 4;
  }
  CHECK(ctc_loss(lp, batch.targets, il, tl, 0, CtcReduction::Sum).item<double>() == doctest::Approx(total).epsilon(1e-14));
  const Tensor m = ctc_loss(lp, batch.targets, il, tl);
  CHECK(m.dim() == 0);
  CHECK(m.item<double>() == doctest::Approx(mean).epsilon(1e-14));
  // an empty batch: (0) losses, sums and means of 0
  const Tensor none = ctc_loss(zeros({0, 5, 3}), zeros({0, 2}, {DType::Int64}), lengths({}), lengths({}), 0,
                               CtcReduction::None);
  CHECK(none.shape() == Shape{0});
  CHECK(ctc_loss(zeros({0, 5, 3}), zeros({0, 2}, {DType::Int64}), lengths({}), lengths({})).item<double>() == 0.0);
}

TEST_CASE("ctc_loss: each utterance on its own, padding frames and padding labels never read") {
  const Batch batch;
  Tensor logits = batch.logits;
  const Tensor lp = log_softmax(logits);
  const std::vector<double> together =
      ctc_loss(lp, batch.targets, lengths(batch.input_lengths), lengths(batch.target_lengths), 0, CtcReduction::None)
          .to_vector<double>();
  for (int64_t b = 0; b < 4; ++b) {
    const Tensor one = slice(lp, 0, b, b + 1);
    const Tensor t = slice(batch.targets, 0, b, b + 1);
    const double alone =
        ctc_loss(one, t, lengths({batch.input_lengths[b]}), lengths({batch.target_lengths[b]}), 0, CtcReduction::Sum)
            .item<double>();
    CHECK(alone == together[static_cast<size_t>(b)]);
  }
  // other values in the padding frames (t ≥ T_b) and padding labels change nothing, and the padding
  // frames get a zero gradient
  std::vector<double> v = lp.to_vector<double>();
  for (int64_t t = 3; t < 5; ++t)
    for (int64_t c = 0; c < 3; ++c) v[static_cast<size_t>(2 * 15 + t * 3 + c)] = 7.0;
  Tensor changed = from_vector<double>(v, {4, 5, 3});
  changed.set_requires_grad(true);
  const Tensor other_targets = from_vector<int64_t>({1, 1, 99, 1, 2, 1, 2, 0, 5, 8, 8, 8}, {4, 3});
  const Tensor loss =
      ctc_loss(changed, other_targets, lengths(batch.input_lengths), lengths(batch.target_lengths), 0, CtcReduction::None);
  CHECK(loss.to_vector<double>() == together);
  sum(loss).backward();
  const std::vector<double> g = changed.grad().to_vector<double>();
  for (int64_t i = 2 * 15 + 9; i < 3 * 15; ++i) CHECK(g[static_cast<size_t>(i)] == 0.0);
  for (int64_t i = 3 * 15 + 12; i < 4 * 15; ++i) CHECK(g[static_cast<size_t>(i)] == 0.0);
}

TEST_CASE("ctc_loss in float32 agrees with float64; the gradient is minus the class posteriors") {
  const Batch batch;
  const Tensor il = lengths(batch.input_lengths), tl = lengths(batch.target_lengths);
  const Tensor lp64 = log_softmax(batch.logits);
  const Tensor lp32 = to(lp64, DType::Float32);
  const Tensor l32 = ctc_loss(lp32, batch.targets, il, tl, 0, CtcReduction::None);
  CHECK(l32.dtype() == DType::Float32);
  check_close(to(l32, DType::Float64), ctc_loss(lp64, batch.targets, il, tl, 0, CtcReduction::None), 1e-5, 1e-5);
  // Σ_k ∂ℓ/∂(log y_t^k) = −Σ_k γ_t(k) = −1 on every frame t < T_b of a feasible utterance
  Tensor leaf = clone(lp64);
  leaf.set_requires_grad(true);
  sum(ctc_loss(leaf, batch.targets, il, tl, 0, CtcReduction::None)).backward();
  const std::vector<double> g = leaf.grad().to_vector<double>();
  for (int64_t b = 0; b < 4; ++b)
    for (int64_t t = 0; t < batch.input_lengths[b]; ++t) {
      double s = 0;
      for (int64_t c = 0; c < 3; ++c) s += g[static_cast<size_t>(b * 15 + t * 3 + c)];
      CHECK(s == doctest::Approx(-1.0).epsilon(1e-12));
    }
}

TEST_CASE("ctc_loss checks its arguments") {
  const Tensor lp = log_softmax(uniform({2, 4, 3}, 17));
  const Tensor t = from_vector<int64_t>({1, 2, 2, 0}, {2, 2});
  const Tensor il = lengths({4, 3}), tl = lengths({2, 1});
  check_error([&] { ctc_loss(ones({2, 4, 3}, {DType::Int64}), t, il, tl); }, {"ctc_loss", "log_probs", "floating", "int64"});
  check_error([&] { ctc_loss(ones({8, 3}), t, il, tl); }, {"ctc_loss", "log_probs", "(B, T, C)", "(8, 3)"});
  check_error([&] { ctc_loss(zeros({2, 4, 0}), t, il, tl); }, {"ctc_loss", "log_probs", "at least one class"});
  check_error([&] { ctc_loss(lp, to(t, DType::Float64), il, tl); }, {"ctc_loss", "targets", "int64", "float64"});
  check_error([&] { ctc_loss(lp, from_vector<int64_t>({1, 2, 1}, {3, 1}), il, tl); }, {"ctc_loss", "targets", "(B, S)", "(3, 1)"});
  check_error([&] { ctc_loss(lp, from_vector<int64_t>({1, 2}, {2}), il, tl); }, {"ctc_loss", "targets", "(2,)"});
  check_error([&] { ctc_loss(lp, t, il, tl, 3); }, {"ctc_loss", "blank = 3", "3 classes"});
  check_error([&] { ctc_loss(lp, t, il, tl, -1); }, {"ctc_loss", "blank = -1"});
  check_error([&] { ctc_loss(lp, t, to(il, DType::Int32), tl); }, {"ctc_loss", "input_lengths", "int64", "int32"});
  check_error([&] { ctc_loss(lp, t, lengths({4, 3, 1}), tl); }, {"ctc_loss", "input_lengths", "(B) = (2)", "(3,)"});
  check_error([&] { ctc_loss(lp, t, lengths({5, 3}), tl); }, {"ctc_loss", "input_lengths[0] = 5", "[0, 4]", "T = 4"});
  check_error([&] { ctc_loss(lp, t, lengths({4, -1}), tl); }, {"ctc_loss", "input_lengths[1] = -1"});
  check_error([&] { ctc_loss(lp, t, il, lengths({3, 1})); }, {"ctc_loss", "target_lengths[0] = 3", "[0, 2]", "S = 2"});
  check_error([&] { ctc_loss(lp, t, il, lengths({2, -2})); }, {"ctc_loss", "target_lengths[1] = -2"});
  check_error([&] { ctc_loss(lp, t, il, to(tl, DType::Float32)); }, {"ctc_loss", "target_lengths", "int64"});
  check_error([&] { ctc_loss(lp, t, il, lengths({2, 2})); }, {"ctc_loss", "targets[1, 1] = 0", "the blank"});
  check_error([&] { ctc_loss(lp, from_vector<int64_t>({1, 3, 2, 0}, {2, 2}), il, tl); },
              {"ctc_loss", "targets[0, 1] = 3", "out of range", "3 classes"});
  check_error([&] { ctc_loss(lp, from_vector<int64_t>({-4, 1, 2, 0}, {2, 2}), il, tl); }, {"ctc_loss", "targets[0, 0] = -4"});
  check_error([&] { ctc_loss(lp, t, il, Tensor{}); }, {"ctc_loss", "undefined"});
}

TEST_CASE("log_1_to_4_as, the CTC rows' logarithm, is within 1 ulp of ln x on every float in [1, 4)") {
  // Both forms: rounded multiply-adds (the baseline's rows) and fused ones (AVX2's and AVX-512's).
  // Reference: ln x in double, rounded to float. Every 3rd bit pattern for the fused form, whose
  // std::fma is a call into libm in this file's code.
  const auto check_form = [](const std::string& name, float (*log_of)(float), uint32_t step) {
    double worst = 0;
    float worst_x = 1;
    int64_t checked = 0;
    const float one = 1.0f, four = 4.0f;
    uint32_t from, to;
    std::memcpy(&from, &one, 4);
    std::memcpy(&to, &four, 4);
    for (uint32_t bits = from; bits < to; bits += step, ++checked) {
      float x;
      std::memcpy(&x, &bits, 4);
      const double want = std::log(static_cast<double>(x));
      const float want_f = static_cast<float>(want);
      const double ulp = std::nextafter(want_f, std::numeric_limits<float>::infinity()) - want_f;
      const double error = std::abs(static_cast<double>(log_of(x)) - want) / ulp;
      if (error > worst) worst = error, worst_x = x;
    }
    MESSAGE(name << ": worst " << worst << " ulp at x = " << worst_x << " over " << checked << " values");
    CHECK(checked > 5000000);
    CHECK(worst <= 1.0);
    CHECK(log_of(1.0f) == 0.0f);
    CHECK(std::isnan(log_of(std::numeric_limits<float>::quiet_NaN())));
  };
  check_form("log_1_to_4_as<false>", [](float x) { return log_1_to_4_as<false>(x); }, 1);
  check_form("log_1_to_4_as<true>", [](float x) { return log_1_to_4_as<true>(x); }, 3);
}

#if TP_CPU_DISPATCH
TEST_CASE("log_1_to_4_avx512 gives log_1_to_4_as<true>'s bits on every float in [1, 4), and NaN") {
  if (cpu_capability_supported() < CpuCapability::Avx512) return;
  const float one = 1.0f, four = 4.0f;
  uint32_t from, to;
  std::memcpy(&from, &one, 4);
  std::memcpy(&to, &four, 4);
  std::vector<float> x;
  for (uint32_t bits = from; bits < to; ++bits) {
    float v;
    std::memcpy(&v, &bits, 4);
    x.push_back(v);
  }
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  std::vector<float> y(x.size());
  log_1_to_4_avx512(x.data(), y.data(), static_cast<int64_t>(x.size()));
  int64_t differ = 0;
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    const float want = log_1_to_4_as<true>(x[i]);
    differ += std::memcmp(&want, &y[i], 4) != 0;
  }
  CHECK(x.size() > 16000000);
  CHECK(differ == 0);
  CHECK(std::isnan(y.back()));
}
#endif

TEST_CASE("ctc_loss in float32 agrees with float64 under every CPU capability; AVX2 and AVX-512 to the bit") {
  // float32 runs each frame's row vectorised over the positions (ops/ctc.cpp); float64 runs the scalar
  // recursions of ops/ctc_math.h. Six utterances over C = 7 classes, blank 2, T = 23: a long target
  // with repeated labels, no frames, one frame, an empty target, a target its 5 frames cannot hold
  // (inf, a zero gradient), and 8 distinct labels over 17 frames; the losses weighted so that each
  // utterance's gradient is scaled by its own dy.
  const int64_t B = 6, T = 23, C = 7, S = 8;
  Generator gen(21);
  const Tensor lp64 = log_softmax(randn({B, T, C}, gen, {DType::Float64}) * 3.0);
  const Tensor targets = from_vector<int64_t>({3, 3, 1, 1, 4, 5, 6, 0,  //
                                               -1, -1, -1, -1, -1, -1, -1, -1,  //
                                               5, -1, -1, -1, -1, -1, -1, -1,  //
                                               -1, -1, -1, -1, -1, -1, -1, -1,  //
                                               1, 1, 1, 1, -1, -1, -1, -1,  //
                                               0, 1, 3, 4, 5, 6, 0, 1},
                                              {B, S});
  const Tensor il = lengths({23, 0, 1, 23, 5, 17}), tl = lengths({8, 0, 1, 0, 4, 8});
  const Tensor weights = from_vector<double>({1.0, 0.5, 2.0, -1.0, 1.0, 0.25}, {B});
  const auto run = [&](DType dtype) {
    Tensor leaf = to(lp64, dtype).detach();
    leaf.set_requires_grad(true);
    const Tensor loss = ctc_loss(leaf.detach(), targets, il, tl, 2, CtcReduction::None);  // the infeasible one inf
    sum(ctc_loss(leaf, targets, il, tl, 2, CtcReduction::None, CtcInfinity::Zero) * to(weights, dtype)).backward();
    return std::pair{to(loss, DType::Float64), to(leaf.grad(), DType::Float64)};
  };
  const auto [loss64, grad64] = run(DType::Float64);
  const std::vector<double> l64 = loss64.to_vector<double>();
  CHECK(std::isinf(l64[4]));
  std::vector<std::pair<Tensor, Tensor>> by_capability;
  for (const CpuCapability c : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
    if (c > cpu_capability_supported()) continue;
    INFO(to_string(c));
    CpuCapabilityScope scope(c);
    const auto [loss32, grad32] = run(DType::Float32);
    const std::vector<double> l32 = loss32.to_vector<double>();
    CHECK(std::isinf(l32[4]));
    for (int64_t b = 0; b < B; ++b)
      if (b != 4) CHECK(l32[b] == doctest::Approx(l64[b]).epsilon(1e-5));
    check_close(grad32, grad64, 2e-5, 1e-4);
    by_capability.emplace_back(loss32, grad32);
  }
  if (by_capability.size() == 3) {
    CHECK(by_capability[1].first.to_vector<double>() == by_capability[2].first.to_vector<double>());
    CHECK(by_capability[1].second.to_vector<double>() == by_capability[2].second.to_vector<double>());
  }
}

TEST_CASE("ctc_loss's rows wider than a vector give the same bits under AVX2 and AVX-512") {
  // Extended targets of 81, 65 and 15 positions (AVX-512's rows run 16 at a time, the last vector
  // part full: ops/ctc.cpp), with repeated labels (no skip there), over 51 classes.
  const int64_t B = 3, T = 70, C = 51, S = 40;
  Generator gen(22);
  const Tensor lp = to(log_softmax(randn({B, T, C}, gen, {DType::Float64}) * 2.0), DType::Float32);
  std::vector<int64_t> labels = randint(1, C, {B, S}, gen).to_vector<int64_t>();
  labels[3] = labels[2];  // a repeat: α and β take no skip over it
  const Tensor targets = from_vector<int64_t>(labels, {B, S});
  const Tensor il = lengths({70, 65, 20}), tl = lengths({40, 32, 7});
  const Tensor weights = from_vector<float>({1.0f, -0.5f, 2.0f}, {B});
  const auto run = [&](CpuCapability c) {
    CpuCapabilityScope scope(c);
    Tensor leaf = lp.detach();
    leaf.set_requires_grad(true);
    const Tensor loss = ctc_loss(leaf, targets, il, tl, 0, CtcReduction::None);
    sum(loss * weights).backward();
    return std::pair{loss.to_vector<float>(), leaf.grad().to_vector<float>()};
  };
  if (cpu_capability_supported() < CpuCapability::Avx512) return;
  const auto [loss2, grad2] = run(CpuCapability::Avx2);
  const auto [loss5, grad5] = run(CpuCapability::Avx512);
  for (float l : loss5) CHECK(std::isfinite(l));
  CHECK(loss2 == loss5);
  CHECK(grad2 == grad5);
  // and the float64 recursions' values, within float32's rounding
  Tensor leaf64 = to(lp, DType::Float64).detach();
  leaf64.set_requires_grad(true);
  const Tensor loss64 = ctc_loss(leaf64, targets, il, tl, 0, CtcReduction::None);
  sum(loss64 * to(weights, DType::Float64)).backward();
  const std::vector<double> l64 = loss64.to_vector<double>();
  for (int64_t b = 0; b < B; ++b) CHECK(loss5[b] == doctest::Approx(l64[b]).epsilon(1e-5));
  check_close(to(from_vector<float>(grad5, {B, T, C}), DType::Float64), leaf64.grad(), 2e-5, 1e-4);
}
