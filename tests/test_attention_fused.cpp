// Fused attention (ops/attention.h): the same function as the composition of matmul, masked softmax
// and matmul, values and gradients, over masks, lengths 0 and 1, causal, N and S not multiples of the
// tiles and several head dims; gradcheck; the full kind's `fused` key; memory at N = 4096; keys picked
// by row (fused_attention_rows) against the rows gathered; bad input.
#include "tests/testing.h"

#include <cstring>

#include "core/cpu_capability.h"
#include "core/device.h"
#include "nn/attention/config.h"
#include "nn/attention/full.h"
#include "ops/attention.h"
#include "tests/attention_checks.h"

using namespace tapestry;
using namespace tapestry::attention;
using namespace tapestry::testing;

namespace {

Tensor fused(const std::vector<Tensor>& in, const Tensor& lengths, bool causal) {
  return fused_attention(in[0], in[1], in[2], lengths, causal);
}

Tensor composed(const std::vector<Tensor>& in, const Tensor& lengths, bool causal) {
  return full_attention(in[0], in[1], in[2], {Tensor(), lengths}, causal ? Causal::Yes : Causal::No, Fused::No);
}

// The composition softmax(q kᵀ / √E, keep) v with keep[b, :, i, j] = j < ends[b, i].
Tensor composed_ends(const std::vector<Tensor>& in, const Tensor& ends) {
  const int64_t S = in[1].size(2);
  const Tensor keep = unsqueeze(lt(arange(0, double(S)), unsqueeze(ends, 2)), 1);  // (B, 1, N, S)
  const Tensor scores = matmul(in[0], transpose(in[1], -1, -2)) * (1.0 / std::sqrt(double(in[0].size(3))));
  return matmul(softmax(scores, keep), in[2]);
}

}  // namespace

TEST_CASE("fused attention with each query's key end equals the composition, and lengths and causal as ends") {
  struct Case {
    int64_t B, H, N, S, E, M;
  };
  for (const Case c : {Case{2, 3, 5, 7, 4, 3}, Case{1, 2, 300, 700, 8, 16}, Case{2, 1, 1, 1, 2, 2}}) {
    INFO("B " << c.B << " H " << c.H << " N " << c.N << " S " << c.S);
    const Tensor q = uniform({c.B, c.H, c.N, c.E}, 21, -2, 2), k = uniform({c.B, c.H, c.S, c.E}, 22, -2, 2),
                 v = uniform({c.B, c.H, c.S, c.M}, 23);
    // Ends in any order over the rows, 0 (no key) and S (every key) among them.
    std::vector<int64_t> ends;
    for (int64_t i = 0; i < c.B * c.N; ++i) ends.push_back(i % 3 == 0 ? 0 : i % 3 == 1 ? c.S : (i * 7919) % (c.S + 1));
    const Tensor key_ends = from_vector<int64_t>(ends, {c.B, c.N});
    const auto fused_ends = [&](const std::vector<Tensor>& in) {
      return fused_attention_ends(in[0], in[1], in[2], key_ends);
    };
    check_same_function(fused_ends, [&](const std::vector<Tensor>& in) { return composed_ends(in, key_ends); },
                        {q, k, v}, 1e-12, 1e-10);
  }
  // Key lengths and the causal mask are ends of their own: min(length, i + 1).
  const Tensor q = uniform({2, 2, 140, 8}, 24), k = uniform({2, 2, 140, 8}, 25), v = uniform({2, 2, 140, 4}, 26);
  const Tensor lengths = from_vector<int64_t>({140, 57}, {2});
  std::vector<int64_t> ends;
  for (const int64_t length : {140, 57})
    for (int64_t i = 0; i < 140; ++i) ends.push_back(std::min<int64_t>(length, i + 1));
  const Tensor key_ends = from_vector<int64_t>(ends, {2, 140});
  const auto as_ends = [&](const std::vector<Tensor>& in) {
    return fused_attention_ends(in[0], in[1], in[2], key_ends);
  };
  check_same_function(as_ends, [&](const std::vector<Tensor>& in) { return fused(in, lengths, true); }, {q, k, v}, 0,
                      0);
  const Tensor small_ends = from_vector<int64_t>({0, 3, 6, 1, 6, 2}, {2, 3});
  check_gradients([&](const std::vector<Tensor>& in) { return fused_attention_ends(in[0], in[1], in[2], small_ends); },
                  {slice(q, 2, 0, 3), slice(k, 2, 0, 6), slice(v, 2, 0, 6)});
}

