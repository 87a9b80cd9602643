#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "core/cpu_capability.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// a and b hold the same bits (NaNs included), in float64.
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> u = to(a, DType::Float64).to_vector<double>();
  const std::vector<double> v = to(b, DType::Float64).to_vector<double>();
  return u.size() == v.size() && std::memcmp(u.data(), v.data(), u.size() * sizeof(double)) == 0;
}

}  // namespace

TEST_CASE("dropout in eval mode is the identity and draws nothing") {
  Generator gen(7);
  const Tensor x = uniform({4, 5}, 1);
  const Tensor y = dropout(x, 0.5, gen, Mode::Eval);
  CHECK(y.impl_ptr() == x.impl_ptr());
  CHECK(gen.offset() == 0);
}

TEST_CASE("dropout in train mode keeps about 1 − p of the elements, scaled by 1 / (1 − p)") {
  const double p = 0.3;
  const int64_t n = 200000;
  Generator gen(42);
  const Tensor x = uniform({n / 100, 100}, 2, 1, 2);  // no zeros, so a zero output means dropped
  const Tensor y = dropout(to(x, DType::Float32), p, gen, Mode::Train);
  CHECK(gen.offset() == static_cast<uint64_t>(n / 8));  // one Philox block per eight elements
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<float> yv = y.to_vector<float>();
  int64_t kept = 0, wrong_scale = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    if (yv[i] == 0.0f) continue;
    ++kept;
    wrong_scale += std::abs(yv[i] - xv[i] / (1 - p)) > 1e-6 * xv[i] / (1 - p);
  }
  CHECK(wrong_scale == 0);
  // the kept fraction has standard deviation √(p (1 − p) / n) ≈ 0.001: allow 5 of them
  CHECK(std::abs(static_cast<double>(kept) / n - (1 - p)) < 0.005);
}

TEST_CASE("the dropout mask takes eight 16-bit draws from each Philox block, for any dtype") {
  const double p = 0.25;
  const Tensor x = uniform({3, 7, 11}, 3, 1, 2);  // 231 elements: the last block serves seven
  Generator a(5), b(5);
  a.reserve(17), b.reserve(17);  // any state, not just offset 0
  const Tensor y64 = dropout(x, p, a, Mode::Train);
  const Tensor y32 = dropout(to(x, DType::Float32), p, b, Mode::Train);
  // element i is kept iff draw i % 8 of the block of counter 17 + i / 8 is ≥ 0.25 · 2^16
  std::vector<double> expected = x.to_vector<double>();
  for (size_t i = 0; i < expected.size(); ++i) {
    const PhiloxBlock block = philox_block(17 + i / 8, 5);
    expected[i] = uniform_bits16(block, static_cast<int64_t>(i % 8)) >= 16384 ? expected[i] / (1 - p) : 0.0;
  }
  check_close(y64, from_vector(expected, x.shape()), 1e-15, 1e-15);
  check_close(to(y32, DType::Float64), y64, 1e-6, 1e-6);
  CHECK(a.offset() == 17 + (231 + 7) / 8);
  CHECK(b.offset() == a.offset());
}

