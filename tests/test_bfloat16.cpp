// bfloat16 (core/bfloat16.h) and autocast (ops/autocast.h): the conversion's rounding, exhaustively
// where it can be; each bfloat16 op against the float32 op on the same values, rounded once (the CPU
// computes bfloat16 in float32, so most agree to the bit; matmul through oneDNN, where it runs,
// within the bound of a float32 sum in another order); what autocast converts and what it leaves;
// gradients reaching float32 weights; checkpoints; clear refusals.
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/cpu_capability.h"
#include "ops/autocast.h"
#include "ops/onednn_gemm.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

uint16_t bits_of(float value) { return bfloat16(value).bits; }

float from_bits(uint32_t word) {
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

// float32 values of x rounded to bfloat16 (a bfloat16 tensor's values, exactly, as float32).
Tensor rounded(const Tensor& x) { return to(to(to(x, DType::Float32), DType::BFloat16), DType::Float32); }

// a and b hold the same float32 values bit for bit (NaN matching NaN).
void check_same(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = to(a, DType::Float32).to_vector<float>(), y = to(b, DType::Float32).to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i << ": " << x[i] << " vs " << y[i]);
    CHECK(std::memcmp(&x[i], &y[i], sizeof(float)) == 0);
  }
}

// A bfloat16 tensor of `shape`, uniform in [lo, hi) before rounding.
Tensor bf16_uniform(const Shape& shape, uint64_t seed, double lo = -2, double hi = 2) {
  return to(uniform(shape, seed, lo, hi), DType::BFloat16);
}

}  // namespace

