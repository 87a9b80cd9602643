#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/cpu_capability.h"
#include "ops/fast_exp.h"
#include "tests/oracle.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// The compositions the fused ops must equal: z − max z − log Σ e^(z − max z), z = x where kept.
Tensor reference_log_softmax(const Tensor& z) {
  const Tensor shifted = z - max(z, {-1}, KeepDim::Yes).detach();  // the shift cancels; no gradient needed
  return shifted - log(sum(exp(shifted), {-1}, KeepDim::Yes));
}
Tensor reference_softmax(const Tensor& z) {
  const Tensor e = exp(z - max(z, {-1}, KeepDim::Yes));
  return e / sum(e, {-1}, KeepDim::Yes);
}
Tensor keep_or_minus_inf(const Tensor& x, const Tensor& keep) { return where(keep, x, full({}, -kInf, x.options())); }

// A (2, 1, 5) keep-mask, broadcast over dim 1; every row keeps at least one entry.
Tensor partial_keep_mask() {
  return from_vector<bool>({true, false, true, true, false,  //
                            false, true, true, false, true},
                           {2, 1, 5});
}

}  // namespace

TEST_CASE("softmax and log_softmax: gradcheck") {
  const Tensor x = uniform({2, 3, 5}, 1, -3, 3);
  check_gradients([](const std::vector<Tensor>& in) { return softmax(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return log_softmax(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return softmax(in[0]); }, {uniform({7}, 2)});
}

TEST_CASE("softmax and log_softmax with a bool mask: gradcheck") {
  const Tensor x = uniform({2, 3, 5}, 3, -3, 3);
  const Tensor keep = partial_keep_mask();
  check_gradients([keep](const std::vector<Tensor>& in) { return softmax(in[0], keep); }, {x});
  // log_softmax is −inf where masked; compare the finite entries (the −inf ones pass no gradient)
  const Tensor zero = zeros({}, {DType::Float64});
  check_gradients([keep, zero](const std::vector<Tensor>& in) { return where(keep, log_softmax(in[0], keep), zero); }, {x});
}

TEST_CASE("softmax and log_softmax with an additive mask: gradcheck of x and of the mask") {
  const Tensor x = uniform({2, 3, 5}, 4, -3, 3);
  const Tensor bias = uniform({3, 1}, 5, -2, 2);  // a learned bias broadcast over dims 0 and 2
  check_gradients([](const std::vector<Tensor>& in) { return softmax(in[0], in[1]); }, {x, bias});
  check_gradients([](const std::vector<Tensor>& in) { return log_softmax(in[0], in[1]); }, {x, uniform({5}, 6)});
  // a constant mask with −inf entries masks them out
  const Tensor minus_inf = where(partial_keep_mask(), zeros({}, {DType::Float64}), full({}, -kInf, {DType::Float64}));
  check_gradients([minus_inf](const std::vector<Tensor>& in) { return softmax(in[0], minus_inf); }, {x});
}

TEST_CASE("softmax and log_softmax equal their composition from primitive ops, values and gradients") {
  const Tensor x = uniform({3, 4, 6}, 7, -4, 4);
  check_matches_reference([](const std::vector<Tensor>& in) { return softmax(in[0]); },
                          [](const std::vector<Tensor>& in) { return reference_softmax(in[0]); }, {x}, 1e-12, 1e-10);
  check_matches_reference([](const std::vector<Tensor>& in) { return log_softmax(in[0]); },
                          [](const std::vector<Tensor>& in) { return reference_log_softmax(in[0]); }, {x}, 1e-12, 1e-10);

  // float32 too, against the float64 composition
  const Tensor y32 = softmax(to(x, DType::Float32));
  check_close(y32, reference_softmax(x), 1e-6, 1e-5);
  check_close(log_softmax(to(x, DType::Float32)), reference_log_softmax(x), 1e-5, 1e-5);
}

TEST_CASE("masked softmax and log_softmax equal the composition with −inf at masked entries") {
  const Tensor x = uniform({2, 3, 5}, 8, -4, 4);
  const Tensor keep = partial_keep_mask();
  check_matches_reference([keep](const std::vector<Tensor>& in) { return softmax(in[0], keep); },
                          [keep](const std::vector<Tensor>& in) { return reference_softmax(keep_or_minus_inf(in[0], keep)); },
                          {x}, 1e-12, 1e-10);
  // −inf outputs take no part in backward (a gradient arriving there belongs to an infinite loss), so
  // both sides pass zeros there
  const Tensor zero = zeros({}, {DType::Float64});
  check_matches_reference(
      [keep, zero](const std::vector<Tensor>& in) { return where(keep, log_softmax(in[0], keep), zero); },
      [keep, zero](const std::vector<Tensor>& in) {
        return where(keep, reference_log_softmax(keep_or_minus_inf(in[0], keep)), zero);
      },
      {x}, 1e-12, 1e-10);
  // additive: softmax(x + mask), gradients of both
  const Tensor bias = uniform({3, 5}, 9);
  check_matches_reference([](const std::vector<Tensor>& in) { return log_softmax(in[0], in[1]); },
                          [](const std::vector<Tensor>& in) { return reference_log_softmax(in[0] + in[1]); },
                          {x, bias}, 1e-12, 1e-10);
  check_matches_reference([](const std::vector<Tensor>& in) { return softmax(in[0], in[1]); },
                          [](const std::vector<Tensor>& in) { return reference_softmax(in[0] + in[1]); },
                          {x, bias}, 1e-12, 1e-10);
}

TEST_CASE("masked entries get probability exactly 0 whatever x holds") {
  const Tensor x = from_vector<float>({1e4f, 1.0f, 2.0f, -1e4f}, {1, 4});
  const Tensor keep = from_vector<bool>({false, true, true, false}, {4});
  const std::vector<float> p = softmax(x, keep).to_vector<float>();
  CHECK(p[0] == 0.0f);
  CHECK(p[3] == 0.0f);
  CHECK(p[1] == doctest::Approx(1 / (1 + std::exp(1.0))));
  const std::vector<float> logp = log_softmax(x, keep).to_vector<float>();
  CHECK(logp[0] == -std::numeric_limits<float>::infinity());
  CHECK(logp[2] == doctest::Approx(-std::log1p(std::exp(-1.0))));
}

TEST_CASE("a fully masked row gives zeros (softmax) or −inf (log_softmax), never NaN, and no gradient") {
  Tensor x = uniform({2, 3}, 10);
  x.set_requires_grad(true);
  const Tensor keep = from_vector<bool>({true, true, false, false, false, false}, {2, 3});
  const Tensor p = softmax(x, keep);
  CHECK(p.to_vector<double>()[3] == 0.0);
  CHECK(p.to_vector<double>()[5] == 0.0);
  const Tensor seed = uniform({2, 3}, 11);
  p.backward(seed);
  const std::vector<double> g = x.grad().to_vector<double>();
  for (size_t i = 2; i < 6; ++i) CHECK(g[i] == 0.0);

  x.zero_grad();
  const Tensor logp = log_softmax(x, keep);
  for (size_t i = 2; i < 6; ++i) CHECK(logp.to_vector<double>()[i] == -kInf);
  logp.backward(seed);
  for (double v : x.grad().to_vector<double>()) CHECK(std::isfinite(v));
  for (size_t i = 2; i < 6; ++i) CHECK(x.grad().to_vector<double>()[i] == 0.0);

  // the same through an additive mask of −inf
  const Tensor minus_inf = full({3}, -kInf, {DType::Float64});
  for (double v : softmax(x, minus_inf).to_vector<double>()) CHECK(v == 0.0);
}

TEST_CASE("softmax and log_softmax are stable for inputs of ±1e4") {
  const Tensor x = from_vector<float>({1e4f, -1e4f, 0.0f, 1e4f - 1.0f,  //
                                       -1e4f, -1e4f, -1e4f, -1e4f},
                                      {2, 4});
  const std::vector<float> p = softmax(x).to_vector<float>();
  const double a = 1 / (1 + std::exp(-1.0));
  CHECK(p[0] == doctest::Approx(a));
  CHECK(p[1] == 0.0f);
  CHECK(p[3] == doctest::Approx(1 - a));
  for (size_t i = 4; i < 8; ++i) CHECK(p[i] == doctest::Approx(0.25));
  const std::vector<float> logp = log_softmax(x).to_vector<float>();
  for (float v : logp) CHECK(std::isfinite(v));
  CHECK(logp[0] == doctest::Approx(-std::log1p(std::exp(-1.0))));
  CHECK(logp[1] == doctest::Approx(-2e4 - std::log1p(std::exp(-1.0))));
  CHECK(logp[4] == doctest::Approx(-std::log(4.0)));

  Tensor leaf = clone(x);
  leaf.set_requires_grad(true);
  sum(log_softmax(leaf) * from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4})).backward();
  for (float v : leaf.grad().to_vector<float>()) CHECK(std::isfinite(v));
}