TEST_CASE("dropout in float32 and bfloat16 gives the same mask and values under every CPU capability this CPU has") {
  // Its blocks are drawn 16 at a time, compiled for the baseline, AVX2 and AVX-512
  // (core/cpu_capability.h): 40,001 elements, split among threads, the last block serving one; among
  // them NaN, ±infinity and values whose scaling overflows (bfloat16 rounds in its own kernel there).
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    INFO(dtype_name(dtype));
    std::vector<double> values = uniform({40001}, 6, -2, 2).to_vector<double>();
    for (int64_t i = 0; i < 64; i += 4)
      values[i] = std::nan(""), values[i + 1] = INFINITY, values[i + 2] = -INFINITY, values[i + 3] = -3e38;
    const Tensor x = to(from_vector(values, {40001}), dtype);
    const auto run = [&](CpuCapability capability) {
      CpuCapabilityScope scope(capability);
      Generator gen(9);
      gen.reserve(3);
      const Tensor y = dropout(x, 0.3, gen, Mode::Train);
      REQUIRE(y.dtype() == dtype);
      return y;
    };
    const Tensor baseline = run(CpuCapability::Baseline);
    const std::vector<float> out = to(baseline, DType::Float32).to_vector<float>();
    const std::vector<float> in = to(x, DType::Float32).to_vector<float>();
    const uint32_t cut = 19661;  // round(0.3 · 2^16)
    for (size_t i = 0; i < in.size(); ++i) {
      const bool kept = uniform_bits16(philox_block(3 + i / 8, 9), static_cast<int64_t>(i % 8)) >= cut;
      const float scaled = in[i] * float(1 / 0.7);  // in float32, then rounded once in bfloat16
      const float expected = !kept ? 0.0f : dtype == DType::BFloat16 ? float(bfloat16(scaled)) : scaled;
      if (std::isnan(expected) ? !std::isnan(out[i]) : out[i] != expected) FAIL("element " << i);
    }
    for (const CpuCapability c : {CpuCapability::Avx2, CpuCapability::Avx512}) {
      if (c > cpu_capability_supported()) continue;
      INFO(to_string(c));
      CHECK(same_bits(run(c), baseline));
    }
  }
}

TEST_CASE("dropout of every bfloat16 value rounds as bfloat16 does, under every CPU capability this CPU has") {
  // p = 0.2 scales by 1.25, so x · 1.25 is exact in float32 and a fifth of the products lie halfway
  // between two bfloat16 values (ties to even); NaNs, infinities and overflows among the 65,536.
  std::vector<float> values(65536);
  for (uint32_t h = 0; h < 65536; ++h) values[h] = float(bfloat16::from_bits(static_cast<uint16_t>(h)));
  const Tensor x = to(from_vector(values, {65536}), DType::BFloat16);
  const std::vector<float> in = to(x, DType::Float32).to_vector<float>();
  for (const CpuCapability c : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
    if (c > cpu_capability_supported()) continue;
    INFO(to_string(c));
    CpuCapabilityScope scope(c);
    Generator gen(10);
    const std::vector<float> out = to(dropout(x, 0.2, gen, Mode::Train), DType::Float32).to_vector<float>();
    int64_t wrong = 0, ties = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const bool kept = uniform_bits16(philox_block(i / 8, 10), static_cast<int64_t>(i % 8)) >= 13107;
      const float scaled = in[i] * 1.25f, expected = kept ? float(bfloat16(scaled)) : 0.0f;
      uint32_t bits;
      std::memcpy(&bits, &scaled, sizeof bits);
      ties += kept && std::isfinite(scaled) && (bits & 0xFFFFu) == 0x8000u;
      wrong += std::memcmp(&out[i], &expected, sizeof(float)) != 0;
    }
    CHECK(ties > 1000);
    CHECK(wrong == 0);
  }
}

TEST_CASE("dropout's mask where the counters' low words wrap, under a seed wider than 32 bits") {
  // The AVX-512 kernel carries a wrapping low word of the counter into its high word lane by lane; the
  // seed's high word is the key's second word. 1,001 elements from 3 blocks below 2^32 on.
  const Tensor x = to(uniform({1001}, 7, -2, 2), DType::Float32);
  const std::vector<float> in = x.to_vector<float>();
  const uint64_t seed = 0x0123456789ABCDEFull, first = (uint64_t{1} << 32) - 3;
  for (const CpuCapability c : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
    if (c > cpu_capability_supported()) continue;
    INFO(to_string(c));
    CpuCapabilityScope scope(c);
    Generator gen;
    gen.set_state(seed, first);
    const std::vector<float> y = dropout(x, 0.5, gen, Mode::Train).to_vector<float>();
    for (size_t i = 0; i < in.size(); ++i) {
      const bool kept = uniform_bits16(philox_block(first + i / 8, seed), static_cast<int64_t>(i % 8)) >= 32768;
      if (y[i] != (kept ? in[i] * 2.0f : 0.0f)) FAIL("element " << i);
    }
  }
}