TEST_CASE("bfloat16: rounds to nearest, ties to even; keeps infinities and NaN; widens exactly") {
  CHECK(bits_of(1.0f) == 0x3f80);
  CHECK(bits_of(-2.0f) == 0xc000);
  CHECK(bits_of(-0.0f) == 0x8000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to the even one, 1. 1 + 3·2^-8: up to 1 + 2^-6.
  CHECK(bits_of(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  CHECK(bits_of(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(bits_of(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);  // above halfway
  CHECK(bits_of(1.0f + std::ldexp(1.0f, -8) - std::ldexp(1.0f, -20)) == 0x3f80);  // below
  CHECK(bits_of(std::numeric_limits<float>::infinity()) == 0x7f80);
  CHECK(bits_of(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(bits_of(std::numeric_limits<float>::max()) == 0x7f80);  // past the largest finite bfloat16
  CHECK(bits_of(from_bits(0x7f7f7fff)) == 0x7f7f);                // just below its rounding boundary
  CHECK(bits_of(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(std::isnan(float(bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(float(bfloat16(from_bits(0x7f800001)))));  // a signalling NaN whose payload rounding would lose
  CHECK(std::isnan(float(bfloat16(from_bits(0xffffffff)))));  // and one that rounding would carry into the sign
  CHECK(float(bfloat16(0.1)) == 0.10009765625f);  // from float64, through float32
  CHECK(float(bfloat16(int64_t{257})) == 256.0f);  // 257 is a tie between 256 and 258: even
  CHECK(float(bfloat16(int64_t{259})) == 260.0f);

  // Every bfloat16 widens to a float32 that rounds back to itself (NaNs stay NaN).
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const float wide = float(bfloat16::from_bits(static_cast<uint16_t>(b)));
    if (std::isnan(wide)) {
      CHECK(std::isnan(float(bfloat16(wide))));
      continue;
    }
    INFO("bits " << b);
    CHECK(bfloat16(wide).bits == b);
  }
  // Against round-to-nearest-even computed in float64 over a sweep of float32 bit patterns.
  for (uint64_t w = 0; w < 0x100000000ull; w += 0x1003) {
    const float f = from_bits(static_cast<uint32_t>(w));
    if (!std::isfinite(f) || std::fabs(f) > 3.3e38f) continue;
    const uint32_t low = static_cast<uint32_t>(w) & 0xffff0000u;
    const double down = from_bits(low), up = from_bits(low + 0x10000u);
    const double d_down = std::fabs(f - down), d_up = std::fabs(up - f);
    const uint16_t even = (low >> 16) & 1 ? static_cast<uint16_t>((low >> 16) + 1) : static_cast<uint16_t>(low >> 16);
    const uint16_t kept = static_cast<uint16_t>(low >> 16), next = static_cast<uint16_t>(kept + 1);
    const uint16_t expected = d_down < d_up ? kept : d_up < d_down ? next : even;
    INFO("float bits " << w);
    CHECK(bits_of(f) == expected);
  }
}

TEST_CASE("bfloat16 tensors: conversion both ways, printing, element size, checkpoints") {
  const Tensor x = uniform({3, 5}, 1, -100, 100);
  const Tensor b = to(x, DType::BFloat16);
  CHECK(b.dtype() == DType::BFloat16);
  CHECK(element_size(DType::BFloat16) == 2);
  CHECK(is_floating(DType::BFloat16));
  const std::vector<float> wide = to(x, DType::Float32).to_vector<float>(), narrow = b.to_vector<float>();
  for (size_t i = 0; i < wide.size(); ++i) CHECK(narrow[i] == float(bfloat16(wide[i])));
  check_same(to(to(b, DType::Float32), DType::BFloat16), b);  // float32 holds every bfloat16
  CHECK(to(b, DType::Int64).to_vector<int64_t>()[0] == static_cast<int64_t>(narrow[0]));  // truncates, as float32
  std::ostringstream printed;
  printed << full({2}, 1.5, {DType::BFloat16});
  CHECK(printed.str().find("bfloat16") != std::string::npos);
  CHECK(printed.str().find("1.5") != std::string::npos);

  TempDir dir;
  Checkpoint ckpt;
  ckpt.tensors["b"] = b;
  save_checkpoint(dir.file("b.ckpt"), ckpt);
  const Checkpoint loaded = load_checkpoint(dir.file("b.ckpt"));
  REQUIRE(loaded.tensors.at("b").dtype() == DType::BFloat16);
  check_same(loaded.tensors.at("b"), b);
}

TEST_CASE("float32 ↔ bfloat16 copies give the constructor's bits under every capability, in every layout") {
  // copy_ converts runs of unit stride with kernels compiled for each capability, and a tensor whose
  // layout is dense and matches the destination's in one run over its storage (ops/elementwise.cpp).
  // Every 4099th float bit pattern (all exponents: subnormals, ties, infinities, NaNs) and both
  // directions; layouts: contiguous, a permutation of contiguous dims in both (the flat run), a
  // permuted source into a contiguous destination, every second element, a broadcast row.
  std::vector<float> values;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFull; bits += 4099) {
    const uint32_t word = static_cast<uint32_t>(bits);
    float v;
    std::memcpy(&v, &word, 4);
    values.push_back(v);
  }
  values.resize(values.size() / 240 * 240);  // (n / 240, 4, 6, 10)
  const int64_t n = static_cast<int64_t>(values.size());
  const Tensor source = from_vector<float>(values, {n});
  const auto bits_of = [](const Tensor& t) {  // a bfloat16 tensor's 16-bit words, in index order
    const Tensor c = contiguous(t);
    const auto* p = static_cast<const uint16_t*>(c.raw_data());
    return std::vector<uint16_t>(p, p + c.numel());
  };
  const auto expected_bits = [](const Tensor& f) {  // the constructor's rounding of each element
    std::vector<uint16_t> out;
    for (float v : contiguous(f).to_vector<float>()) out.push_back(bfloat16(v).bits);
    return out;
  };
  const auto same_floats = [](const Tensor& a, const Tensor& b) {  // bit for bit, NaNs included
    const std::vector<float> x = contiguous(a).to_vector<float>(), y = contiguous(b).to_vector<float>();
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * 4) == 0;
  };
  for (const CpuCapability capability : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
    if (capability > cpu_capability_supported()) continue;
    CpuCapabilityScope scope(capability);
    INFO(to_string(capability));
    const Tensor blocks = reshape(source, {n / 240, 4, 6, 10});
    const Tensor permuted = permute(blocks, {0, 2, 1, 3});
    const Tensor like_permuted = permute(empty({n / 240, 4, 6, 10}, {DType::BFloat16}), {0, 2, 1, 3});
    copy_(like_permuted, permuted);
    const Tensor strided = slice(source, 0, 0, n, 2);
    const Tensor row = slice(source, 0, 0, 10);
    const Tensor broadcast = empty({7, 10}, {DType::BFloat16});
    copy_(broadcast, row);
    CHECK(bits_of(to(source, DType::BFloat16)) == expected_bits(source));
    CHECK(bits_of(like_permuted) == expected_bits(permuted));
    CHECK(bits_of(to(permuted, DType::BFloat16)) == expected_bits(permuted));
    CHECK(bits_of(to(strided, DType::BFloat16)) == expected_bits(strided));
    CHECK(bits_of(broadcast) == expected_bits(expand(reshape(row, {1, 10}), {7, 10})));
    // and back: float32 holds every bfloat16 exactly (a NaN's bits kept)
    const Tensor narrow = to(source, DType::BFloat16);
    const Tensor narrow_permuted = permute(reshape(narrow, {n / 240, 4, 6, 10}), {0, 2, 1, 3});
    const Tensor wide_permuted = permute(empty({n / 240, 4, 6, 10}, {DType::Float32}), {0, 2, 1, 3});
    copy_(wide_permuted, narrow_permuted);
    std::vector<float> widened;
    for (uint16_t b : bits_of(narrow)) widened.push_back(float(bfloat16::from_bits(b)));
    CHECK(same_floats(to(narrow, DType::Float32), from_vector<float>(widened, {n})));
    CHECK(same_floats(wide_permuted, permute(reshape(from_vector<float>(widened, {n}), {n / 240, 4, 6, 10}),
                                             {0, 2, 1, 3})));
  }
}

TEST_CASE("bfloat16 ops compute in float32 and round once: the float32 op's result, rounded") {
  const Tensor x = bf16_uniform({4, 7}, 2), y = bf16_uniform({7}, 3, 0.5, 3);
  const Tensor x32 = to(x, DType::Float32), y32 = to(y, DType::Float32);
  // Forward: exactly the float32 op on the same values, rounded.
  check_same(exp(x), rounded(exp(x32)));
  check_same(tanh(x), rounded(tanh(x32)));
  check_same(gelu(x), rounded(gelu(x32)));
  check_same(relu(x), rounded(relu(x32)));
  check_same(log(y), rounded(log(y32)));
  check_same(add(x, y), rounded(add(x32, y32)));  // broadcasting
  check_same(mul(x, y), rounded(mul(x32, y32)));
  check_same(div(x, y), rounded(div(x32, y32)));
  check_same(maximum(x, y), rounded(maximum(x32, y32)));
  check_same(x * 3.0, rounded(x32 * 3.0));
  check_same(where(gt(x, zeros({}, x.options())), x, y), rounded(where(gt(x32, zeros({}, x32.options())), x32, y32)));
  // sum accumulates in float64 as float32's does; one rounding at the end.
  check_same(sum(x, {1}), rounded(sum(x32, {1})));
  check_same(sum(x), rounded(sum(x32)));
  {  // matmul in float32 (below the AVX-512 capability, where oneDNN is not used): the float32 product
     // of the same values, rounded
    CpuCapabilityScope float32_products(CpuCapability::Baseline);
    const Tensor a = bf16_uniform({2, 5, 9}, 4), m = bf16_uniform({9, 6}, 5);
    check_same(matmul(a, m), rounded(matmul(to(a, DType::Float32), to(m, DType::Float32))));
    check_same(matmul(transpose(a, 1, 2), bf16_uniform({5, 3}, 6)),
               rounded(matmul(transpose(to(a, DType::Float32), 1, 2), to(bf16_uniform({5, 3}, 6), DType::Float32))));
  }
  // embedding: rows copied; the gradient added in float32 and rounded once (repeated indices).
  const Tensor table = bf16_uniform({6, 5}, 30), ids = from_vector<int64_t>({3, 0, 3, 5, 3}, {5});
  Tensor t16 = table.detach(), t32 = to(table, DType::Float32).detach();
  t16.set_requires_grad(true);
  t32.set_requires_grad(true);
  const Tensor seed = bf16_uniform({5, 5}, 31);
  const Tensor e16 = embedding(t16, ids), e32 = embedding(t32, ids);
  check_same(e16, rounded(e32));
  e16.backward(seed);
  e32.backward(to(seed, DType::Float32));
  CHECK(t16.grad().dtype() == DType::BFloat16);
  check_same(t16.grad(), rounded(t32.grad()));
  // dropout: the float32 mask, the scaling in float32, one rounding.
  Generator g1(7), g2(7);
  check_same(dropout(x, 0.3, g1, Mode::Train), rounded(dropout(x32, 0.3, g2, Mode::Train)));
}

namespace {

// `product` (bfloat16) against the float32 product `exact` of the same bfloat16 values, with `magnitude`
// the product of their absolute values: both sum the same exact float32 products (8-bit significands
// multiply exactly), each in its own order, which moves a sum of k terms by at most
// (k - 1) · 2^-24 · magnitude, and then round once (2^-9 relative each): per element,
// |product - exact| <= 2 · k · 2^-24 · magnitude + 2^-8 · |exact|.
void check_product(const Tensor& product, const Tensor& exact, const Tensor& magnitude, int64_t k) {
  REQUIRE(product.dtype() == DType::BFloat16);
  REQUIRE(product.shape() == exact.shape());
  const std::vector<double> p = to(product, DType::Float64).to_vector<double>(), e = exact.to_vector<double>(),
                            s = to(magnitude, DType::Float64).to_vector<double>();
  int64_t same = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    INFO("element " << i << ": " << p[i] << " vs " << e[i]);
    CHECK(std::abs(p[i] - e[i]) <= 2.0 * double(k) * std::ldexp(s[i], -24) + std::ldexp(std::abs(e[i]), -8));
    same += bits_of(static_cast<float>(p[i])) == bits_of(static_cast<float>(e[i]));
  }
  // A different order of the sums moves a rounding only near a tie: most elements agree to the bit.
  CHECK(same >= static_cast<int64_t>(0.9 * double(p.size())));
}

}  // namespace

TEST_CASE("bfloat16 matmul through oneDNN: the float32 product's value within the bound of another order of sums") {
  if (!cpu_bf16_gemm_available()) {
    MESSAGE("skipped: this build has no oneDNN, or this CPU no bfloat16 arithmetic (bfloat16 products run in float32)");
    return;
  }
  REQUIRE(cpu_capability_supported() == CpuCapability::Avx512);
  CpuCapabilityScope avx512(CpuCapability::Avx512);
  const auto f32 = [](const Tensor& t) { return to(t, DType::Float32); };
  // k = 300 so that the order of the sums matters; a broadcast operand; transposed operands.
  const Tensor a = bf16_uniform({2, 3, 7, 300}, 40), b = bf16_uniform({300, 5}, 41);
  const Tensor c = bf16_uniform({2, 1, 5, 300}, 42);
  check_product(matmul(a, b), matmul(f32(a), f32(b)), matmul(abs(f32(a)), abs(f32(b))), 300);
  check_product(matmul(a, transpose(c, 2, 3)), matmul(f32(a), transpose(f32(c), 2, 3)),
                matmul(abs(f32(a)), transpose(abs(f32(c)), 2, 3)), 300);
  const Tensor at = bf16_uniform({2, 300, 7}, 43);
  check_product(matmul(transpose(at, 1, 2), b), matmul(transpose(f32(at), 1, 2), f32(b)),
                matmul(transpose(abs(f32(at)), 1, 2), abs(f32(b))), 300);

  // Straight through cpu_bf16_gemm: out = a · b + beta · out, with a row stride wider than the row.
  const Tensor wide = bf16_uniform({4, 12}, 44), x = slice(wide, 1, 0, 9), y = bf16_uniform({9, 6}, 45);
  const Tensor out = bf16_uniform({4, 6}, 46), before = f32(out);
  const auto matrix = [](const Tensor& t) {
    return Bf16Matrix{const_cast<void*>(t.raw_data()), {t.shape()[0], t.shape()[1]}, {t.strides()[0], t.strides()[1]}};
  };
  REQUIRE(cpu_bf16_gemm(matrix(x), matrix(y), matrix(out), 0.5f));
  const Tensor exact = matmul(f32(x), f32(y)) + before * 0.5;
  check_product(out, exact, matmul(abs(f32(x)), abs(f32(y))) + abs(before) * 0.5, 10);

  // Gradients go through the same products (a's: the seed times b transposed).
  Tensor p16 = a.detach(), p32 = f32(a).detach();
  p16.set_requires_grad(true);
  p32.set_requires_grad(true);
  const Tensor seed = bf16_uniform({2, 3, 7, 5}, 47);
  matmul(p16, b).backward(seed);
  matmul(p32, f32(b)).backward(f32(seed));
  check_product(p16.grad(), p32.grad(), matmul(abs(f32(seed)), transpose(abs(f32(b)), 0, 1)), 5);
}

TEST_CASE("bfloat16 cross-entropy: the float32 loss of the same values to the bit, the gradient rounded once") {
  // Read as float32 in the kernel, without a float32 copy of the logits: what widening them first
  // gives, and the same under autocast.
  const Tensor logits = bf16_uniform({37, 21}, 60, -4, 4);
  std::vector<int64_t> ids(37);
  for (size_t r = 0; r < ids.size(); ++r) ids[r] = r % 5 == 0 ? -100 : static_cast<int64_t>((r * 7) % 21);
  const Tensor targets = from_vector<int64_t>(ids, {37});
  for (const bool autocast_on : {false, true}) {
    CAPTURE(autocast_on);
    const AutocastScope autocast(autocast_on);
    Tensor x16 = logits.detach(), x32 = to(logits, DType::Float32).detach();
    x16.set_requires_grad(true);
    x32.set_requires_grad(true);
    const Tensor l16 = cross_entropy(x16, targets, -100, 0.1), l32 = cross_entropy(x32, targets, -100, 0.1);
    CHECK(l16.dtype() == DType::Float32);
    check_same(l16, l32);
    l16.backward();
    l32.backward();
    CHECK(x16.grad().dtype() == DType::BFloat16);
    check_same(x16.grad(), rounded(x32.grad()));
  }
}

TEST_CASE("bfloat16 gradients: within a few roundings of the float32 gradient at the same values") {
  // Each bfloat16 op rounds its result (at most 2^-9 relative), and the tape adds the gradients of
  // the branches in bfloat16, so a gradient whose terms cancel keeps the error of its largest term:
  // the bound is relative to the gradient's largest magnitude, 2^-6 · max |g32| (four roundings of
  // its largest terms), per tensor.
  const auto check_gradient = [](const Tensor& g16, const Tensor& g32) {
    CHECK(g16.dtype() == DType::BFloat16);
    const double scale = max(abs(g32)).item<double>();
    check_close(to(g16, DType::Float32), g32, std::ldexp(scale, -6), 0);
  };
  const Tensor x = bf16_uniform({3, 6}, 8), w = bf16_uniform({6, 4}, 9);
  for (const auto& f : std::vector<std::function<Tensor(const Tensor&, const Tensor&)>>{
           [](const Tensor& p, const Tensor& q) { return sum(mul(exp(p), p)) + sum(matmul(p, q)); },
           [](const Tensor& p, const Tensor& q) { return sum(tanh(matmul(p, q))); },
           [](const Tensor& p, const Tensor& q) { return sum(gelu(p) / (relu(p) + 1.0)) + sum(q * q); }}) {
    Tensor p16 = x.detach(), q16 = w.detach();
    Tensor p32 = to(x, DType::Float32).detach(), q32 = to(w, DType::Float32).detach();
    for (Tensor* t : {&p16, &q16, &p32, &q32}) t->set_requires_grad(true);
    f(p16, q16).backward();
    f(p32, q32).backward();
    check_gradient(p16.grad(), p32.grad());
    check_gradient(q16.grad(), q32.grad());
  }
}

TEST_CASE("bfloat16 fused attention: the float32 kernel's output rounded; gradients close; bfloat16 under autocast") {
  const Tensor q = bf16_uniform({2, 3, 37, 8}, 20), k = bf16_uniform({2, 3, 41, 8}, 21),
               v = bf16_uniform({2, 3, 41, 5}, 22);
  const Tensor lengths = from_vector<int64_t>({41, 17}, {2});
  const auto f32 = [](const Tensor& t) { return to(t, DType::Float32); };
  check_same(fused_attention(q, k, v, lengths), rounded(fused_attention(f32(q), f32(k), f32(v), lengths)));
  const Tensor qc = bf16_uniform({1, 2, 33, 8}, 23);
  check_same(fused_attention(qc, qc, qc, {}, true), rounded(fused_attention(f32(qc), f32(qc), f32(qc), {}, true)));

  std::vector<Tensor> half{q.detach(), k.detach(), v.detach()}, wide{f32(q).detach(), f32(k).detach(), f32(v).detach()};
  for (Tensor& t : half) t.set_requires_grad(true);
  for (Tensor& t : wide) t.set_requires_grad(true);
  const Tensor dy = uniform({2, 3, 37, 5}, 24);
  fused_attention(half[0], half[1], half[2], lengths).backward(to(dy, DType::BFloat16));
  fused_attention(wide[0], wide[1], wide[2], lengths).backward(f32(to(dy, DType::BFloat16)));
  for (size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    REQUIRE(half[i].grad().dtype() == DType::BFloat16);
    // The backward reads the rounded output (2^-9 relative) and rounds its result once.
    const double scale = max(abs(wide[i].grad())).item<double>();
    check_close(f32(half[i].grad()), wide[i].grad(), std::ldexp(scale, -6), 0);
  }
  const AutocastScope autocast;
  CHECK(fused_attention(q, k, v).dtype() == DType::BFloat16);
  CHECK(fused_attention(q, f32(k), v).dtype() == DType::Float32);  // mixed: float32
}

TEST_CASE("autocast: matmul and linear in bfloat16, softmax, norms and losses in float32, mixed operands widen") {
  const Tensor x = uniform({3, 4, 6}, 10).detach();
  Tensor w = to(uniform({5, 6}, 11), DType::Float32).detach(), bias = to(uniform({5}, 12), DType::Float32).detach();
  w.set_requires_grad(true);
  bias.set_requires_grad(true);
  const Tensor x32 = to(x, DType::Float32);
  Tensor y;
  {
    const AutocastScope autocast;
    CHECK(autocast_enabled());
    y = linear(x32, w, bias);
    CHECK(y.dtype() == DType::BFloat16);
    // The same as linear on the operands rounded, outside autocast.
    check_same(y, linear(to(x32, DType::BFloat16), to(w, DType::BFloat16), to(bias, DType::BFloat16)));
    CHECK(softmax(y).dtype() == DType::Float32);
    CHECK(layer_norm(y).dtype() == DType::Float32);
    CHECK(log_softmax(y).dtype() == DType::Float32);
    CHECK(add(y, slice(x32, 2, 0, 5)).dtype() == DType::Float32);  // float32 + bfloat16: float32
    CHECK(add(y, y).dtype() == DType::BFloat16);
    CHECK(matmul(x32, transpose(w, 0, 1)).dtype() == DType::BFloat16);
    CHECK(to(x, DType::Float64).dtype() == DType::Float64);
    CHECK(matmul(x, transpose(to(w, DType::Float64), 0, 1)).dtype() == DType::Float64);  // float64 stays
    const Tensor targets = from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1}, {12});
    const Tensor loss = cross_entropy(reshape(y, {12, 5}), targets);
    CHECK(loss.dtype() == DType::Float32);
    loss.backward();
  }
  CHECK_FALSE(autocast_enabled());
  // The gradients reach the float32 weights as float32, close to the float32 run's.
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == DType::Float32);
  CHECK(bias.grad().dtype() == DType::Float32);
  const Tensor g16 = w.grad(), b16 = bias.grad();
  w.zero_grad();
  bias.zero_grad();
  const Tensor targets = from_vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1}, {12});
  cross_entropy(reshape(linear(x32, w, bias), {12, 5}), targets).backward();
  check_close(g16, w.grad(), 0.02, 0.02);  // inputs rounded to 8 bits: errors of ~2^-8 per product
  check_close(b16, bias.grad(), 0.02, 0.02);
}

TEST_CASE("bfloat16: ops without a bfloat16 kernel, and mixed dtypes outside autocast, are refused clearly") {
  const Tensor b = bf16_uniform({2, 3}, 13);
  check_error([&] { softmax(b); }, {"softmax", "no bfloat16 kernel", "to(x, DType::Float32)"});
  check_error([&] { layer_norm(b); }, {"layer_norm", "no bfloat16 kernel"});
  check_error([&] { max(b); }, {"max", "no bfloat16 kernel"});
  check_error([&] { add(b, to(b, DType::Float32)); }, {"add", "bfloat16", "float32"});
  check_error([&] { matmul(b, transpose(to(b, DType::Float32), 0, 1)); }, {"matmul", "bfloat16", "float32"});
}
