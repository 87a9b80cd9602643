// bfloat16 on the GPU against the CPU: the conversions bit for bit, the elementwise ops, sums,
// embedding, matmul through cuBLAS's bfloat16 GEMM, dropout, cross-entropy of bfloat16 logits, fused
// attention, and a linear layer under autocast (ops/autocast.h), values and gradients.
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/autocast.h"
#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Both devices compute in float32 and round once; their float32 results differ by an ulp of float32
// or two (libm, the order of a GEMM's sums), which can move the rounding to the next bfloat16: one
// bfloat16 ulp, 2^-7 relative at most. A backward rounds twice or three times on the way.
constexpr Tolerance kForward{1e-6, 0.0078125};  // 2^-7
constexpr Tolerance kBackward{1e-3, 0.03125};   // 2^-5

Tensor bf16_input(const Shape& shape, uint64_t seed, double lo = -1, double hi = 1) {
  return input(shape, seed, DType::BFloat16, lo, hi);
}

}  // namespace

TEST_CASE("bfloat16: conversions from and to float32 and float64 are the CPU's bit for bit") {
  uint64_t seed = 1;
  for (int64_t n : parity_sizes()) {
    INFO("size " << n);
    // Values across many binades, and the specials.
    Tensor x = input({n}, ++seed, DType::Float32, -1, 1) * 1e5;
    const auto to_bf16 = [](const std::vector<Tensor>& in) { return to(in[0], DType::BFloat16); };
    const auto to_f32 = [](const std::vector<Tensor>& in) { return to(in[0], DType::Float32); };
    check_values(to_bf16, {x}, kExact);
    check_values(to_f32, {to(x, DType::BFloat16)}, kExact);
    check_values(to_bf16, {to(x, DType::Float64)}, kExact);
  }
  const Tensor specials =
      from_vector<float>({INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 3.4e38f, 1e-40f, 1.00390625f}, {8});
  expect_bitwise(to(to(specials, dut()), DType::BFloat16), to(specials, DType::BFloat16));
}

TEST_CASE("bfloat16: elementwise ops, sums, dropout, embedding and matmul agree with the CPU's bfloat16") {
  uint64_t seed = 100;
  for (int64_t n : parity_sizes()) {
    INFO("size " << n);
    const auto a = bf16_input({3, n}, ++seed), b = bf16_input({n}, ++seed, 0.5, 2);
    check_parity([](const std::vector<Tensor>& in) { return tapestry::exp(in[0]); }, {a}, kBackward);
    check_parity([](const std::vector<Tensor>& in) { return gelu(in[0]) * tapestry::tanh(in[0]); }, {a}, kBackward);
    check_parity([](const std::vector<Tensor>& in) { return tapestry::div(in[0], in[1]) + in[1]; }, {a, b}, kBackward);
    check_parity([](const std::vector<Tensor>& in) { return sum(in[0], {1}); }, {a}, kForward);
    const uint64_t key = ++seed;
    check_parity(
        [&](const std::vector<Tensor>& in) {
          Generator gen(key);
          return dropout(in[0], 0.3, gen, Mode::Train);
        },
        {a}, kExact);
  }
  check_parity(
      [](const std::vector<Tensor>& in) {
        return embedding(in[0], to(from_vector<int64_t>({3, 0, 3, 5, 3, 1}, {2, 3}), in[0].device()));
      },
      {bf16_input({6, 40}, ++seed)}, kForward);
  for (const Shape& s : {Shape{5, 7, 9}, Shape{2, 33, 64}, Shape{1, 130, 257}}) {
    INFO("matmul " << to_string(s));
    const Tensor x = bf16_input({s[0], s[1], s[2]}, ++seed), w = bf16_input({s[2], s[1]}, ++seed);
    check_parity([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }, {x, w}, kBackward);
    check_parity([](const std::vector<Tensor>& in) { return matmul(transpose(in[0], 1, 2), in[0]); }, {x}, kBackward);
  }
}

TEST_CASE("bfloat16: cross-entropy reads bfloat16 logits as float32 on both devices") {
  uint64_t seed = 150;
  for (int64_t n : parity_sizes()) {
    if (n == 0) continue;  // at least one class
    INFO("classes " << n);
    Generator gen(++seed);
    std::vector<int64_t> ids = randint(0, n, {33}, gen).to_vector<int64_t>();
    for (size_t r = 0; r < ids.size(); r += 7) ids[r] = -100;  // every 7th row ignored
    const Tensor targets = from_vector<int64_t>(ids, {33});
    check_parity([](const std::vector<Tensor>& in) { return cross_entropy(in[0], in[1], -100, 0.1); },
                 {bf16_input({33, n}, ++seed, -4, 4), targets}, kBackward);
  }
}

TEST_CASE("bfloat16: fused attention (the float32 kernels on widened copies) agrees with the CPU") {
  uint64_t seed = 200;
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const Tensor q = bf16_input({2, 3, 70, 32}, ++seed), k = bf16_input({2, 3, 70, 32}, ++seed),
                 v = bf16_input({2, 3, 70, 16}, ++seed);
    const Tensor lengths = from_vector<int64_t>({70, 33}, {2});
    check_parity(
        [&](const std::vector<Tensor>& in) {
          return fused_attention(in[0], in[1], in[2], causal ? Tensor() : to(lengths, in[0].device()), causal);
        },
        {q, k, v}, kBackward);
  }
}

TEST_CASE("bfloat16: a linear layer under autocast, float32 weights, agrees with the CPU") {
  uint64_t seed = 300;
  for (int64_t rows : {1, 33, 1000}) {
    INFO("rows " << rows);
    const Tensor x = input({rows, 48}, ++seed), w = input({24, 48}, ++seed), bias = input({24}, ++seed);
    check_parity(
        [](const std::vector<Tensor>& in) {
          const AutocastScope autocast;
          return softmax(linear(in[0], in[1], in[2]));  // bfloat16 product, float32 softmax
        },
        {x, w, bias}, kBackward);
  }
}
