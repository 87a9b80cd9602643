// The attentions the papers compare against: oracle-top, shared-QK full attention, the causal form
// of improved clustered attention, routing attention, Reformer's LSH attention.
#include "tests/testing.h"

#include <cmath>
#include <numeric>

#include "nn/attention/clustered.h"
#include "nn/attention/config.h"
#include "nn/attention/full.h"
#include "nn/attention/reformer.h"
#include "nn/attention/routing.h"
#include "nn/multihead_attention.h"
#include "tests/attention_checks.h"

using namespace tapestry;
using namespace tapestry::attention;
using namespace tapestry::testing;

namespace {

// The (b, h) block of a (B, H, X, Y) tensor, row-major.
std::vector<double> block(const Tensor& t, int64_t b, int64_t h) { return select(select(t, 0, b), 0, h).to_vector<double>(); }

// Oracle-top by loops over one (batch, head): each query ranks the keys it may see (j < length, and
// j ≤ i when causal) by q·k, keeps the first `top`, and takes the softmax over them.
std::vector<double> naive_oracle_top(const std::vector<double>& q, const std::vector<double>& k,
                                     const std::vector<double>& v, int64_t N, int64_t S, int64_t E, int64_t M,
                                     int64_t length, bool causal, int64_t top) {
  std::vector<double> out(N * M, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    std::vector<double> score(S, 0.0);
    std::vector<int64_t> visible;
    for (int64_t j = 0; j < S; ++j) {
      if (j >= length || (causal && j > i)) continue;
      for (int64_t e = 0; e < E; ++e) score[j] += q[i * E + e] * k[j * E + e] / std::sqrt(double(E));
      visible.push_back(j);
    }
    std::sort(visible.begin(), visible.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    visible.resize(std::min<size_t>(visible.size(), top));
    double total = 0;
    for (int64_t j : visible) total += std::exp(score[j]);
    for (int64_t j : visible)
      for (int64_t m = 0; m < M; ++m) out[i * M + m] += std::exp(score[j]) / total * v[j * M + m];
  }
  return out;
}

const Tensor kKeyLengths = from_vector<int64_t>({7, 4}, {2});

}  // namespace

TEST_CASE("oracle-top equals loops that keep each query's top k keys (padding, causal)") {
  const int64_t B = 2, H = 2, N = 7, S = 7, E = 3, M = 2;
  const Tensor q = uniform({B, H, N, E}, 1, -2, 2), k = uniform({B, H, S, E}, 2, -2, 2), v = uniform({B, H, S, M}, 3);
  for (Causal causal : {Causal::No, Causal::Yes})
    for (int64_t top : {1, 3, 5}) {
      INFO("causal " << (causal == Causal::Yes) << " topk " << top);
      const Tensor out = oracle_top_attention(q, k, v, top, {Tensor(), kKeyLengths}, causal);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
          const std::vector<double> want = naive_oracle_top(block(q, b, h), block(k, b, h), block(v, b, h), N, S, E, M,
                                                            b == 0 ? 7 : 4, causal == Causal::Yes, top);
          check_close(from_vector(block(out, b, h), {N, M}), from_vector(want, {N, M}), 1e-12, 1e-12);
        }
    }
}

TEST_CASE("oracle-top against its dense composite: a masked softmax over all scores (values, gradients)") {
  const Tensor q = uniform({2, 2, 6, 3}, 4, -2, 2), k = uniform({2, 2, 9, 3}, 5, -2, 2), v = uniform({2, 2, 9, 4}, 6);
  const Padding padding{Tensor(), from_vector<int64_t>({9, 5}, {2})};
  const int64_t top = 3;
  auto dense = [&](const std::vector<Tensor>& in) {
    // keep the top 3 real keys of each row of the exact scores: a bool mask over (B, H, N, S)
    const Tensor real = reshape(valid_positions(padding.key_lengths, 2, 9, Device::cpu(), "test"), {2, 1, 1, 9});
    const Tensor scores = matmul(in[0] / std::sqrt(3.0), transpose(in[1], -1, -2));
    const Tensor ranked = masked_fill(scores.detach(), logical_not(real), -1e300);
    const Tensor chosen = topk(ranked, top, -1).indices;
    const Tensor in_top = gt(scatter_add(zeros(scores.shape(), {DType::Int64}), 3, chosen, ones(chosen.shape(), {DType::Int64})),
                             scalar(0, {DType::Int64}));
    return matmul(softmax(scores, logical_and(in_top, real)), in[2]);
  };
  check_same_function([&](const std::vector<Tensor>& in) { return oracle_top_attention(in[0], in[1], in[2], top, padding); },
                      dense, {q, k, v});
}

TEST_CASE("oracle-top with k = S is full attention (values and gradients; padding, causal)") {
  const Tensor q = uniform({2, 2, 6, 3}, 7), k = uniform({2, 2, 6, 3}, 8), v = uniform({2, 2, 6, 4}, 9);
  for (Causal causal : {Causal::No, Causal::Yes})
    for (const Tensor& lengths : {Tensor(), from_vector<int64_t>({6, 4}, {2})}) {
      const Padding padding{Tensor(), lengths};
      for (int64_t top : {6, 100}) {
        check_same_function([&](const std::vector<Tensor>& in) { return oracle_top_attention(in[0], in[1], in[2], top, padding, causal); },
                            [&](const std::vector<Tensor>& in) { return full_attention(in[0], in[1], in[2], padding, causal); },
                            {q, k, v});
      }
    }
}