// The keys fused_attention_rows reads, gathered from primitives: item b's are rows[b] of k's item b / r.
Tensor gathered_rows(const Tensor& t, const Tensor& rows, int64_t r) {
  std::vector<Tensor> items;
  for (int64_t b = 0; b < rows.size(0); ++b) items.push_back(index_select(select(t, 0, b / r), 1, select(rows, 0, b)));
  return stack(items, 0);
}

TEST_CASE("fused attention over picked rows equals fused_attention_ends on the rows gathered") {
  struct Case {
    int64_t items, r, H, R, S, N, E, M;
    bool heads_in_rows;  // k and v as a permuted (items, R, H, F): neural clustering's layout
  };
  // One item per source and several; S past one key tile (512) and N past one query tile (128); rows
  // picked twice and never.
  for (const Case& c : {Case{1, 3, 2, 10, 7, 5, 4, 3, false}, Case{2, 2, 2, 700, 600, 150, 8, 16, true},
                       Case{3, 1, 1, 4, 9, 2, 2, 2, true}}) {
    INFO("items " << c.items << " r " << c.r << " R " << c.R << " S " << c.S << " N " << c.N);
    const int64_t B = c.items * c.r;
    const auto source = [&](int64_t F, uint64_t seed) {
      return c.heads_in_rows ? permute(uniform({c.items, c.R, c.H, F}, seed, -2, 2), {0, 2, 1, 3})
                             : uniform({c.items, c.H, c.R, F}, seed, -2, 2);
    };
    const Tensor q = uniform({B, c.H, c.N, c.E}, 31, -2, 2), k = source(c.E, 32), v = source(c.M, 33);
    std::vector<int64_t> rows, ends;
    for (int64_t i = 0; i < B * c.S; ++i) rows.push_back((i * 7919 + i / 3) % c.R);
    for (int64_t i = 0; i < B * c.N; ++i) ends.push_back(i % 3 == 0 ? 0 : i % 3 == 1 ? c.S : (i * 104729) % (c.S + 1));
    const Tensor key_rows = from_vector<int64_t>(rows, {B, c.S}), key_ends = from_vector<int64_t>(ends, {B, c.N});
    const auto picked = [&](const std::vector<Tensor>& in) {
      return fused_attention_rows(in[0], in[1], in[2], key_rows, key_ends);
    };
    const auto gathered = [&](const std::vector<Tensor>& in) {
      return fused_attention_ends(in[0], gathered_rows(in[1], key_rows, c.r), gathered_rows(in[2], key_rows, c.r),
                                  key_ends);
    };
    // The same values to the bit; a row's gradient sums its pickings in another grouping.
    check_same_function(picked, gathered, {q, k, v}, 0, 1e-12);
    const std::vector<Tensor> in32 = {to(q, DType::Float32), to(k, DType::Float32), to(v, DType::Float32)};
    CHECK(max(abs(picked(in32) - gathered(in32))).item<double>() == 0.0);
  }
  const Tensor q = uniform({2, 1, 3, 2}, 34), k = uniform({1, 1, 4, 2}, 35), v = uniform({1, 1, 4, 3}, 36);
  const Tensor key_rows = from_vector<int64_t>({3, 0, 3, 1, 2, 2, 0, 1}, {2, 4});
  const Tensor key_ends = from_vector<int64_t>({4, 1, 3, 0, 2, 4}, {2, 3});
  check_gradients([&](const std::vector<Tensor>& in) {
    return fused_attention_rows(in[0], in[1], in[2], key_rows, key_ends);
  }, {q, k, v});
}