TEST_CASE("dropout drops with p rounded to a multiple of 2^-16") {
  // p = 0.1 is cut = round(6553.6) = 6554: an element survives with probability 58982 / 65536.
  Generator gen(11);
  const Tensor x = ones({1 << 20}, {DType::Float64});
  const std::vector<double> y = dropout(x, 0.1, gen, Mode::Train).to_vector<double>();
  int64_t kept = 0;
  for (double v : y) {
    if (v == 0.0) continue;
    ++kept;
    REQUIRE(v == 1.0 / 0.9);
  }
  // the kept fraction's standard deviation is √(0.1 · 0.9 / 2^20) ≈ 3e-4: allow 5 of them
  CHECK(std::abs(static_cast<double>(kept) / (1 << 20) - 58982.0 / 65536.0) < 1.5e-3);
  // p just below 1 still keeps the largest draw (cut stops at 2^16 − 1), scaled by 1 / (1 − p)
  const std::vector<double> nearly_all = dropout(x, 1 - 1e-9, gen, Mode::Train).to_vector<double>();
  for (double v : nearly_all) REQUIRE((v == 0.0 || std::isfinite(v)));
}

TEST_CASE("the same generator state gives the same mask; the next draw a different one") {
  const Tensor x = ones({1000}, {DType::Float32});
  Generator gen(9);
  const Tensor first = dropout(x, 0.5, gen, Mode::Train);
  const Tensor second = dropout(x, 0.5, gen, Mode::Train);
  gen.set_state(9, 0);
  const Tensor again = dropout(x, 0.5, gen, Mode::Train);
  CHECK(first.to_vector<float>() == again.to_vector<float>());
  CHECK(first.to_vector<float>() != second.to_vector<float>());
  Generator other(10);
  CHECK(dropout(x, 0.5, other, Mode::Train).to_vector<float>() != first.to_vector<float>());
}

TEST_CASE("dropout with p = 0 in train mode keeps everything") {
  Generator gen(3);
  const Tensor x = uniform({5, 5}, 4);
  const Tensor y = dropout(x, 0.0, gen, Mode::Train);
  CHECK(y.impl_ptr() == x.impl_ptr());  // x itself: no mask is computed
  CHECK(gen.offset() == 4);  // ⌈25 / 8⌉ blocks, reserved all the same
}

TEST_CASE("the dropout gradient uses the forward's mask") {
  const double p = 0.4;
  Tensor x = uniform({8, 9}, 5, 1, 2);
  x.set_requires_grad(true);
  Generator gen(11);
  const Tensor y = dropout(x, p, gen, Mode::Train);
  dropout(x.detach(), p, gen, Mode::Train);  // moves the generator on; must not matter
  const Tensor seed = uniform({8, 9}, 6);
  y.backward(seed);
  // y = x · keep / (1 − p), so dx = dy · y / x exactly where kept and 0 where dropped
  const Tensor expected = where(ne(y.detach(), zeros({}, {DType::Float64})), seed / (1 - p), zeros({}, {DType::Float64}));
  check_close(x.grad(), expected, 1e-15, 1e-14);

  // gradcheck: each evaluation starts from the same generator state, so the mask is fixed
  check_gradients([](const std::vector<Tensor>& in) {
    Generator g(12);
    return dropout(in[0], 0.3, g, Mode::Train);
  }, {uniform({4, 6}, 7)});
}

TEST_CASE("dropout checks its arguments") {
  Generator gen(1);
  const Tensor x = uniform({2, 3}, 8);
  check_error([&] { dropout(x, 1.0, gen, Mode::Train); }, {"dropout", "[0, 1)", "got 1"});
  check_error([&] { dropout(x, -0.1, gen, Mode::Train); }, {"dropout", "[0, 1)", "-0.1"});
  check_error([&] { dropout(x, std::nan(""), gen, Mode::Eval); }, {"dropout", "[0, 1)", "nan"});
  check_error([&] { dropout(ones({2}, {DType::Int64}), 0.5, gen, Mode::Train); }, {"dropout", "floating", "int64"});
  CHECK(gen.offset() == 0);
}