TEST_CASE("oracle-top gradcheck (padding, causal)") {
  const Tensor q = uniform({2, 2, 5, 3}, 10), k = uniform({2, 2, 5, 3}, 11), v = uniform({2, 2, 5, 2}, 12);
  const Tensor lengths = from_vector<int64_t>({5, 3}, {2});
  for (Causal causal : {Causal::No, Causal::Yes})
    for (int64_t top : {1, 2, 4}) {
      check_gradients([&](const std::vector<Tensor>& in) {
        return oracle_top_attention(in[0], in[1], in[2], top, {Tensor(), lengths}, causal);
      }, {q, k, v});
    }
}

TEST_CASE("oracle-top causal: no output depends on a later position") {
  check_causal([](const Tensor& q, const Tensor& k, const Tensor& v) { return oracle_top_attention(q, k, v, 3, {}, Causal::Yes); },
               10, 3);
}

TEST_CASE("listed_keys_attention: a key listed twice counts twice; a row keeping nothing is zero") {
  const Tensor q = uniform({1, 1, 2, 3}, 13), k = uniform({1, 1, 4, 3}, 14), v = uniform({1, 1, 4, 2}, 15);
  const Tensor indices = from_vector<int64_t>({1, 1, 3, 0, 2, 3}, {1, 1, 2, 3});
  const Tensor keep = from_vector<bool>({true, true, true, false, false, false}, {1, 1, 2, 3});
  const Tensor out = listed_keys_attention(q, k, v, indices, keep);
  // query 0: weights ∝ e^{s1}, e^{s1}, e^{s3}
  const std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>(), vv = v.to_vector<double>();
  auto score = [&](int j) { double d = 0; for (int e = 0; e < 3; ++e) d += qv[e] * kv[j * 3 + e]; return std::exp(d / std::sqrt(3.0)); };
  const double total = 2 * score(1) + score(3);
  for (int m = 0; m < 2; ++m)
    CHECK(out.to_vector<double>()[m] == doctest::Approx((2 * score(1) * vv[2 + m] + score(3) * vv[6 + m]) / total).epsilon(1e-12));
  CHECK(block(out, 0, 0)[2] == 0.0);
  CHECK(block(out, 0, 0)[3] == 0.0);
  check_error([&] { listed_keys_attention(q, k, v, to(indices, DType::Int32), keep); }, {"listed_keys_attention", "indices", "int32"});
  check_error([&] { listed_keys_attention(q, k, v, indices, slice(keep, 3, 0, 2)); }, {"listed_keys_attention", "mask must be bool or float64", "(1, 1, 2, 3)"});
}

TEST_CASE("shared-QK full attention: keys are the unit-length query projection") {
  const Tensor q = uniform({2, 2, 5, 3}, 20, -2, 2), v = uniform({2, 2, 5, 4}, 21);
  Generator gen(0);
  const AttentionConfig shared = AttentionConfig::parse("full:shared-qk=1");
  const Tensor norms = sqrt(sum(q * q, {-1}, KeepDim::Yes));
  const Padding padding{Tensor(), from_vector<int64_t>({5, 3}, {2})};
  for (Causal causal : {Causal::No, Causal::Yes}) {
    check_close(attend(shared, q, q, v, padding, causal, gen), full_attention(q, q / norms, v, padding, causal), 1e-12,
                1e-12);
  }
  // every key has length 1, and a zero row stays zero (no NaN)
  check_close(sqrt(sum(unit_rows(q) * unit_rows(q), {-1})), ones({2, 2, 5}, {DType::Float64}), 1e-12, 1e-12);
  const Tensor zero_row = concat({zeros({1, 3}, {DType::Float64}), uniform({1, 3}, 22)}, 0);
  check_close(select(unit_rows(zero_row), 0, 0), zeros({3}, {DType::Float64}), 0.0, 0.0);
  check_gradients([](const std::vector<Tensor>& in) { return unit_rows(in[0]); }, {uniform({3, 4}, 23)});
  // every type that takes the flag attends over the unit keys
  for (const char* text : {"oracle-top:topk=2", "improved-clustered:clusters=2,topk=2", "clustered:clusters=2"}) {
    INFO(text);
    AttentionConfig config = AttentionConfig::parse(text);
    Generator g1(3), g2(3);
    const Tensor plain = attend(config, q, q / norms, v, {}, Causal::No, g1);
    config = config.with("shared-qk", 1);
    check_close(attend(config, q, q, v, {}, Causal::No, g2), plain, 1e-12, 1e-12);
  }
  check_gradients([&](const std::vector<Tensor>& in) { return attend(shared, in[0], in[0], in[1], {}, Causal::Yes, gen); },
                  {uniform({1, 2, 4, 3}, 24), uniform({1, 2, 4, 2}, 25)});
}

TEST_CASE("MultiheadAttention with shared QK keys by the query projection; k_proj gets no gradient") {
  Generator init(3);
  nn::MultiheadAttentionOptions options;
  options.d_model = 8;
  options.heads = 2;
  options.attention = AttentionConfig::parse("full:shared-qk=1");
  nn::MultiheadAttention mha(options, init);
  mha.to(DType::Float64);
  const Tensor x = uniform({2, 5, 8}, 30);
  Generator gen(0);
  const Tensor out = mha.forward(x, x, x, {}, Causal::Yes, gen);
  sum(out).backward();
  CHECK(mha.q_proj->weight.grad().defined());
  CHECK(!mha.k_proj->weight.grad().defined());
  NoGradGuard no_grad;  // nothing below is differentiated
  // the same layer by hand: q = x Wqᵀ + b, keys = q / ‖q‖ per head
  auto heads = [](const Tensor& t) { return permute(reshape(t, {2, 5, 2, 4}), {0, 2, 1, 3}); };
  const Tensor q = heads(mha.q_proj->forward(x)), v = heads(mha.v_proj->forward(x));
  const Tensor attended = full_attention(q, q / sqrt(sum(q * q, {-1}, KeepDim::Yes)), v, {}, Causal::Yes);
  check_close(out, mha.out_proj->forward(reshape(permute(attended, {0, 2, 1, 3}), {2, 5, 8})), 1e-12, 1e-12);
  // cross-attention: the memory is keyed by the query projection too
  const Tensor memory = uniform({2, 3, 8}, 31);
  const Tensor cross = mha.forward(x, memory, memory, {}, Causal::No, gen);
  auto mem_heads = [](const Tensor& t) { return permute(reshape(t, {2, 3, 2, 4}), {0, 2, 1, 3}); };
  const Tensor km = mem_heads(mha.q_proj->forward(memory));
  const Tensor want = full_attention(q, km / sqrt(sum(km * km, {-1}, KeepDim::Yes)), mem_heads(mha.v_proj->forward(memory)));
  check_close(cross, mha.out_proj->forward(reshape(permute(want, {0, 2, 1, 3}), {2, 5, 8})), 1e-12, 1e-12);
}