TEST_CASE("fused attention equals the composition (values and gradients; padding, causal, head dims)") {
  // N and S straddle the CPU's tiles (128 queries × 512 keys): one tile, a partial one, several.
  struct Case {
    int64_t B, H, N, S, E, M;
  };
  for (const Case c : {Case{2, 3, 5, 5, 4, 3}, Case{1, 2, 130, 130, 32, 16}, Case{2, 1, 300, 700, 8, 64},
                       Case{1, 1, 129, 1100, 128, 8}, Case{3, 2, 1, 1, 2, 2}, Case{2, 2, 7, 1, 3, 5}}) {
    const Tensor q = uniform({c.B, c.H, c.N, c.E}, 1, -2, 2), k = uniform({c.B, c.H, c.S, c.E}, 2, -2, 2),
                 v = uniform({c.B, c.H, c.S, c.M}, 3);
    std::vector<int64_t> lengths;
    for (int64_t b = 0; b < c.B; ++b) lengths.push_back(std::max<int64_t>(0, c.S - b * (c.S / 2 + 1)));
    for (const Tensor& kl : {Tensor(), from_vector<int64_t>(lengths, {c.B})})
      for (bool causal : {false, true}) {
        if (causal && c.N != c.S) continue;
        INFO("B " << c.B << " H " << c.H << " N " << c.N << " S " << c.S << " E " << c.E << " M " << c.M
                  << (kl.defined() ? " padded" : "") << (causal ? " causal" : ""));
        check_same_function([&](const std::vector<Tensor>& in) { return fused(in, kl, causal); },
                            [&](const std::vector<Tensor>& in) { return composed(in, kl, causal); }, {q, k, v},
                            1e-12, 1e-10);
      }
  }
}

// fused_attention_lse's two outputs as one tensor (B, H, N, M + 1): out, then lse.
Tensor fused_with_lse(const std::vector<Tensor>& in, const Tensor& lengths, bool causal) {
  const AttentionWithLse r = fused_attention_lse(in[0], in[1], in[2], lengths, causal);
  return concat({r.out, unsqueeze(r.lse, 3)}, 3);
}

// The same by composition: lse_i = log Σ_j e^(s_ij) over the keys query i sees (j < length, j ≤ i if
// causal); every query must see one.
Tensor composed_with_lse(const std::vector<Tensor>& in, const Tensor& lengths, bool causal) {
  const int64_t B = in[0].size(0), N = in[0].size(2), S = in[1].size(2);
  const Tensor j = reshape(arange(0, double(S)), {1, 1, 1, S});
  Tensor keep = lt(j, reshape(lengths, {B, 1, 1, 1}));
  if (causal) keep = logical_and(keep, le(j, reshape(arange(0, double(N)), {1, 1, N, 1})));
  const Tensor scores = matmul(in[0], transpose(in[1], -1, -2)) * (1.0 / std::sqrt(double(in[0].size(3))));
  const Tensor lse = logsumexp(masked_fill(scores, logical_not(keep), -INFINITY), {3}, KeepDim::Yes);
  return concat({composed(in, lengths, causal), lse}, 3);
}