TEST_CASE("softmax reads strided inputs and masks") {
  const Tensor base = uniform({5, 4}, 12);
  const Tensor x = transpose(base, 0, 1);  // (4, 5), not contiguous
  const Tensor keep = transpose(from_vector<bool>({true, false, true, true, true, true, false, true, true, true}, {5, 2}), 0, 1);  // (2, 5)
  const Tensor x2 = slice(x, 0, 0, 2);
  check_close(softmax(x2, keep), reference_softmax(keep_or_minus_inf(contiguous(x2), contiguous(keep))), 1e-14, 1e-12);
  check_close(softmax(x), reference_softmax(contiguous(x)), 1e-14, 1e-12);
}

TEST_CASE("softmax of empty tensors") {
  CHECK(softmax(zeros({0, 4})).shape() == Shape{0, 4});
  CHECK(log_softmax(zeros({3, 0})).shape() == Shape{3, 0});
}

TEST_CASE("softmax and log_softmax check their arguments") {
  const Tensor x = uniform({2, 3}, 13);
  check_error([] { softmax(ones({2, 3}, {DType::Int64})); }, {"softmax", "floating", "int64", "(2, 3)"});
  check_error([] { log_softmax(scalar(1.0)); }, {"log_softmax", "0-d"});
  check_error([&] { softmax(x, ones({3, 3}, {DType::Bool})); }, {"softmax", "(3, 3)", "(2, 3)"});
  check_error([&] { softmax(x, ones({1, 2, 3}, {DType::Bool})); }, {"softmax", "(1, 2, 3)", "does not broadcast"});
  check_error([&] { log_softmax(x, ones({3}, {DType::Int32})); }, {"log_softmax", "mask", "int32"});
  check_error([&] { softmax(x, ones({3}, {DType::Float32})); }, {"softmax", "mask", "float32", "float64"});
  check_error([&] { softmax(Tensor()); }, {"softmax", "undefined"});
}

