// Fused attention (ops/attention.h) on the GPU, values and the gradients of q, k and v, against the
// CPU's fused op on the same inputs and against the unfused composition (`full:fused=0`) on the GPU:
// key padding with lengths 0, 1 and partial, causal masks, N and S not multiples of the kernels'
// tiles (64 queries × 64 keys in float32, 64 × 32 at head dims above 64, 16 × 16 in float64:
// ops/cuda/attention.cu), S ≠ N, head
// dims 16 … 128 with E ≠ M, float32 and float64, and N = 1000; each query's own key end
// (fused_attention_ends); keys picked by row (fused_attention_rows: gathered on the GPU); and the
// log-sum-exp as a second output (fused_attention_lse).
//
// The kernels keep tiles in shared memory; scripts/gpu-validate runs this file under racecheck
// (its cases but the N = 1000 one, whose tiles are those of the smaller cases, many times over)
// and under memcheck (all of it).
#include <algorithm>
#include <cmath>

#include "nn/attention/config.h"
#include "ops/attention.h"
#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::attention;
using namespace tapestry::testing;

namespace {

// float32: the CPU suite bounds the fused op's float32 result within 1e-5 + 1e-4·|x| of the float64
// composition at S = 200 ("fused attention in float32 agrees with the float64 composition"); each
// device is within that of the exact value, so the two within twice that. The sums of the kernels
// run over S keys (and N queries for dk, dv) whose rounding errors grow as √S: beyond 200 the bound
// grows by √(S / 200). float64: the same sums at 2^−53, a thousand-fold margin over their error.
Tolerance fused_tol(DType dtype, int64_t S) {
  if (dtype == DType::Float64) return {1e-11, 1e-10};
  const double grow = std::max(1.0, std::sqrt(static_cast<double>(S) / 200.0));
  return {2e-5 * grow, 2e-4 * grow};
}

struct Case {
  int64_t N, S, E, M;
};

// The key lengths of a batch of four on the device of `like`: all keys, two thirds, one, none.
Tensor key_lengths(int64_t S, const Tensor& like) {
  return from_vector<int64_t>({S, std::max<int64_t>(1, 2 * S / 3), std::min<int64_t>(1, S), 0}, {4}, like.device());
}

// The fused op on the GPU against the CPU's, and against the composition on the GPU.
void check_fused(const Case& c, DType dtype, bool padded, bool causal, uint64_t seed) {
  const int64_t B = padded ? 4 : 2, H = 2;
  INFO(dtype << " N " << c.N << " S " << c.S << " E " << c.E << " M " << c.M << (padded ? " padded" : "")
             << (causal ? " causal" : ""));
  const std::vector<Tensor> qkv{input({B, H, c.N, c.E}, seed, dtype, -2, 2),
                                input({B, H, c.S, c.E}, seed + 1, dtype, -2, 2),
                                input({B, H, c.S, c.M}, seed + 2, dtype)};
  const Tolerance t = fused_tol(dtype, std::max(c.N, c.S));
  auto lengths_for = [&](const Tensor& like) { return padded ? key_lengths(c.S, like) : Tensor(); };
  const Fn fused = [&](const std::vector<Tensor>& in) {
    return fused_attention(in[0], in[1], in[2], lengths_for(in[0]), causal);
  };
  {
    INFO("the fused op, the GPU against the CPU");
    check_parity(fused, qkv, t);
  }
  const AttentionConfig unfused = AttentionConfig::parse("full:fused=0");
  const Fn composed = [&](const std::vector<Tensor>& in) {
    Generator gen(0);
    return attend(unfused, in[0], in[1], in[2], {Tensor(), lengths_for(in[0])}, causal ? Causal::Yes : Causal::No, gen);
  };
  INFO("the fused op against the composition, both on the GPU");
  const std::vector<Tensor> here = on_device(qkv);
  const Tensor dy = to(uniform({B, H, c.N, c.M}, seed + 3), dtype);
  const ValueAndGradients a = run_backward(fused, here, to(dy, dut())), b = run_backward(composed, here, to(dy, dut()));
  {
    INFO("values");
    expect_close(a.value, b.value, t);
  }
  for (size_t i = 0; i < qkv.size(); ++i) {
    INFO("gradient of input " << i);
    expect_close(a.grads[i], b.grads[i], t);
  }
}

}  // namespace