TEST_CASE("baseline attention config strings parse, print, round-trip and refuse bad settings") {
  CHECK(AttentionConfig::parse("full").to_string() == "full");
  CHECK(AttentionConfig::parse("full:shared-qk=0").to_string() == "full");
  CHECK(AttentionConfig::parse("full:shared-qk=1").to_string() == "full:shared-qk=1");
  CHECK(shares_qk(AttentionConfig::parse("full:shared-qk=1")));
  CHECK(!shares_qk(AttentionConfig::parse("full")));
  CHECK(AttentionConfig::parse("oracle-top").to_string() == "oracle-top:topk=32");
  CHECK(AttentionConfig::parse("oracle-top:topk=5").get("topk") == 5);
  for (const char* text : {"full:shared-qk=1", "oracle-top:topk=7"}) {
    const AttentionConfig parsed = AttentionConfig::parse(text);
    CHECK(AttentionConfig::parse(parsed.to_string()) == parsed);
  }
  CHECK(!(AttentionConfig::parse("full:shared-qk=1") == AttentionConfig::parse("full")));
  check_error([] { AttentionConfig::parse("full:shared-qk=2"); }, {"shared-qk must be in [0, 1]", "got 2"});
  check_error([] { AttentionConfig::parse("full:shared-qk=yes"); }, {"shared-qk must be a non-negative integer"});
  check_error([] { AttentionConfig::parse("oracle-top:topk=0"); }, {"topk must be in [1, 1048576]"});
  check_error([] { AttentionConfig::parse("oracle-top:clusters=3"); }, {"'clusters' is not a setting of oracle-top", "topk"});
  check_error([] { AttentionConfig::parse("neural-clustering:shared-qk=1"); },
              {"'shared-qk' is not a setting of neural-clustering"});
  check_error([] { AttentionConfig::parse("reformer:shared-qk=1"); }, {"'shared-qk' is not a setting of reformer"});
  for (const char* text : {"clustered:clusters=3,shared-qk=1", "improved-clustered:clusters=3,topk=4,shared-qk=1",
                           "oracle-top:topk=3,shared-qk=1", "routing:clusters=2,shared-qk=1"}) {
    const AttentionConfig parsed = AttentionConfig::parse(text);
    CHECK(shares_qk(parsed));
    CHECK(parsed.to_string().find(",shared-qk=1") != std::string::npos);
    CHECK(AttentionConfig::parse(parsed.to_string()) == parsed);
  }
  check_error([] { AttentionConfig::parse("oracle"); }, {"unknown attention type 'oracle'", "oracle-top"});
  const Tensor q = zeros({1, 2, 4, 3}, {DType::Float64}), k = zeros({1, 2, 5, 3}, {DType::Float64}),
               v = zeros({1, 2, 5, 2}, {DType::Float64});
  check_error([&] { oracle_top_attention(q, k, v, 0); }, {"oracle_top_attention", "topk must be at least 1"});
  check_error([&] { oracle_top_attention(q, k, v, 2, {}, Causal::Yes); }, {"oracle_top_attention", "N = 4, S = 5"});
  check_error([&] { oracle_top_attention(q, k, zeros({1, 2, 4, 2}, {DType::Float64}), 2); }, {"oracle_top_attention", "do not fit"});
  // a layer accepts oracle-top for causal self-attention
  nn::MultiheadAttention::check_attention("layer", AttentionConfig::parse("oracle-top:topk=4"), Causal::Yes);
}

// ---- causal improved-clustered ----