TEST_CASE("softmax on inputs large enough to run on several threads matches the composition") {
  const Tensor x = uniform({300, 211}, 14, -5, 5);
  const Tensor keep = gt(uniform({211}, 15), scalar(-0.8, {DType::Float64}));
  check_matches_reference([keep](const std::vector<Tensor>& in) { return softmax(in[0], keep); },
                          [keep](const std::vector<Tensor>& in) { return reference_softmax(keep_or_minus_inf(in[0], keep)); },
                          {x}, 1e-12, 1e-10);
  check_matches_reference([](const std::vector<Tensor>& in) { return log_softmax(in[0]); },
                          [](const std::vector<Tensor>& in) { return reference_log_softmax(in[0]); }, {x}, 1e-12, 1e-10);
}

TEST_CASE("exp_nonpositive is within 2 ulp of e^x on all of [−87, 0]; exact at 0 and −inf") {
  // Both forms: rounded multiply-adds (exp_nonpositive) and fused ones (fused attention's kernels).
  const auto check_form = [](const std::string& name, float (*exp_of)(float)) {
    // Every float in [−87, 0] (about 1.1e9 values) would take too long; every 97th bit pattern from
    // −87 up to −0 covers each binade densely. Reference: e^x in double, rounded to float.
    auto ulp_error = [&](float x) {
      const float got = exp_of(x);
      const double want = std::exp(static_cast<double>(x));
      const float want_f = static_cast<float>(want);
      const double ulp = std::nextafter(want_f, std::numeric_limits<float>::infinity()) - want_f;
      return std::abs(static_cast<double>(got) - want) / ulp;
    };
    uint32_t lowest_bits, bits;
    const float lowest = -87.0f;
    std::memcpy(&lowest_bits, &lowest, 4);
    double worst = 0;
    float worst_x = 0;
    int64_t checked = 0;
    for (bits = 0x80000000u; bits <= lowest_bits; bits += 97, ++checked) {  // −0 down to −87
      float x;
      std::memcpy(&x, &bits, 4);
      const double e = ulp_error(x);
      if (e > worst) worst = e, worst_x = x;
    }
    INFO(name << ": worst " << worst << " ulp at x = " << worst_x << " over " << checked << " values");
    CHECK(checked > 10000000);
    MESSAGE(name << ": worst " << worst << " ulp at x = " << worst_x);
    CHECK(worst <= 2.0);
    CHECK(exp_of(0.0f) == 1.0f);
    CHECK(exp_of(-0.0f) == 1.0f);
    CHECK(exp_of(-std::numeric_limits<float>::infinity()) == 0.0f);
    CHECK(exp_of(-88.0f) == 0.0f);
    CHECK(std::isnan(exp_of(std::numeric_limits<float>::quiet_NaN())));
  };
  check_form("exp_nonpositive", exp_nonpositive);
  check_form("exp_nonpositive_as<fused>", [](float x) { return exp_nonpositive_as<true>(x); });
}