TEST_CASE("fused attention's log-sum-exp equals the composition's, and its gradient reaches q and k") {
  // With lse an output, the backward adds p_ij · dlse_i to each score's gradient (ops/attention.h).
  struct Case {
    int64_t B, H, N, S, E, M;
  };
  for (const Case c : {Case{2, 3, 5, 5, 4, 3}, Case{2, 2, 130, 700, 32, 16}, Case{2, 1, 300, 300, 8, 8}}) {
    const Tensor q = uniform({c.B, c.H, c.N, c.E}, 31, -2, 2), k = uniform({c.B, c.H, c.S, c.E}, 32, -2, 2),
                 v = uniform({c.B, c.H, c.S, c.M}, 33);
    const Tensor lengths = from_vector<int64_t>({c.S, std::max<int64_t>(1, c.S / 3)}, {2});
    for (bool causal : {false, true}) {
      if (causal && c.N != c.S) continue;
      INFO("N " << c.N << " S " << c.S << (causal ? " causal" : ""));
      check_same_function([&](const std::vector<Tensor>& in) { return fused_with_lse(in, lengths, causal); },
                          [&](const std::vector<Tensor>& in) { return composed_with_lse(in, lengths, causal); },
                          {q, k, v}, 1e-12, 1e-10);
      // Its out is fused_attention's, to the bit, and so are the gradients when lse gets none.
      check_same_function(
          [&](const std::vector<Tensor>& in) { return fused_attention_lse(in[0], in[1], in[2], lengths, causal).out; },
          [&](const std::vector<Tensor>& in) { return fused(in, lengths, causal); }, {q, k, v}, 0, 0);
    }
  }
  const Tensor q = uniform({2, 2, 4, 3}, 34), k = uniform({2, 2, 5, 3}, 35), v = uniform({2, 2, 5, 2}, 36);
  const Tensor lengths = from_vector<int64_t>({5, 2}, {2}), causal_lengths = from_vector<int64_t>({4, 2}, {2});
  check_gradients([&](const std::vector<Tensor>& in) { return fused_with_lse(in, lengths, false); }, {q, k, v});
  check_gradients([&](const std::vector<Tensor>& in) { return fused_with_lse(in, causal_lengths, true); },
                  {q, slice(k, 2, 0, 4), slice(v, 2, 0, 4)});
  // A query that sees no key: lse −∞, and no gradient from it.
  const Tensor none = from_vector<int64_t>({0, 5}, {2});
  const AttentionWithLse r = fused_attention_lse(q, k, v, none);
  CHECK(r.lse.dtype() == DType::Float64);
  for (double x : select(r.lse, 0, 0).to_vector<double>()) CHECK(x == -INFINITY);
  const std::vector<Tensor> grads = value_and_gradients(
      [&](const std::vector<Tensor>& in) {
        const AttentionWithLse t = fused_attention_lse(in[0], in[1], in[2], none);
        return t.out + unsqueeze(masked_fill(t.lse, eq(t.lse, full({}, -INFINITY, t.lse.options())), 0.0), 3);
      },
      {q, k, v});
  CHECK(max(abs(select(grads[1], 0, 0))).item<double>() == 0.0);  // dq of sample 0
  CHECK(max(abs(select(grads[1], 0, 1))).item<double>() > 0.0);
}

TEST_CASE("fused attention: a query that sees no key gives zeros and no gradient") {
  const Tensor q = uniform({2, 1, 4, 3}, 4), k = uniform({2, 1, 6, 3}, 5), v = uniform({2, 1, 6, 2}, 6);
  const Tensor lengths = from_vector<int64_t>({0, 6}, {2});
  const std::vector<Tensor> grads = value_and_gradients([&](const std::vector<Tensor>& in) { return fused(in, lengths, false); },
                                                        {q, k, v});
  CHECK(max(abs(select(grads[0], 0, 0))).item<double>() == 0.0);
  CHECK(max(abs(select(grads[1], 0, 0))).item<double>() == 0.0);  // dq of sample 0
  CHECK(max(abs(select(grads[0], 0, 1))).item<double>() > 0.0);   // sample 1 attends as usual
  // no keys at all: every output is zero
  const Tensor none = fused_attention(q, slice(k, 2, 0, 0), slice(v, 2, 0, 0));
  CHECK(none.shape() == Shape{2, 1, 4, 2});
  CHECK(max(abs(none)).item<double>() == 0.0);
  CHECK(fused_attention(slice(q, 2, 0, 0), k, v).shape() == Shape{2, 1, 0, 2});
}

TEST_CASE("fused attention gradcheck (padding, causal)") {
  const Tensor q = uniform({2, 2, 5, 3}, 7), k = uniform({2, 2, 5, 3}, 8), v = uniform({2, 2, 5, 2}, 9);
  const Tensor lengths = from_vector<int64_t>({5, 3}, {2});
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    check_gradients([&](const std::vector<Tensor>& in) { return fused(in, lengths, causal); }, {q, k, v});
  }
  check_causal([](const Tensor& q, const Tensor& k, const Tensor& v) { return fused_attention(q, k, v, {}, true); }, 7, 3);
}