namespace {

// Causal improved-clustered by loops over one (batch, head), all keys real, given cluster ids.
std::vector<double> naive_causal_improved(const std::vector<double>& q, const std::vector<double>& k,
                                          const std::vector<double>& v, const std::vector<int64_t>& ids, int64_t N,
                                          int64_t E, int64_t M, int64_t top) {
  std::vector<double> out(N * M, 0.0);
  const double scale = 1.0 / std::sqrt(double(E));
  for (int64_t i = 0; i < N; ++i) {
    std::vector<double> centroid(E, 0.0);  // the mean of i's cluster over positions ≤ i
    int64_t members = 0;
    for (int64_t l = 0; l <= i; ++l)
      if (ids[l] == ids[i]) {
        ++members;
        for (int64_t e = 0; e < E; ++e) centroid[e] += q[l * E + e];
      }
    std::vector<double> a(i + 1), exact(i + 1);
    double total = 0;
    for (int64_t j = 0; j <= i; ++j) {
      double d = 0, x = 0;
      for (int64_t e = 0; e < E; ++e) {
        d += centroid[e] / double(members) * k[j * E + e] * scale;
        x += q[i * E + e] * k[j * E + e] * scale;
      }
      a[j] = std::exp(d);
      exact[j] = std::exp(x);
      total += a[j];
    }
    for (double& x : a) x /= total;
    std::vector<int64_t> order(i + 1);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return a[x] > a[y]; });
    order.resize(std::min<size_t>(order.size(), top));
    double mass = 0, exact_total = 0;
    for (int64_t j : order) mass += a[j], exact_total += exact[j];
    for (int64_t j = 0; j <= i; ++j) {
      const bool in_top = std::find(order.begin(), order.end(), j) != order.end();
      const double w = in_top ? mass * exact[j] / exact_total : a[j];
      for (int64_t m = 0; m < M; ++m) out[i * M + m] += w * v[j * M + m];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("causal improved-clustered equals loops (prefix centroids, per-query top keys)") {
  const int64_t N = 9, E = 3, M = 2;
  const Tensor q = uniform({1, 2, N, E}, 70, -2, 2), k = uniform({1, 2, N, E}, 71, -2, 2), v = uniform({1, 2, N, M}, 72);
  Generator gen(4);
  const QueryClusters clusters = cluster_queries_causal(q, Tensor(), {3, 16, 0}, gen);
  for (int64_t top : {1, 3, 20}) {
    const Tensor out = causal_improved_clustered_attention(q, k, v, clusters, top);
    for (int64_t h = 0; h < 2; ++h) {
      const std::vector<double> want = naive_causal_improved(block(q, 0, h), block(k, 0, h), block(v, 0, h),
                                                             select(select(clusters.ids, 0, 0), 0, h).to_vector<int64_t>(),
                                                             N, E, M, top);
      check_close(from_vector(block(out, 0, h), {N, M}), from_vector(want, {N, M}), 1e-12, 1e-10);
    }
  }
}

TEST_CASE("causal improved-clustered with k = S is causal full attention (values and gradients)") {
  const Tensor q = uniform({2, 2, 7, 3}, 73), k = uniform({2, 2, 7, 3}, 74), v = uniform({2, 2, 7, 4}, 75);
  Generator gen(5);
  const QueryClusters clusters = cluster_queries_causal(q, Tensor(), {2, 63, 0}, gen);
  for (const Tensor& lengths : {Tensor(), from_vector<int64_t>({7, 5}, {2})}) {
    const Padding padding{Tensor(), lengths};
    check_same_function(
        [&](const std::vector<Tensor>& in) { return causal_improved_clustered_attention(in[0], in[1], in[2], clusters, 7, padding); },
        [&](const std::vector<Tensor>& in) { return full_attention(in[0], in[1], in[2], padding, Causal::Yes); }, {q, k, v},
        1e-12, 1e-9);
  }
}

TEST_CASE("causal improved-clustered gradcheck (fixed clusters, key padding)") {
  const Tensor q = uniform({2, 2, 6, 3}, 76), k = uniform({2, 2, 6, 3}, 77), v = uniform({2, 2, 6, 2}, 78);
  Generator gen(6);
  const QueryClusters clusters = cluster_queries_causal(q, Tensor(), {2, 63, 0}, gen);
  const Padding padding{Tensor(), from_vector<int64_t>({6, 4}, {2})};
  for (int64_t top : {1, 3}) {
    check_gradients([&](const std::vector<Tensor>& in) {
      return causal_improved_clustered_attention(in[0], in[1], in[2], clusters, top, padding);
    }, {q, k, v});
  }
}

TEST_CASE("causal improved-clustered: no output depends on a later position (grouping included)") {
  for (int64_t top : {2, 32}) {
    const AttentionConfig config = AttentionConfig::parse("improved-clustered:clusters=3,bits=32,topk=" + std::to_string(top));
    check_causal([&](const Tensor& q, const Tensor& k, const Tensor& v) {
      Generator gen(11);
      return attend(config, q, k, v, {}, Causal::Yes, gen);
    }, 12, 4);
  }
}

TEST_CASE("cluster_queries_causal: a query's cluster depends on that query alone; padding gets C") {
  const Tensor q = uniform({2, 2, 8, 4}, 80);
  Generator a(7), b(7);
  const QueryClusters whole = cluster_queries_causal(q, from_vector<int64_t>({8, 5}, {2}), {4, 63, 10}, a);
  // the first three queries alone, in another batch: the same ids
  const QueryClusters prefix = cluster_queries_causal(slice(q, 2, 0, 3), Tensor(), {4, 63, 10}, b);
  CHECK(slice(whole.ids, 2, 0, 3).to_vector<int64_t>() == prefix.ids.to_vector<int64_t>());
  for (int64_t h = 0; h < 2; ++h) {
    const std::vector<int64_t> second = select(select(whole.ids, 0, 1), 0, h).to_vector<int64_t>();
    for (int64_t i = 0; i < 8; ++i) CHECK((second[i] == 4) == (i >= 5));
  }
  check_error([&] { cluster_queries_causal(q, Tensor(), {0, 63, 10}, a); }, {"cluster_queries_causal", "clusters"});
  check_error([&] { causal_improved_clustered_attention(q, slice(q, 2, 0, 5), slice(q, 2, 0, 5), whole, 2); },
              {"causal_improved_clustered_attention", "N = 8, S = 5"});
  check_error([&] { attend(AttentionConfig::parse("clustered"), q, q, q, {}, Causal::Yes, a); }, {"attend", "no causal form"});
}

// ---- routing ----

namespace {

// Routing attention by loops over one (batch, head): x̂ = x / ‖x‖ routes to argmax_c μ_c · x̂.
// Causal: query i sees keys j ≤ i of its centroid. Not causal: centroid c holds its w = ⌈S/C⌉
// nearest keys (by μ_c · k̂_j, among j < length), and query i sees its centroid's.
std::vector<double> naive_routing(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                                  const std::vector<double>& mu, int64_t N, int64_t S, int64_t E, int64_t M, int64_t C,
                                  int64_t length, bool causal) {
  auto affinity = [&](const std::vector<double>& x, int64_t row, int64_t c) {
    double dot = 0, norm = 0;
    for (int64_t e = 0; e < E; ++e) dot += mu[c * E + e] * x[row * E + e], norm += x[row * E + e] * x[row * E + e];
    return dot / std::sqrt(norm);
  };
  auto nearest = [&](const std::vector<double>& x, int64_t row) {
    int64_t best = 0;
    for (int64_t c = 1; c < C; ++c)
      if (affinity(x, row, c) > affinity(x, row, best)) best = c;
    return best;
  };
  const int64_t w = (S + C - 1) / C;
  std::vector<std::vector<int64_t>> members(C);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t j = 0; j < length; ++j) members[c].push_back(j);
    std::stable_sort(members[c].begin(), members[c].end(),
                     [&](int64_t a, int64_t b) { return affinity(k, a, c) > affinity(k, b, c); });
    members[c].resize(std::min<size_t>(members[c].size(), w));
  }
  std::vector<double> out(N * M, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    const int64_t c = nearest(q, i);
    std::vector<int64_t> keys;
    if (causal) {
      for (int64_t j = 0; j <= i && j < length; ++j)
        if (nearest(k, j) == c) keys.push_back(j);
    } else {
      keys = members[c];
    }
    double total = 0;
    std::vector<double> weight;
    for (int64_t j : keys) {
      double d = 0;
      for (int64_t e = 0; e < E; ++e) d += q[i * E + e] * k[j * E + e] / std::sqrt(double(E));
      weight.push_back(std::exp(d));
      total += weight.back();
    }
    for (size_t t = 0; t < keys.size(); ++t)
      for (int64_t m = 0; m < M; ++m) out[i * M + m] += weight[t] / total * v[keys[t] * M + m];
  }
  return out;
}

}  // namespace