TEST_CASE("fused attention: the GPU's against the CPU's and the composition (tiles, padding, causal)") {
  // N and S around and across the tiles: one query, a warp, a float32 tile and one (65), several
  // tiles; S ≠ N.
  uint64_t seed = 500;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Case c : {Case{1, 1, 32, 32}, Case{31, 31, 32, 32}, Case{33, 33, 32, 32}, Case{65, 65, 32, 32},
                         Case{130, 130, 32, 32}, Case{33, 70, 32, 32}, Case{130, 17, 32, 32}})
      for (bool padded : {false, true})
        for (bool causal : {false, true}) {
          if (causal && c.N != c.S) continue;
          check_fused(c, dtype, padded, causal, seed += 4);
        }
}

TEST_CASE("fused attention with each query's key end: the GPU's against the CPU's (tiles, ends in any order)") {
  // Ends 0, S and in between, in no order along the queries: no key tile may be skipped for a query
  // tile whose last query sees fewer keys than an earlier one.
  uint64_t seed = 560;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Case c : {Case{1, 1, 32, 32}, Case{65, 65, 32, 32}, Case{130, 70, 64, 16}, Case{33, 200, 128, 128}}) {
      INFO(dtype << " N " << c.N << " S " << c.S << " E " << c.E << " M " << c.M);
      std::vector<int64_t> ends;
      for (int64_t i = 0; i < 2 * c.N; ++i) ends.push_back(i % 3 == 0 ? c.S : i % 3 == 1 ? 0 : (i * 7919) % (c.S + 1));
      check_parity(
          [&](const std::vector<Tensor>& in) {
            return fused_attention_ends(in[0], in[1], in[2], from_vector<int64_t>(ends, {2, c.N}, in[0].device()));
          },
          {input({2, 2, c.N, c.E}, seed += 3, dtype, -2, 2), input({2, 2, c.S, c.E}, seed + 1, dtype, -2, 2),
           input({2, 2, c.S, c.M}, seed + 2, dtype)},
          fused_tol(dtype, c.S));
    }
}

TEST_CASE("fused attention over picked rows: the GPU's (rows gathered) against the CPU's (rows read in place)") {
  // Two query items per item of k and v, rows picked twice and never, S past the GPU's key tile.
  uint64_t seed = 590;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Case c : {Case{5, 7, 16, 16}, Case{70, 130, 64, 32}}) {
      INFO(dtype << " N " << c.N << " S " << c.S << " E " << c.E << " M " << c.M);
      const int64_t R = c.S / 2 + 3;
      std::vector<int64_t> rows, ends;
      for (int64_t i = 0; i < 4 * c.S; ++i) rows.push_back((i * 7919 + i / 3) % R);
      for (int64_t i = 0; i < 4 * c.N; ++i) ends.push_back(i % 3 == 0 ? c.S : i % 3 == 1 ? 0 : (i * 7919) % (c.S + 1));
      check_parity(
          [&](const std::vector<Tensor>& in) {
            const Device device = in[0].device();
            return fused_attention_rows(in[0], in[1], in[2], from_vector<int64_t>(rows, {4, c.S}, device),
                                        from_vector<int64_t>(ends, {4, c.N}, device));
          },
          {input({4, 2, c.N, c.E}, seed += 3, dtype, -2, 2), input({2, 2, R, c.E}, seed + 1, dtype, -2, 2),
           input({2, 2, R, c.M}, seed + 2, dtype)},
          fused_tol(dtype, c.S));
    }
}