TEST_CASE("fused attention in float32 agrees with the float64 composition") {
  const Tensor q = uniform({2, 2, 200, 16}, 10, -2, 2), k = uniform({2, 2, 200, 16}, 11, -2, 2),
               v = uniform({2, 2, 200, 16}, 12);
  const Tensor lengths = from_vector<int64_t>({200, 77}, {2});
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    const std::vector<Tensor> want = value_and_gradients(
        [&](const std::vector<Tensor>& in) { return composed(in, lengths, causal); }, {q, k, v});
    const std::vector<Tensor> got = value_and_gradients(
        [&](const std::vector<Tensor>& in) { return to(fused(in, lengths, causal), DType::Float64); },
        {to(q, DType::Float32), to(k, DType::Float32), to(v, DType::Float32)});
    for (size_t i = 0; i < want.size(); ++i) {
      INFO((i == 0 ? std::string("values") : "gradient " + std::to_string(i - 1)));
      CHECK(got[i].dtype() == (i == 0 ? DType::Float64 : DType::Float32));
      check_close(to(got[i], DType::Float64), want[i], 1e-5, 1e-4);
    }
  }
}

TEST_CASE("fused attention on the CPU reads strided q, k, v (heads split by a permute, keys shared) and writes so") {
  const int64_t B = 2, H = 3, N = 140, E = 8, M = 5;
  const Tensor lengths = from_vector<int64_t>({140, 90}, {2});
  // From (B, N, H·E) projections split into heads by a view, as MultiheadAttention does, and keys of
  // one head expanded over the heads (stride 0); `copied` takes contiguous copies of those views.
  const auto heads = [&](const std::vector<Tensor>& in, bool copied, bool causal) {
    const auto as_given = [&](const Tensor& t) { return copied ? contiguous(t) : t; };
    return fused({as_given(permute(reshape(in[0], {B, N, H, E}), {0, 2, 1, 3})), as_given(expand(in[1], {B, H, N, E})),
                  as_given(permute(reshape(in[2], {B, N, H, M}), {0, 2, 1, 3}))},
                 lengths, causal);
  };
  const std::vector<Tensor> inputs{uniform({B, N, H * E}, 27, -2, 2), uniform({B, 1, N, E}, 28, -2, 2),
                                   uniform({B, N, H * M}, 29)};
  for (bool causal : {false, true}) {
    INFO("causal " << causal);
    check_same_function([&](const std::vector<Tensor>& in) { return heads(in, false, causal); },
                        [&](const std::vector<Tensor>& in) { return heads(in, true, causal); }, inputs, 0, 0);
  }
  // The output takes q's layout of heads (and its gradients take q's, k's and v's, above, to the bit):
  // the heads' merge, a permute and a reshape to (B, N, H·M), is then a view, not a copy.
  const Tensor q = permute(reshape(inputs[0], {B, N, H, E}), {0, 2, 1, 3});
  const Tensor v = permute(reshape(inputs[2], {B, N, H, M}), {0, 2, 1, 3}), k = expand(inputs[1], {B, H, N, E});
  CHECK(permute(fused_attention(q, k, v, lengths), {0, 2, 1, 3}).is_contiguous());
  CHECK(fused_attention(contiguous(q), k, v, lengths).is_contiguous());
}