TEST_CASE("routing attention equals loops (balanced top-w; causal nearest-centroid sets; key padding)") {
  const int64_t B = 2, H = 2, N = 9, E = 3, M = 2, C = 3;
  const Tensor q = uniform({B, H, N, E}, 90, -2, 2), k = uniform({B, H, N, E}, 91, -2, 2), v = uniform({B, H, N, M}, 92);
  Generator gen(1);
  const Tensor mu = to(initial_routing_centroids(H, C, E, gen), DType::Float64);
  const Tensor lengths = from_vector<int64_t>({9, 6}, {2});
  for (Causal causal : {Causal::No, Causal::Yes}) {
    INFO("causal " << (causal == Causal::Yes));
    const Tensor out = routing_attention(q, k, v, mu, {Tensor(), lengths}, causal);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const std::vector<double> want = naive_routing(block(q, b, h), block(k, b, h), block(v, b, h),
                                                       select(mu, 0, h).to_vector<double>(), N, N, E, M, C,
                                                       b == 0 ? 9 : 6, causal == Causal::Yes);
        check_close(from_vector(block(out, b, h), {N, M}), from_vector(want, {N, M}), 1e-12, 1e-12);
      }
  }
}

TEST_CASE("routing attention with one cluster is full attention (values and gradients; padding, causal)") {
  const Tensor q = uniform({2, 2, 6, 3}, 93), k = uniform({2, 2, 6, 3}, 94), v = uniform({2, 2, 6, 4}, 95);
  Generator gen(2);
  const Tensor mu = to(initial_routing_centroids(2, 1, 3, gen), DType::Float64);
  for (Causal causal : {Causal::No, Causal::Yes})
    for (const Tensor& lengths : {Tensor(), from_vector<int64_t>({6, 4}, {2})}) {
      const Padding padding{Tensor(), lengths};
      check_same_function([&](const std::vector<Tensor>& in) { return routing_attention(in[0], in[1], in[2], mu, padding, causal); },
                          [&](const std::vector<Tensor>& in) { return full_attention(in[0], in[1], in[2], padding, causal); },
                          {q, k, v});
    }
}

TEST_CASE("routing attention gradcheck (fixed centroids; padding, causal)") {
  const Tensor q = uniform({2, 2, 6, 3}, 96), k = uniform({2, 2, 6, 3}, 97), v = uniform({2, 2, 6, 2}, 98);
  Generator gen(3);
  const Tensor mu = to(initial_routing_centroids(2, 2, 3, gen), DType::Float64);
  const Padding padding{from_vector<int64_t>({6, 5}, {2}), from_vector<int64_t>({6, 4}, {2})};
  for (Causal causal : {Causal::No, Causal::Yes}) {
    check_gradients([&](const std::vector<Tensor>& in) { return routing_attention(in[0], in[1], in[2], mu, padding, causal); },
                    {q, k, v});
  }
}

TEST_CASE("routing attention causal: no output depends on a later position") {
  Generator gen(4);
  const Tensor mu = to(initial_routing_centroids(2, 3, 4, gen), DType::Float64);
  check_causal([&](const Tensor& q, const Tensor& k, const Tensor& v) { return routing_attention(q, k, v, mu, {}, Causal::Yes); },
               12, 4);
}