TEST_CASE("relu_dropout is dropout(relu(x)) to the bit, under every CPU capability this CPU has") {
  // values, gradients and the generator's draws; both signs, zeros and a NaN (relu passes it on, and
  // neither form sends a gradient through it); 40,001 elements, split among threads
  for (const DType dtype : {DType::Float32, DType::Float64, DType::BFloat16}) {
    std::vector<double> values = uniform({40001}, 30, -2, 2).to_vector<double>();
    values[5] = 0.0, values[6] = -0.0, values[7] = std::nan("");
    const Tensor x = to(from_vector(values, {40001}), dtype), dy = to(uniform({40001}, 31), dtype);
    for (const CpuCapability c : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
      if (c > cpu_capability_supported()) continue;
      INFO(dtype_name(dtype) << " at " << to_string(c));
      CpuCapabilityScope scope(c);
      Tensor x1 = x.detach(), x2 = x.detach();
      x1.set_requires_grad(true);
      x2.set_requires_grad(true);
      Generator a(8), b(8);
      a.reserve(5), b.reserve(5);
      const Tensor fused = relu_dropout(x1, 0.3, a, Mode::Train), composed = dropout(relu(x2), 0.3, b, Mode::Train);
      CHECK(a.offset() == b.offset());
      CHECK(same_bits(fused, composed));
      fused.backward(dy);
      composed.backward(dy);
      CHECK(same_bits(x1.grad(), x2.grad()));
    }
  }
}

TEST_CASE("relu_dropout holds its output alone for the backward; dropout(relu(x)) holds relu's output too") {
  Allocator& alloc = context(Device::cpu()).allocator();
  Tensor x = to(uniform({256, 512}, 32), DType::Float32);
  x.set_requires_grad(true);
  const int64_t bytes = 256 * 512 * 4;
  const auto held = [&](const std::function<Tensor()>& forward) {
    alloc.empty_cache();
    const int64_t before = alloc.stats().in_use;
    const Tensor y = forward();
    return alloc.stats().in_use - before;
  };
  Generator gen(3);
  CHECK(held([&] { return relu_dropout(x, 0.1, gen, Mode::Train); }) < bytes * 3 / 2);
  CHECK(held([&] { return dropout(relu(x), 0.1, gen, Mode::Train); }) >= 2 * bytes);
}

TEST_CASE("relu_dropout in eval mode or with p = 0 is relu; its gradcheck") {
  const Tensor x = uniform({5, 7}, 33);
  Generator gen(4);
  check_close(relu_dropout(x, 0.5, gen, Mode::Eval), relu(x), 0, 0);
  CHECK(gen.offset() == 0);
  check_close(relu_dropout(x, 0.0, gen, Mode::Train), relu(x), 0, 0);
  CHECK(gen.offset() == 5);  // ⌈35 / 8⌉ blocks, reserved all the same
  check_gradients([](const std::vector<Tensor>& in) {
    Generator g(12);
    return relu_dropout(in[0], 0.3, g, Mode::Train);
  }, {uniform({4, 6}, 34)});
}

TEST_CASE("relu_dropout checks its arguments") {
  Generator gen(1);
  const Tensor x = uniform({2, 3}, 35);
  check_error([&] { relu_dropout(x, 1.0, gen, Mode::Train); }, {"relu_dropout", "[0, 1)", "got 1"});
  check_error([&] { relu_dropout(x, -0.5, gen, Mode::Eval); }, {"relu_dropout", "[0, 1)", "-0.5"});
  check_error([&] { relu_dropout(ones({2}, {DType::Int64}), 0.5, gen, Mode::Train); },
              {"relu_dropout", "floating", "int64"});
  CHECK(gen.offset() == 0);
}