TEST_CASE("fused attention in float32 gives the same bits under AVX2 and AVX-512, and the baseline's within rounding") {
  // Its tiles' softmax and products are compiled for each capability (core/cpu_capability.h); the
  // baseline's products run on BLAS, in another order of summation (ops/tile_gemm.h). Two shapes: 300
  // queries in tiles of 128, and the speech recogniser's heads, 65 queries of 16 (AVX-512 interleaves
  // rows by four: 65 leaves one alone), a sample of no keys among them.
  struct Case {
    int64_t N, E, M;
    std::vector<int64_t> lengths;
  };
  for (const Case& x : {Case{300, 32, 24, {300, 41}}, Case{65, 16, 16, {65, 0, 30}}}) {
    const int64_t B = int64_t(x.lengths.size());
    const Tensor q = to(uniform({B, 2, x.N, x.E}, 13, -3, 3), DType::Float32),
                 k = to(uniform({B, 2, x.N, x.E}, 14, -3, 3), DType::Float32),
                 v = to(uniform({B, 2, x.N, x.M}, 15), DType::Float32);
    const Tensor lengths = from_vector<int64_t>(x.lengths, {B});
    for (bool causal : {false, true}) {
      const auto run = [&](CpuCapability capability) {
        CpuCapabilityScope scope(capability);
        return value_and_gradients(
            [&](const std::vector<Tensor>& in) { return to(fused(in, lengths, causal), DType::Float64); }, {q, k, v});
      };
      const std::vector<Tensor> baseline = run(CpuCapability::Baseline);
      std::vector<Tensor> avx2;
      for (const CpuCapability c : {CpuCapability::Avx2, CpuCapability::Avx512}) {
        if (c > cpu_capability_supported()) continue;
        const std::vector<Tensor> got = run(c);
        for (size_t i = 0; i < got.size(); ++i) {
          INFO("N = " << x.N << ", " << to_string(c) << (causal ? " causal" : "")
                      << (i == 0 ? " values" : " gradient ") << i);
          REQUIRE(got[i].shape() == baseline[i].shape());
          check_close(got[i], baseline[i], 1e-5, 1e-5);
          if (c == CpuCapability::Avx2) continue;
          if (avx2.empty()) continue;  // a CPU with AVX-512 has AVX2: compared when both ran
          const size_t bytes = size_t(got[i].numel()) * element_size(got[i].dtype());
          CHECK(std::memcmp(got[i].raw_data(), avx2[i].raw_data(), bytes) == 0);
        }
        if (c == CpuCapability::Avx2) avx2 = got;
      }
    }
  }
}

TEST_CASE("the full kind runs fused unless fused=0, and both give one function") {
  const AttentionConfig on = AttentionConfig::parse("full"), off = AttentionConfig::parse("full:fused=0");
  CHECK(on.get("fused") == 1);
  CHECK(on.to_string() == "full");  // a flag is printed when it is not its default
  CHECK(off.to_string() == "full:fused=0");
  CHECK(AttentionConfig::parse(off.to_string()) == off);
  CHECK(off.kind().score_elements(off, 1000) == 1e6);
  CHECK(on.kind().score_elements(on, 1000) == 1e3);
  const Tensor q = uniform({1, 2, 9, 4}, 13), k = uniform({1, 2, 9, 4}, 14), v = uniform({1, 2, 9, 4}, 15);
  Generator gen(0);
  check_close(attend(on, q, k, v, {}, Causal::Yes, gen), attend(off, q, k, v, {}, Causal::Yes, gen), 1e-12, 1e-10);
}

TEST_CASE("fused attention holds no N x N scores: its peak at N = 4096 is a small fraction of the composition's") {
  const int64_t B = 1, H = 2, N = 4096, E = 16;
  Generator gen(16);
  Tensor q = rand({B, H, N, E}, gen, {DType::Float32}), k = rand({B, H, N, E}, gen, {DType::Float32}),
         v = rand({B, H, N, E}, gen, {DType::Float32});
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  auto peak = [&](Fused form) {
    Allocator& alloc = context(Device::cpu()).allocator();
    const int64_t before = alloc.stats().in_use;
    alloc.reset_peak();
    sum(full_attention(q, k, v, {}, Causal::Yes, form)).backward();
    q.zero_grad(), k.zero_grad(), v.zero_grad();
    return alloc.stats().peak - before;
  };
  const int64_t unfused = peak(Fused::No), fused_peak = peak(Fused::Yes);
  INFO("peak bytes: composed " << unfused << ", fused " << fused_peak);
  CHECK(unfused >= 2 * H * N * N * 4);  // the scores and their softmax, at least
  CHECK(fused_peak * 20 < unfused);
}