TEST_CASE("routing centroids: the moving average of their unit members, renormalised; empty ones stay") {
  const int64_t H = 2, C = 3, E = 4;
  const Tensor q = uniform({2, H, 5, E}, 100), k = uniform({2, H, 5, E}, 101);
  Generator gen(5);
  Tensor mu = to(initial_routing_centroids(H, C, E, gen), DType::Float64);
  const Padding padding{from_vector<int64_t>({5, 3}, {2}), from_vector<int64_t>({5, 2}, {2})};
  const Tensor updated = update_routing_centroids(q, k, mu, padding, 0.9);
  // by loops: members of each centroid among the real unit queries and keys
  const std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>(), m = mu.to_vector<double>();
  const std::vector<int64_t> qlen{5, 3}, klen{5, 2};
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> total(C * E, 0.0);
    std::vector<int64_t> count(C, 0);
    for (const auto& [x, len] : {std::pair{&qv, &qlen}, {&kv, &klen}})
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < (*len)[b]; ++i) {
          const double* row = &(*x)[((b * H + h) * 5 + i) * E];
          double norm = 0;
          for (int64_t e = 0; e < E; ++e) norm += row[e] * row[e];
          norm = std::sqrt(norm);
          int64_t best = 0;
          double best_dot = -1e300;
          for (int64_t c = 0; c < C; ++c) {
            double dot = 0;
            for (int64_t e = 0; e < E; ++e) dot += m[(h * C + c) * E + e] * row[e] / norm;
            if (dot > best_dot) best = c, best_dot = dot;
          }
          ++count[best];
          for (int64_t e = 0; e < E; ++e) total[best * E + e] += row[e] / norm;
        }
    for (int64_t c = 0; c < C; ++c) {
      std::vector<double> want(E);
      double norm = 0;
      for (int64_t e = 0; e < E; ++e) {
        want[e] = count[c] ? 0.9 * m[(h * C + c) * E + e] + 0.1 * total[c * E + e] / count[c] : m[(h * C + c) * E + e];
        norm += want[e] * want[e];
      }
      for (int64_t e = 0; e < E; ++e) want[e] /= count[c] ? std::sqrt(norm) : 1.0;
      check_close(select(select(updated, 0, h), 0, c), from_vector(want, {E}), 1e-12, 1e-12);
    }
  }
  // a fourth centroid opposite to every (positive) member: it gets none and keeps its value
  const Tensor far = concat({abs(mu), -ones({H, 1, E}, {DType::Float64})}, 1);
  const Tensor kept = update_routing_centroids(abs(q), abs(k), far, {}, 0.5);
  check_close(slice(kept, 1, 3, 4), slice(far, 1, 3, 4), 0.0, 0.0);
  CHECK(max(abs(slice(kept, 1, 0, 3) - slice(far, 1, 0, 3))).item<double>() > 0.0);
  check_error([&] { update_routing_centroids(q, k, mu, {}, 1.5); }, {"update_routing_centroids", "decay"});
}

TEST_CASE("MultiheadAttention keeps routing centroids as a saved buffer, moved in train mode only") {
  nn::MultiheadAttentionOptions options;
  options.d_model = 8;
  options.heads = 2;
  options.attention = AttentionConfig::parse("routing:clusters=3");
  Generator init(7);
  nn::MultiheadAttention mha(options, init);
  mha.to(DType::Float64);
  const Tensor start = clone(mha.attention_state().at("routing_centroids"));
  CHECK(start.shape() == Shape{2, 3, 4});
  CHECK(mha.state_dict().count("routing_centroids") == 1);
  for (const Tensor& p : mha.parameters()) CHECK(p.impl_ptr() != mha.attention_state().at("routing_centroids").impl_ptr());
  const Tensor x = uniform({2, 6, 8}, 110);
  Generator gen(0);
  mha.eval();
  {
    NoGradGuard no_grad;
    mha.forward(x, x, x, {}, Causal::Yes, gen);
  }
  check_close(mha.attention_state().at("routing_centroids"), start, 0.0, 0.0);
  mha.train();
  const Tensor out = mha.forward(x, x, x, {}, Causal::No, gen);
  sum(out).backward();  // the in-place update does not disturb the backward
  CHECK(max(abs(mha.attention_state().at("routing_centroids") - start)).item<double>() > 0.0);
  // a checkpoint round trip restores the centroids
  const nn::StateDict saved = mha.state_dict();
  std::map<std::string, Tensor> snapshot;
  for (const auto& [name, t] : saved) snapshot[name] = clone(t);
  NoGradGuard no_grad;  // the rest only runs forwards
  mha.forward(x, x, x, {}, Causal::No, gen);
  mha.load_state_dict(snapshot);
  check_close(mha.attention_state().at("routing_centroids"), snapshot.at("routing_centroids"), 0.0, 0.0);
  check_error([&] { mha.set_attention("routing:clusters=4"); }, {"MultiheadAttention", "keeps 'routing_centroids'", "routing:clusters=4"});
  // a layer built for full attention routes with unsaved centroids
  options.attention = AttentionConfig::parse("full");
  nn::MultiheadAttention plain(options, init);
  plain.set_attention("routing:clusters=4");
  CHECK(plain.attention_state().at("routing_centroids").shape() == Shape{2, 4, 4});
  CHECK(plain.state_dict().count("routing_centroids") == 0);
  CHECK(plain.forward(to(x, DType::Float32), to(x, DType::Float32), to(x, DType::Float32), {}, Causal::Yes, gen).shape() ==
        Shape{2, 6, 8});
}

TEST_CASE("routing config strings and bad input") {
  CHECK(AttentionConfig::parse("routing").to_string() == "routing:clusters=100");
  CHECK(AttentionConfig::parse("routing:clusters=4").get("clusters") == 4);
  check_error([] { AttentionConfig::parse("routing:topk=4"); }, {"'topk' is not a setting of routing", "clusters"});
  check_error([] { AttentionConfig::parse("routing:clusters=0"); }, {"clusters must be in [1, 65536]"});
  const Tensor q = zeros({1, 2, 4, 3}, {DType::Float64}), v = zeros({1, 2, 4, 2}, {DType::Float64});
  Generator gen(0);
  const Tensor mu = to(initial_routing_centroids(2, 2, 3, gen), DType::Float64);
  check_error([&] { attend(AttentionConfig::parse("routing"), q, q, v, {}, Causal::No, gen); }, {"attend", "routing_attention"});
  check_error([&] { routing_attention(q, q, v, slice(mu, 0, 0, 1)); }, {"routing_attention", "(H, C, E) = (2, C ≥ 1, 3)", "(1, 2, 3)"});
  check_error([&] { routing_attention(q, q, v, to(mu, DType::Float32)); }, {"routing_attention", "float64"});
  check_error([&] { routing_attention(q, slice(q, 2, 0, 3), slice(v, 2, 0, 3), mu, {}, Causal::Yes); }, {"routing_attention", "N = 4, S = 3"});
  check_error([&] { initial_routing_centroids(2, 0, 3, gen); }, {"initial_routing_centroids", "positive"});
}