#if TP_CPU_DISPATCH
TEST_CASE("exp_nonpositive_avx512 gives exp_nonpositive_as<fused>'s bits in every lane, NaN and ±inf included") {
  // Fused attention's AVX-512 softmax (ops/attention.cpp) takes the vector form, its other
  // capabilities the scalar one: both must round alike for the capabilities to give the same bits.
  if (cpu_capability_supported() < CpuCapability::Avx512) {
    MESSAGE("this CPU has no AVX-512: nothing to compare");
    return;
  }
  // Every 61st bit pattern of the non-positive floats (−0 down to −inf, NaNs after), positive ones
  // (clamped to 0 on the way), and a length that leaves a partial vector at the end.
  std::vector<float> x;
  for (uint64_t bits = 0x80000000u; bits <= 0xFFFFFFFFu; bits += 61) {
    const uint32_t b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    x.push_back(f);
  }
  for (const float f : {0.0f, 1.0f, 87.5f, std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(), -87.0f, -87.00001f, -86.99999f})
    x.push_back(f);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  REQUIRE(x.size() % 16 != 0);
  std::vector<float> got(x.size());
  exp_nonpositive_avx512(x.data(), got.data(), static_cast<int64_t>(x.size()));
  int64_t differ = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = exp_nonpositive_as<true>(x[i]);
    const bool same = std::isnan(want) ? std::isnan(got[i]) : std::memcmp(&want, &got[i], 4) == 0;
    const auto bits = [](float f) {
      uint32_t b;
      std::memcpy(&b, &f, 4);
      return b;
    };
    if (!same && differ++ < 5)
      MESSAGE("x bits " << bits(x[i]) << ": vector gives bits " << bits(got[i]) << ", scalar " << bits(want));
  }
  CHECK(x.size() > 30000000);
  CHECK(differ == 0);
}
#endif

TEST_CASE("log_softmax in float32 under every CPU capability: near float64's, AVX2 and AVX-512 to the bit") {
  // Rows of 1 … 100 classes (AVX-512 takes 16 at a time, the last vector part full: ops/softmax.cpp),
  // the speech recogniser's 51 among them, with masked entries and a row with every entry masked;
  // the backward with a dy that also reaches the masked entries.
  const auto check_near = [](const Tensor& got, const Tensor& want) {  // −inf only where want has it
    const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("element " << i << ": " << a[i] << " vs " << b[i]);
      CHECK((std::isinf(b[i]) ? a[i] == b[i] : std::abs(a[i] - b[i]) <= 1e-5 + 1e-5 * std::abs(b[i])));
    }
  };
  for (const int64_t C : {1, 3, 15, 16, 17, 31, 51, 64, 100}) {
    INFO("C = " << C);
    const Tensor x64 = uniform({6, C}, 40 + C, -8, 8);
    const Tensor row_keeps = from_vector<bool>({true, true, true, false, true, true}, {6, 1});  // row 3: nothing
    const Tensor keep = logical_and(gt(uniform({6, C}, 140 + C), scalar(-0.6, {DType::Float64})), row_keeps);
    const Tensor dy64 = uniform({6, C}, 240 + C);
    const auto run = [&](DType dtype) {
      Tensor x = to(x64, dtype).detach();
      x.set_requires_grad(true);
      const Tensor y = log_softmax(x, keep);
      backward(y, to(dy64, dtype));
      return std::pair{to(y, DType::Float64), to(x.grad(), DType::Float64)};
    };
    const auto [y64, g64] = run(DType::Float64);
    std::vector<std::pair<Tensor, Tensor>> by_capability;
    for (const CpuCapability c : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
      if (c > cpu_capability_supported()) continue;
      INFO("capability " << static_cast<int>(c));
      CpuCapabilityScope scope(c);
      const auto [y32, g32] = run(DType::Float32);
      check_near(y32, y64);
      check_near(g32, g64);  // 0 where masked and in the row that keeps nothing
      by_capability.emplace_back(y32, g32);
    }
    if (by_capability.size() == 3) {
      CHECK(by_capability[1].first.to_vector<double>() == by_capability[2].first.to_vector<double>());
      CHECK(by_capability[1].second.to_vector<double>() == by_capability[2].second.to_vector<double>());
    }
  }
  // A NaN makes its row NaN and leaves the others alone, under every capability.
  for (const CpuCapability c : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
    if (c > cpu_capability_supported()) continue;
    CpuCapabilityScope scope(c);
    const std::vector<float> y =
        log_softmax(from_vector<float>({0.5f, std::nanf(""), 1.0f, 0.0f, 0.0f, 0.0f}, {2, 3})).to_vector<float>();
    for (int i = 0; i < 3; ++i) CHECK(std::isnan(y[i]));
    for (int i = 3; i < 6; ++i) CHECK(y[i] == doctest::Approx(-std::log(3.0)).epsilon(1e-6));
  }
}