TEST_CASE("fused attention refuses bad input") {
  const Tensor q = uniform({2, 1, 3, 4}, 17), k = uniform({2, 1, 5, 4}, 18), v = uniform({2, 1, 5, 2}, 19);
  check_error([&] { fused_attention(q, k, v, {}, true); }, {"fused_attention", "causal", "N = 3, S = 5"});
  check_error([&] { fused_attention(q, k, v, from_vector<int64_t>({5, 6}, {2})); },
              {"fused_attention", "key length of 6", "[0, 5]"});
  check_error([&] { fused_attention(q, k, v, from_vector<int64_t>({-1, 2}, {2})); }, {"key length of -1"});
  check_error([&] { fused_attention(q, k, v, from_vector<double>({1, 2}, {2})); }, {"int64 or int32", "float64"});
  check_error([&] { fused_attention(q, k, v, from_vector<int64_t>({1, 2, 3}, {3})); }, {"shape (2,)"});
  check_error([&] { fused_attention(q, k, slice(v, 2, 0, 4)); }, {"do not fit"});
  check_error([&] { fused_attention(q, to(k, DType::Float32), v); }, {"fused_attention"});
  check_error([&] { fused_attention(reshape(q, {2, 3, 4}), k, v); }, {"expected q (B, H, N, E)"});
  check_error([&] { fused_attention(slice(q, 3, 0, 0), slice(k, 3, 0, 0), v); }, {"head dimension E must be positive"});
  check_error([&] { fused_attention(to(q, DType::Int64), to(k, DType::Int64), to(v, DType::Int64)); },
              {"fused_attention"});
  check_error([] { AttentionConfig::parse("full:fused=2"); }, {"fused"});
  // each query's key end
  check_error([&] { fused_attention_ends(q, k, v, Tensor()); }, {"fused_attention_ends", "shape (2, 3)", "none"});
  check_error([&] { fused_attention_ends(q, k, v, from_vector<int64_t>({1, 2}, {2})); }, {"shape (2, 3)"});
  check_error([&] { fused_attention_ends(q, k, v, from_vector<int64_t>({0, 1, 2, 3, 4, 6}, {2, 3})); },
              {"key end of 6", "[0, 5]"});
  check_error([&] { fused_attention_ends(q, k, v, from_vector<int64_t>({0, 1, 2, 3, -1, 5}, {2, 3})); },
              {"key end of -1"});
  check_error([&] { fused_attention_ends(q, k, v, zeros({2, 3}, {DType::Float64})); }, {"int64 or int32", "float64"});
  // picked rows: k and v of one item for q's two
  const Tensor k1 = slice(k, 0, 0, 1), v1 = slice(v, 0, 0, 1), ends = from_vector<int64_t>({0, 1, 2, 2, 1, 0}, {2, 3});
  const Tensor rows = from_vector<int64_t>({0, 4, 1, 2}, {2, 2});
  CHECK(fused_attention_rows(q, k1, v1, rows, ends).shape() == Shape{2, 1, 3, 2});
  check_error([&] { fused_attention_rows(q, k1, v1, Tensor(), ends); }, {"fused_attention_rows", "key_rows", "none"});
  check_error([&] { fused_attention_rows(q, k1, v1, from_vector<int64_t>({0, 5, 1, 2}, {2, 2}), ends); },
              {"fused_attention_rows", "key row of 5", "[0, 5)"});
  check_error([&] { fused_attention_rows(q, k1, v1, from_vector<int64_t>({0, -1, 1, 2}, {2, 2}), ends); },
              {"key row of -1"});
  check_error([&] { fused_attention_rows(q, k1, v1, from_vector<int64_t>({0, 1}, {1, 2}), ends); }, {"shape (2, S)"});
  check_error([&] { fused_attention_rows(q, k1, v1, zeros({2, 2}, {DType::Float64}), ends); }, {"int64 or int32"});
  check_error([&] { fused_attention_rows(q, k1, v1, rows, from_vector<int64_t>({0, 1, 2, 3, 1, 0}, {2, 3})); },
              {"key end of 3", "[0, 2]"});
  check_error([&] { fused_attention_rows(q, concat({k, k1}, 0), concat({v, v1}, 0), rows, ends); },
              {"do not fit", "multiple"});
  check_error([&] { fused_attention_rows(q, k1, slice(v1, 2, 0, 4), rows, ends); }, {"do not fit"});
}