// ---- reformer ----

namespace {

// Reformer by loops over every (batch, head), with rotations drawn from gen in the same order as
// reformer_attention draws them (one (E, b/2) matrix per round, shared by the batch and heads).
Tensor naive_reformer(const Tensor& q, const Tensor& k, const Tensor& v, int64_t rounds, int64_t W, Generator& gen,
                      const std::vector<int64_t>& lengths, bool causal) {
  const int64_t B = q.size(0), H = q.size(1), N = q.size(2), E = q.size(3), M = v.size(3);
  int64_t nb = (N + W - 1) / W;
  if (nb > 1 && nb % 2 == 1) ++nb;
  std::vector<std::vector<double>> rotations;
  for (int64_t r = 0; r < rounds; ++r)
    rotations.push_back(nb > 1 ? randn({E, nb / 2}, gen, {DType::Float64}).to_vector<double>() : std::vector<double>{});
  std::vector<double> out(B * H * N * M, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const std::vector<double> qb = block(q, b, h), kb = block(k, b, h), vb = block(v, b, h);
      const int64_t length = lengths[b];
      std::vector<std::vector<int64_t>> bucket(rounds, std::vector<int64_t>(N));
      std::vector<std::vector<int64_t>> candidates(N);  // per query, over all rounds
      for (int64_t r = 0; r < rounds; ++r) {
        for (int64_t i = 0; i < N; ++i) {
          if (i >= length) { bucket[r][i] = nb; continue; }
          if (nb == 1) { bucket[r][i] = 0; continue; }
          double best = -1e300;
          for (int64_t c = 0; c < nb; ++c) {
            double x = 0;
            for (int64_t e = 0; e < E; ++e) x += kb[i * E + e] * rotations[r][e * (nb / 2) + c % (nb / 2)];
            if (c >= nb / 2) x = -x;
            if (x > best) best = x, bucket[r][i] = c;
          }
        }
        std::vector<int64_t> order(N);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return bucket[r][x] < bucket[r][y]; });
        const int64_t chunks = (N + W - 1) / W;
        for (int64_t s = 0; s < N; ++s) {
          const int64_t i = order[s];
          std::vector<int64_t> slots;
          if (causal) {
            for (int64_t t = std::max<int64_t>(0, s - 2 * W + 1); t <= s; ++t) slots.push_back(t);
          } else {
            const int64_t c = s / W, previous = (c + chunks - 1) % chunks;
            for (int64_t t = 0; t < W; ++t) if (chunks > 1 && previous * W + t < N) slots.push_back(previous * W + t);
            for (int64_t t = 0; t < W; ++t) if (c * W + t < N) slots.push_back(c * W + t);
          }
          for (int64_t t : slots) {
            const int64_t j = order[t];
            if (bucket[r][j] == bucket[r][i] && j < length && (!causal || j <= i)) candidates[i].push_back(j);
          }
        }
      }
      for (int64_t i = 0; i < N; ++i) {
        std::vector<int64_t> keys;
        for (int64_t j : candidates[i]) if (j != i) keys.push_back(j);
        if (keys.empty()) keys = candidates[i];  // alone: only then to itself
        double total = 0;
        std::vector<double> weight;
        for (int64_t j : keys) {
          double d = 0, shared = 0;
          for (int64_t e = 0; e < E; ++e) d += qb[i * E + e] * kb[j * E + e] / std::sqrt(double(E));
          for (int64_t r = 0; r < rounds; ++r) shared += bucket[r][i] == bucket[r][j];
          weight.push_back(std::exp(d) / shared);
          total += weight.back();
        }
        for (size_t t = 0; t < keys.size(); ++t)
          for (int64_t m = 0; m < M; ++m) out[((b * H + h) * N + i) * M + m] += weight[t] / total * vb[keys[t] * M + m];
      }
    }
  return from_vector(out, {B, H, N, M});
}

}  // namespace

TEST_CASE("reformer attention equals loops (rounds, chunks, bucket mask, self mask, padding, causal)") {
  const int64_t N = 13, E = 4;
  const Tensor q = uniform({2, 2, N, E}, 120, -2, 2), k = unit_rows(q), v = uniform({2, 2, N, 3}, 121);
  const Tensor lengths = from_vector<int64_t>({13, 9}, {2});
  for (Causal causal : {Causal::No, Causal::Yes})
    for (const auto& [rounds, W] : {std::pair<int64_t, int64_t>{1, 4}, {3, 2}, {2, 3}, {1, 20}}) {
      INFO("causal " << (causal == Causal::Yes) << " rounds " << rounds << " bucket " << W);
      Generator a(9), b(9);
      const Tensor out = reformer_attention(q, k, v, {rounds, W}, a, {Tensor(), lengths}, causal);
      const Tensor want = naive_reformer(q, k, v, rounds, W, b, {13, 9}, causal == Causal::Yes);
      // padded queries' outputs are meaningless: compare the real ones
      check_close(slice(select(out, 0, 0), 1, 0, 13), slice(select(want, 0, 0), 1, 0, 13), 1e-12, 1e-10);
      check_close(slice(select(out, 0, 1), 1, 0, 9), slice(select(want, 0, 1), 1, 0, 9), 1e-12, 1e-10);
    }
}