TEST_CASE("fused attention with its log-sum-exp: the GPU's against the CPU's (values and gradients of both)") {
  // fused_attention_lse: the backward takes lse's gradient into the row term (D_i − dlse_i). Every
  // query sees a key (the CPU and the GPU give −∞ alike otherwise, which a difference cannot compare).
  uint64_t seed = 580;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Case c : {Case{33, 70, 32, 32}, Case{130, 130, 64, 16}})
      for (bool causal : {false, true}) {
        if (causal && c.N != c.S) continue;
        INFO(dtype << " N " << c.N << " S " << c.S << (causal ? " causal" : ""));
        check_parity(
            [&](const std::vector<Tensor>& in) {
              const Tensor lengths = from_vector<int64_t>({c.S, c.S / 2 + 1}, {2}, in[0].device());
              const AttentionWithLse r = fused_attention_lse(in[0], in[1], in[2], lengths, causal);
              return concat({r.out, unsqueeze(r.lse, 3)}, 3);
            },
            {input({2, 2, c.N, c.E}, seed += 3, dtype, -2, 2), input({2, 2, c.S, c.E}, seed + 1, dtype, -2, 2),
             input({2, 2, c.S, c.M}, seed + 2, dtype)},
            fused_tol(dtype, c.S));
      }
}

TEST_CASE("fused attention: empty shapes on the GPU (no queries, no keys, M = 0)") {
  // No keys: zeros and no gradient; no queries: dk and dv zero; M = 0: only lse is computed.
  uint64_t seed = 600;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Case c : {Case{0, 9, 8, 8}, Case{5, 0, 8, 8}, Case{9, 9, 8, 0}}) {
      INFO(dtype << " N " << c.N << " S " << c.S << " M " << c.M);
      check_parity([&](const std::vector<Tensor>& in) { return fused_attention(in[0], in[1], in[2]); },
                   {input({2, 2, c.N, c.E}, ++seed, dtype), input({2, 2, c.S, c.E}, ++seed, dtype),
                    input({2, 2, c.S, c.M}, ++seed, dtype)},
                   fused_tol(dtype, c.S));
    }
}

TEST_CASE("fused attention: a NaN score makes its query's output NaN on the GPU as on the CPU") {
  // Head 0: a NaN query (every score of its row NaN). Head 1: a NaN key in the last key tile, which
  // the causal mask shows to queries 75 … 79 alone. Head 2: a NaN first key, the only key the causal
  // query 0 sees. Every other output stays finite.
  const Shape shape{1, 3, 80, 8};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    std::vector<double> q = input(shape, 650, dtype).to_vector<double>();
    std::vector<double> k = input(shape, 651, dtype).to_vector<double>();
    q[3 * 8 + 2] = NAN;
    k[(80 + 75) * 8] = NAN;
    k[160 * 8 + 1] = NAN;
    const std::vector<Tensor> qkv{to(from_vector(q, shape), dtype), to(from_vector(k, shape), dtype),
                                  input({1, 3, 80, 4}, 652, dtype)};
    for (bool causal : {false, true}) {
      INFO("causal " << causal);
      check_values([&](const std::vector<Tensor>& in) { return fused_attention(in[0], in[1], in[2], {}, causal); },
                   qkv, fused_tol(dtype, 80));
    }
  }
}

TEST_CASE("fused attention: the GPU's against the CPU's and the composition (head dims 16 to 128, E != M)") {
  // The kernels take E and M in one width of 32, 64 or 128 (the smallest that holds both), zero-padded.
  uint64_t seed = 700;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const Case c : {Case{67, 67, 16, 16}, Case{67, 67, 64, 64}, Case{67, 67, 100, 100}, Case{67, 67, 128, 128},
                         Case{67, 67, 32, 100}, Case{67, 67, 128, 8}, Case{67, 67, 48, 64}})
      for (bool padded : {false, true})
        for (bool causal : {false, true}) check_fused(c, dtype, padded, causal, seed += 4);
}

TEST_CASE("fused attention: the GPU's against the CPU's and the composition at N = 1000") {
  uint64_t seed = 900;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (bool causal : {false, true}) check_fused(Case{1000, 1000, 64, 64}, dtype, true, causal, seed += 4);
}