TEST_CASE("reformer with one bucket, one round and no self mask is shared-QK full attention") {
  const Tensor q = uniform({2, 2, 7, 3}, 122), v = uniform({2, 2, 7, 4}, 123);
  const AttentionConfig shared = AttentionConfig::parse("full:shared-qk=1");
  for (Causal causal : {Causal::No, Causal::Yes})
    for (const Tensor& lengths : {Tensor(), from_vector<int64_t>({7, 5}, {2})}) {
      const Padding padding{lengths, lengths};
      // Padded queries' outputs are meaningless (Reformer puts them in a bucket of their own): both
      // sides keep the real queries' outputs only.
      const Tensor real = to(reshape(valid_positions(lengths, 2, 7, Device::cpu(), "test"), {2, 1, 7, 1}), DType::Float64);
      check_same_function(
          [&](const std::vector<Tensor>& in) {
            Generator gen(1);
            return reformer_attention(in[0], unit_rows(in[0]), in[1], {1, 7}, gen, padding, causal, SelfMask::No) * real;
          },
          [&](const std::vector<Tensor>& in) {
            Generator gen(1);
            return attend(shared, in[0], in[0], in[1], padding, causal, gen) * real;
          },
          {q, v});
    }
}

TEST_CASE("reformer gradcheck (rounds, padding, causal)") {
  const Tensor q = uniform({1, 2, 6, 3}, 124), v = uniform({1, 2, 6, 2}, 125);
  const Padding padding{Tensor(), from_vector<int64_t>({5}, {1})};
  for (Causal causal : {Causal::No, Causal::Yes}) {
    check_gradients([&](const std::vector<Tensor>& in) {
      Generator gen(2);
      return reformer_attention(in[0], unit_rows(in[0]), in[1], {2, 2}, gen, padding, causal);
    }, {q, v});
  }
}

TEST_CASE("reformer causal: no output depends on a later position (hashing and sorting included)") {
  for (const char* spec : {"reformer:rounds=1,bucket=2", "reformer:rounds=3,bucket=3"}) {
    INFO(spec);
    const AttentionConfig config = AttentionConfig::parse(spec);
    check_causal([&](const Tensor& q, const Tensor&, const Tensor& v) {
      Generator gen(3);
      return attend(config, q, q, v, {}, Causal::Yes, gen);
    }, 12, 4);
  }
}

TEST_CASE("padding: values at padded positions change no real output of oracle-top, causal improved-clustered, "
          "routing, reformer") {
  const int64_t B = 2, H = 2, N = 10, E = 4;
  const Tensor lengths = from_vector<int64_t>({10, 6}, {B});
  const Padding padding{lengths, lengths};
  const Tensor real = to(reshape(valid_positions(lengths, B, N, Device::cpu(), "test"), {B, 1, N, 1}), DType::Float64);
  const Tensor q = uniform({B, H, N, E}, 130), k = uniform({B, H, N, E}, 131), v = uniform({B, H, N, E}, 132);
  auto disturb = [&](const Tensor& t, uint64_t seed) { return t * real + uniform(t.shape(), seed, 5, 9) * (1.0 - real); };
  const Tensor q2 = disturb(q, 133), k2 = disturb(k, 134), v2 = disturb(v, 135);
  Generator init(1);
  const Tensor mu = to(initial_routing_centroids(H, 3, E, init), DType::Float64);
  for (Causal causal : {Causal::No, Causal::Yes}) {
    for (const char* spec : {"oracle-top:topk=3", "improved-clustered:clusters=3,topk=2", "reformer:rounds=2,bucket=2",
                             "full:shared-qk=1"}) {
      if (causal == Causal::No && std::string(spec).rfind("improved", 0) == 0) continue;  // the non-causal one: test_attention
      INFO(spec << " causal " << (causal == Causal::Yes));
      const AttentionConfig config = AttentionConfig::parse(spec);
      Generator g1(9), g2(9);
      check_close(attend(config, q, k, v, padding, causal, g1) * real, attend(config, q2, k2, v2, padding, causal, g2) * real,
                  1e-12, 1e-12);
    }
    INFO("routing causal " << (causal == Causal::Yes));
    check_close(routing_attention(q, k, v, mu, padding, causal) * real, routing_attention(q2, k2, v2, mu, padding, causal) * real,
                1e-12, 1e-12);
  }
}

TEST_CASE("reformer config strings and bad input") {
  CHECK(AttentionConfig::parse("reformer").to_string() == "reformer:rounds=4,bucket=32");
  const AttentionConfig c = AttentionConfig::parse("reformer:rounds=1,bucket=16");
  CHECK(c.get("rounds") == 1);
  CHECK(c.get("bucket") == 16);
  CHECK(AttentionConfig::parse(c.to_string()) == c);
  CHECK(shares_qk(c));
  check_error([] { AttentionConfig::parse("reformer:rounds=0"); }, {"rounds must be in [1, 64]", "got 0"});
  check_error([] { AttentionConfig::parse("reformer:rounds=65"); }, {"rounds must be in [1, 64]"});
  check_error([] { AttentionConfig::parse("reformer:bucket=0"); }, {"bucket must be in [1, 1048576]"});
  check_error([] { AttentionConfig::parse("reformer:clusters=4"); }, {"'clusters' is not a setting of reformer", "rounds, bucket"});
  const Tensor q = zeros({1, 2, 4, 3}, {DType::Float64}), v = zeros({1, 2, 4, 2}, {DType::Float64});
  Generator gen(0);
  check_error([&] { reformer_attention(q, q, v, {0, 2}, gen); }, {"reformer_attention", "rounds must be at least 1"});
  check_error([&] { reformer_attention(q, q, v, {1, 0}, gen); }, {"reformer_attention", "bucket must be at least 1"});
  check_error([&] { reformer_attention(q, slice(q, 2, 0, 3), slice(v, 2, 0, 3), {1, 2}, gen); },
              {"reformer_attention", "N = 4, S = 3"});
}
