#include "tests/testing.h"

#include <cmath>

#include "nn/attention/clustered.h"
#include "nn/attention/config.h"
#include "nn/attention/full.h"
#include "nn/attention/neural_clustering.h"
#include "ops/autocast.h"

using namespace tapestry;
using namespace tapestry::attention;
using namespace tapestry::testing;

namespace {

// softmax(q kᵀ/√E) v by loops over one (batch, head), keys ≥ length masked, keys > i masked if causal.
std::vector<double> naive_attention(const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v, int64_t N, int64_t S, int64_t E, int64_t M,
                                    int64_t length, bool causal) {
  std::vector<double> out(N * M, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    std::vector<double> w(S, 0.0);
    double top = -1e300, total = 0;
    for (int64_t j = 0; j < S; ++j) {
      if (j >= length || (causal && j > i)) continue;
      for (int64_t e = 0; e < E; ++e) w[j] += q[i * E + e] * k[j * E + e] / std::sqrt(double(E));
      top = std::max(top, w[j]);
    }
    for (int64_t j = 0; j < S; ++j) {
      w[j] = (j >= length || (causal && j > i)) ? 0.0 : std::exp(w[j] - top);
      total += w[j];
    }
    for (int64_t j = 0; j < S; ++j)
      for (int64_t m = 0; m < M; ++m) out[i * M + m] += w[j] / total * v[j * M + m];
  }
  return out;
}

// The (b, h) block of a (B, H, X, Y) tensor, row-major.
std::vector<double> block(const Tensor& t, int64_t b, int64_t h) { return select(select(t, 0, b), 0, h).to_vector<double>(); }

Tensor eye(int64_t n) {
  std::vector<double> values(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) values[i * n + i] = 1.0;
  return from_vector(values, {n, n});
}

const Tensor kLengths = from_vector<int64_t>({5, 3}, {2});

}  // namespace

TEST_CASE("full attention equals loops, with key padding and causal masks") {
  const int64_t B = 2, H = 2, N = 5, S = 5, E = 3, M = 4;
  const Tensor q = uniform({B, H, N, E}, 1, -2, 2), k = uniform({B, H, S, E}, 2, -2, 2), v = uniform({B, H, S, M}, 3);
  for (Causal causal : {Causal::No, Causal::Yes}) {
    const Tensor out = full_attention(q, k, v, {Tensor(), kLengths}, causal);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        const std::vector<double> want = naive_attention(block(q, b, h), block(k, b, h), block(v, b, h), N, S, E, M,
                                                         b == 0 ? 5 : 3, causal == Causal::Yes);
        check_close(from_vector(block(out, b, h), {N, M}), from_vector(want, {N, M}), 1e-12, 1e-12);
      }
  }
}

TEST_CASE("full attention gradcheck (padding, causal)") {
  const Tensor q = uniform({2, 2, 4, 3}, 4), k = uniform({2, 2, 4, 3}, 5), v = uniform({2, 2, 4, 2}, 6);
  const Tensor lengths = from_vector<int64_t>({4, 2}, {2});
  for (Causal causal : {Causal::No, Causal::Yes}) {
    check_gradients([&](const std::vector<Tensor>& in) { return full_attention(in[0], in[1], in[2], {Tensor(), lengths}, causal); },
                    {q, k, v});
  }
}

TEST_CASE("causal full attention: output t has exactly zero gradient from inputs after t") {
  const int64_t N = 6;
  Tensor q = uniform({1, 2, N, 3}, 7), k = uniform({1, 2, N, 3}, 8), v = uniform({1, 2, N, 2}, 9);
  for (Tensor* t : {&q, &k, &v}) t->set_requires_grad(true);
  for (int64_t t = 0; t < N; ++t) {
    for (Tensor* x : {&q, &k, &v}) x->zero_grad();
    const Tensor out = full_attention(q, k, v, {}, Causal::Yes);
    sum(select(out, 2, t)).backward();
    for (Tensor* x : {&q, &k, &v})
      for (int64_t later = t + 1; later < N; ++later)
        for (double g : select(x->grad(), 2, later).to_vector<double>()) CHECK(g == 0.0);
  }
}

TEST_CASE("improved-clustered with k = S is full attention (values and gradients)") {
  const Tensor q = uniform({2, 2, 6, 3}, 10), k = uniform({2, 2, 6, 3}, 11), v = uniform({2, 2, 6, 4}, 12);
  Generator gen(0);
  const QueryClusters clusters = cluster_queries(q, Tensor(), {3, 63, 5}, gen);
  for (const Tensor& lengths : {Tensor(), from_vector<int64_t>({6, 4}, {2})}) {
    const Padding padding{Tensor(), lengths};
    std::vector<Tensor> a = {q, k, v}, b = {q, k, v};
    for (auto* set : {&a, &b})
      for (Tensor& t : *set) t = clone(t).set_requires_grad(true);
    const Tensor improved = improved_clustered_attention(a[0], a[1], a[2], clusters, 6, padding);
    const Tensor full = full_attention(b[0], b[1], b[2], padding);
    check_close(improved, full, 1e-12, 1e-10);
    const Tensor w = uniform(full.shape(), 13);
    sum(improved * w).backward();
    sum(full * w).backward();
    for (int i = 0; i < 3; ++i) check_close(a[i].grad(), b[i].grad(), 1e-10, 1e-8);
  }
}

TEST_CASE("clustered attention with every query in its own cluster is full attention") {
  const Tensor q = uniform({2, 2, 5, 4}, 14), k = uniform({2, 2, 7, 4}, 15), v = uniform({2, 2, 7, 3}, 16);
  Generator gen(1);
  const QueryClusters clusters = cluster_queries(q, Tensor(), {5, 63, 10}, gen);
  // Precondition: the 63-bit hashes of 5 random queries differ, so each is its own centroid.
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h) {
      std::vector<int64_t> ids = select(select(clusters.ids, 0, b), 0, h).to_vector<int64_t>();
      std::sort(ids.begin(), ids.end());
      REQUIRE(ids == std::vector<int64_t>{0, 1, 2, 3, 4});
    }
  check_close(clustered_attention(q, k, v, clusters), full_attention(q, k, v), 1e-12, 1e-10);
}

TEST_CASE("Proposition 2: improved clustered is never further from full attention than clustered (L1)") {
  // With V = I the outputs are the attention rows themselves: A_i, A^c_i and A^t_i.
  const int64_t N = 16, S = 12;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    const Tensor q = uniform({1, 2, N, 4}, 100 + seed, -2, 2), k = uniform({1, 2, S, 4}, 200 + seed, -2, 2);
    const Tensor v = expand(reshape(eye(S), {1, 1, S, S}), {1, 2, S, S});
    Generator gen(seed);
    const QueryClusters clusters = cluster_queries(q, Tensor(), {3, 16, 5}, gen);
    const std::vector<double> full = full_attention(q, k, v).to_vector<double>();
    const std::vector<double> clustered = clustered_attention(q, k, v, clusters).to_vector<double>();
    const std::vector<double> improved = improved_clustered_attention(q, k, v, clusters, 4).to_vector<double>();
    for (int64_t row = 0; row < 2 * N; ++row) {
      double l1_c = 0, l1_t = 0, mass = 0;
      for (int64_t j = 0; j < S; ++j) {
        l1_c += std::abs(clustered[row * S + j] - full[row * S + j]);
        l1_t += std::abs(improved[row * S + j] - full[row * S + j]);
        mass += improved[row * S + j];
      }
      CHECK(mass == doctest::Approx(1.0).epsilon(1e-12));  // A^t is still a distribution
      CHECK(l1_t <= l1_c + 1e-12);
    }
  }
}

TEST_CASE("improved-clustered holds no C x S tensor for its backward") {
  // A^c V, the top keys and their weights come from fused attention with each centroid's log-sum-exp
  // (nn/attention/clustered.cpp): A^c (C × S) is never held. What is held: one copy of q, k and v
  // (N × E each, heads split by a permute as a layer's projections give them) and the exact part's
  // N × k dot products, softmax and weights, and the output. The bound allows half of A^c more than
  // those for the small per-cluster tensors (C × k, C × E): holding A^c itself would break it.
  const int64_t B = 1, H = 2, N = 2048, E = 16, C = 64, top = 32;
  Generator gen(21);
  Tensor x = rand({B, N, H, 3 * E}, gen, {DType::Float32});
  x.set_requires_grad(true);
  const Tensor qkv = permute(x, {0, 2, 1, 3});  // (B, H, N, 3E), not contiguous
  const Tensor q = slice(qkv, 3, 0, E), k = slice(qkv, 3, E, 2 * E), v = slice(qkv, 3, 2 * E, 3 * E);
  const QueryClusters clusters = cluster_queries(q, Tensor(), {C, 63, 5}, gen);
  Allocator& alloc = context(Device::cpu()).allocator();
  alloc.empty_cache();
  const int64_t before = alloc.stats().in_use;
  const Tensor out = improved_clustered_attention(q, k, v, clusters, top, {});
  const int64_t held = alloc.stats().in_use - before, weights = B * H * C * N * 4;  // A^c in float32
  const int64_t inputs = 3 * B * H * N * E * 4, exact = 3 * B * H * N * top * 4, output = B * H * N * E * 4;
  INFO("held for the backward " << held << " bytes; q, k, v " << inputs << ", the exact part " << exact
                                << ", the output " << output << ", A^c " << weights);
  CHECK(held < inputs + exact + output + weights / 2);
  sum(out).backward();  // and the backward runs from what is held
  CHECK(x.grad().defined());
}

TEST_CASE("improved-clustered under autocast holds what it holds in float32: one float32 copy of q, k, v") {
  // Its internals compute in float32 (ops/autocast.h); bfloat16 q, k and v are widened once, not by
  // each op that reads them (each of which then held a float32 copy of its own, beside bfloat16 copies).
  const int64_t B = 1, H = 2, N = 1024, E = 16, C = 32;
  Generator gen(22);
  const Tensor x = rand({B, N, H, 3 * E}, gen, {DType::Float32});
  const QueryClusters clusters =
      cluster_queries(slice(permute(x, {0, 2, 1, 3}), 3, 0, E), Tensor(), {C, 63, 5}, gen);
  Allocator& alloc = context(Device::cpu()).allocator();
  std::vector<int64_t> held;
  for (const DType dtype : {DType::Float32, DType::BFloat16}) {
    Tensor input = to(x, dtype).detach();  // a leaf of its own
    input.set_requires_grad(true);
    const AutocastScope autocast(dtype == DType::BFloat16);
    const Tensor qkv = permute(input, {0, 2, 1, 3});
    alloc.empty_cache();
    const int64_t before = alloc.stats().in_use;
    const Tensor out = improved_clustered_attention(slice(qkv, 3, 0, E), slice(qkv, 3, E, 2 * E),
                                                    slice(qkv, 3, 2 * E, 3 * E), clusters, 16, {});
    held.push_back(alloc.stats().in_use - before);
    CHECK(out.dtype() == DType::Float32);
    sum(out).backward();
    CHECK(input.grad().dtype() == dtype);
  }
  INFO("held for the backward: float32 " << held[0] << " bytes, bfloat16 under autocast " << held[1]);
  CHECK(held[1] <= held[0]);
}

TEST_CASE("clustered and improved-clustered gradcheck (q, k, v; fixed clusters)") {
  const Tensor q = uniform({2, 2, 6, 3}, 20), k = uniform({2, 2, 5, 3}, 21), v = uniform({2, 2, 5, 2}, 22);
  const Tensor q_lengths = from_vector<int64_t>({6, 4}, {2}), k_lengths = from_vector<int64_t>({5, 3}, {2});
  Generator gen(2);
  const QueryClusters clusters = cluster_queries(q, q_lengths, {3, 63, 10}, gen);
  const Padding padding{q_lengths, k_lengths};
  check_gradients([&](const std::vector<Tensor>& in) { return clustered_attention(in[0], in[1], in[2], clusters, padding); },
                  {q, k, v});
  for (int64_t topk : {1, 2, 4}) {
    check_gradients(
        [&](const std::vector<Tensor>& in) { return improved_clustered_attention(in[0], in[1], in[2], clusters, topk, padding); },
        {q, k, v});
  }
}

TEST_CASE("clustered attention: gradient of q is the centroid's gradient shared by its members") {
  Tensor q = uniform({1, 1, 6, 2}, 30);
  q.set_requires_grad(true);
  const Tensor k = uniform({1, 1, 4, 2}, 31), v = uniform({1, 1, 4, 3}, 32);
  const QueryClusters clusters{from_vector<int64_t>({0, 1, 0, 0, 1, 2}, {1, 1, 6}), 3};
  const Tensor w = uniform({1, 1, 6, 3}, 33);
  sum(clustered_attention(q, k, v, clusters) * w).backward();
  const std::vector<double> g = q.grad().to_vector<double>();
  // members of one cluster get the same gradient: dq_i = dQ^c_j / |cluster j|
  for (int e = 0; e < 2; ++e) {
    CHECK(g[0 * 2 + e] == doctest::Approx(g[2 * 2 + e]).epsilon(1e-12));
    CHECK(g[0 * 2 + e] == doctest::Approx(g[3 * 2 + e]).epsilon(1e-12));
    CHECK(g[1 * 2 + e] == doctest::Approx(g[4 * 2 + e]).epsilon(1e-12));
  }
}

TEST_CASE("padding: values at padded positions change no real output, for every attention") {
  const int64_t B = 2, H = 2, N = 8, E = 4;
  const Tensor lengths = from_vector<int64_t>({8, 5}, {B});
  const Padding padding{lengths, lengths};
  const Tensor real = to(reshape(attention::valid_positions(lengths, B, N, Device::cpu(), "test"), {B, 1, N, 1}), DType::Float64);
  const Tensor q = uniform({B, H, N, E}, 40), k = uniform({B, H, N, E}, 41), v = uniform({B, H, N, E}, 42);
  // The same tensors with other values at the padded positions.
  auto disturb = [&](const Tensor& t, uint64_t seed) { return t * real + uniform(t.shape(), seed, 5, 9) * (1.0 - real); };
  const Tensor q2 = disturb(q, 43), k2 = disturb(k, 44), v2 = disturb(v, 45);
  for (const char* spec : {"full", "clustered:clusters=3,bits=32,iterations=5", "improved-clustered:clusters=3,topk=3"}) {
    INFO(spec);
    const AttentionConfig config = AttentionConfig::parse(spec);
    Generator g1(9), g2(9);
    const Tensor a = attend(config, q, k, v, padding, Causal::No, g1) * real;
    const Tensor b = attend(config, q2, k2, v2, padding, Causal::No, g2) * real;
    check_close(a, b, 1e-12, 1e-12);
  }
}

TEST_CASE("cluster_queries: deterministic, padding excluded, C = 1 and C > N defined") {
  const Tensor q = uniform({2, 3, 9, 4}, 50);
  const Tensor lengths = from_vector<int64_t>({9, 4}, {2});
  Generator a(5), b(5), c(6);
  const QueryClusters x = cluster_queries(q, lengths, {3, 63, 10}, a);
  CHECK(x.ids.to_vector<int64_t>() == cluster_queries(q, lengths, {3, 63, 10}, b).ids.to_vector<int64_t>());
  CHECK(x.ids.to_vector<int64_t>() != cluster_queries(q, lengths, {3, 63, 10}, c).ids.to_vector<int64_t>());
  for (int64_t h = 0; h < 3; ++h) {
    const std::vector<int64_t> second = select(select(x.ids, 0, 1), 0, h).to_vector<int64_t>();
    for (int64_t i = 0; i < 9; ++i) CHECK((second[i] == 3) == (i >= 4));  // padded queries: cluster C
  }
  // C = 1: every real query shares one centroid, the mean of the real queries.
  Generator d(7);
  const QueryClusters one = cluster_queries(q, lengths, {1, 63, 10}, d);
  const Tensor k = uniform({2, 3, 6, 4}, 51), v = uniform({2, 3, 6, 2}, 52);
  const Tensor out = clustered_attention(q, k, v, one, {lengths, Tensor()});
  const Tensor mean_q = mean(slice(select(q, 0, 1), 1, 0, 4), {1}, KeepDim::Yes);  // (H, 1, E)
  const Tensor want = full_attention(unsqueeze(mean_q, 0), slice(k, 0, 1, 2), slice(v, 0, 1, 2));
  check_close(slice(slice(out, 0, 1, 2), 2, 0, 1), want, 1e-12, 1e-10);
  // C > N: the extra clusters stay empty and the result is still finite.
  Generator e(8);
  const QueryClusters many = cluster_queries(q, lengths, {20, 63, 10}, e);
  for (double value : improved_clustered_attention(q, k, v, many, 3, {lengths, Tensor()}).to_vector<double>())
    CHECK(std::isfinite(value));
}

TEST_CASE("attention config strings parse, print and round-trip") {
  const AttentionConfig c = AttentionConfig::parse("improved-clustered:clusters=15,topk=32");
  CHECK(c.name() == "improved-clustered");
  CHECK(&c.kind() == &AttentionConfig::parse("improved-clustered").kind());
  CHECK(c.get("clusters") == 15);
  CHECK(c.get("topk") == 32);
  CHECK(c.get("bits") == 63);
  CHECK(c.to_string() == "improved-clustered:clusters=15,bits=63,iterations=10,topk=32");
  for (const char* text : {"full", "clustered:clusters=7,bits=20,iterations=3", "neural-clustering:clusters=4"}) {
    const AttentionConfig parsed = AttentionConfig::parse(text);
    CHECK(AttentionConfig::parse(parsed.to_string()) == parsed);
  }
  CHECK(AttentionConfig::parse("full").to_string() == "full");
  // neural-clustering: the loss form is a named value, cosine unless given, and k defaults to the
  // paper's 3; a text from before either existed reads as it meant then (with_legacy_defaults, what
  // old checkpoints' settings pass through).
  const AttentionConfig nc = AttentionConfig::parse("neural-clustering");
  CHECK(ClusteringLosses(nc.get("losses")) == ClusteringLosses::Cosine);
  CHECK(nc.get("clusters") == 3);
  CHECK(nc.to_string() == "neural-clustering:clusters=3,losses=cosine");
  CHECK(AttentionConfig::parse("clustered").get("clusters") == 100);
  for (const char* form : {"projected", "printed", "cosine"}) {
    const AttentionConfig c = AttentionConfig::parse(std::string("neural-clustering:clusters=8,losses=") + form);
    CHECK(losses_name(ClusteringLosses(c.get("losses"))) == std::string(form));
    CHECK(c.to_string() == std::string("neural-clustering:clusters=8,losses=") + form);
    CHECK(AttentionConfig::parse(c.to_string()) == c);
  }
  check_error([] { AttentionConfig::parse("neural-clustering:losses=l2"); },
              {"losses must be one of projected, printed, cosine", "'l2'"});
  check_error([] { AttentionConfig::parse("neural-clustering:losses=1"); }, {"losses must be one of"});
  check_error([] { AttentionConfig::parse("clustered:losses=cosine"); }, {"'losses' is not a setting of clustered"});
  CHECK(with_legacy_defaults("neural-clustering:clusters=8") == "neural-clustering:clusters=8,losses=projected");
  CHECK(with_legacy_defaults("neural-clustering") == "neural-clustering:clusters=100,losses=projected");
  CHECK(with_legacy_defaults("neural-clustering:losses=cosine") == "neural-clustering:losses=cosine,clusters=100");
  CHECK(AttentionConfig::parse(with_legacy_defaults("neural-clustering")) ==
        AttentionConfig::parse("neural-clustering:clusters=100,losses=projected"));
  for (const char* unchanged : {"neural-clustering:clusters=2,losses=cosine", "full", "clustered:clusters=3", "", "::"})
    CHECK(with_legacy_defaults(unchanged) == unchanged);
  check_error([] { AttentionConfig::parse("sparse"); }, {"unknown attention type 'sparse'", "improved-clustered"});
  check_error([] { AttentionConfig::parse("full:clusters=3"); }, {"'clusters' is not a setting of full"});
  check_error([] { AttentionConfig::parse("clustered:topk=3"); }, {"'topk' is not a setting of clustered"});
  check_error([] { AttentionConfig::parse("clustered:clusters=0"); }, {"clusters must be in [1, 65536]", "got 0"});
  check_error([] { AttentionConfig::parse("clustered:bits=64"); }, {"bits must be in [1, 63]"});
  check_error([] { AttentionConfig::parse("improved-clustered:topk=0"); }, {"topk must be in [1, 1048576]"});
  // Upper bounds: iterations=999999999 used to run Lloyd iterations for hours.
  check_error([] { AttentionConfig::parse("clustered:iterations=999999999"); }, {"iterations must be in [0, 1000]"});
  check_error([] { AttentionConfig::parse("clustered:clusters=65537"); }, {"clusters must be in [1, 65536]", "65537"});
  check_error([] { AttentionConfig::parse("improved-clustered:topk=1048577"); }, {"topk must be in [1, 1048576]"});
  check_error([] { AttentionConfig::parse("clustered:clusters=99999999999"); },
              {"clusters must be in [1, 65536]", "got 99999999999"});
  for (const char* text : {"clustered:clusters= 5", "clustered:clusters=0x10", "clustered:clusters=inf"}) {
    CAPTURE(text);
    check_error([&] { AttentionConfig::parse(text); }, {"clusters must be a non-negative integer"});
  }
  CHECK(AttentionConfig::parse("clustered:clusters=65536,iterations=1000,bits=1").get("iterations") == 1000);
  CHECK(AttentionConfig::parse("clustered:iterations=0").get("iterations") == 0);
  check_error([] { AttentionConfig::parse("clustered:clusters=x"); }, {"clusters must be a non-negative integer"});
  check_error([] { AttentionConfig::parse("clustered:clusters"); }, {"expected key=value"});
  check_error([] { AttentionConfig::parse("clustered:clusters=2,clusters=3"); }, {"given twice"});
  // with() sets one setting, range-checked; get() refuses a setting the kind lacks.
  CHECK(AttentionConfig::parse("routing").with("clusters", 7) == AttentionConfig::parse("routing:clusters=7"));
  check_error([] { AttentionConfig::parse("routing").with("clusters", 0); }, {"clusters must be in [1, 65536]"});
  check_error([] { AttentionConfig::parse("full").get("clusters"); }, {"full attention has no setting 'clusters'"});
  CHECK(AttentionConfig() == AttentionConfig::parse("full"));
}

TEST_CASE("attention kinds: every kind parses with its defaults, round-trips, and names its settings in --help") {
  const std::string help = kinds_help();
  for (const Kind* kind : kinds()) {
    INFO(kind->name());
    const AttentionConfig c = AttentionConfig::parse(kind->name());
    CHECK(&c.kind() == kind);
    CHECK(AttentionConfig::parse(c.to_string()) == c);
    CHECK(help.find(kind->name()) != std::string::npos);
    for (const Setting& s : kind->settings()) {
      CHECK(c.get(s.key) == s.fallback);
      CHECK(help.find(s.key + "=") != std::string::npos);
    }
    CHECK(c.kind().score_elements(c, 64) > 0);
  }
  const std::string described = describe_kinds();
  for (const Kind* kind : kinds()) {
    CHECK(described.find(kind->name() + ": " + kind->summary()) != std::string::npos);
    for (const Setting& s : kind->settings()) CHECK(described.find(s.help) != std::string::npos);
  }
  CHECK(described.find("  window=32  ([0, 1048576]) W, keys on each side") != std::string::npos);
  CHECK(described.find("  losses=cosine  (projected, printed, cosine)") != std::string::npos);
  CHECK(kind_names([](const Kind& k) { return !k.has_causal_form(); }) == "clustered");
  CHECK(kind_names([](const Kind& k) { return k.form() == Form::HiddenStates; }) == "neural-clustering");
}

TEST_CASE("attention refuses bad input") {
  const Tensor q = zeros({1, 2, 4, 3}, {DType::Float64}), k = zeros({1, 2, 5, 3}, {DType::Float64}),
               v = zeros({1, 2, 5, 2}, {DType::Float64});
  check_error([&] { full_attention(q, zeros({1, 2, 5, 4}, {DType::Float64}), v); }, {"full_attention", "(1, 2, 5, 4)"});
  check_error([&] { full_attention(q, k, zeros({1, 2, 4, 2}, {DType::Float64})); }, {"full_attention", "do not fit"});
  check_error([&] { full_attention(q, to(k, DType::Float32), v); }, {"full_attention", "dtype"});
  check_error([&] { full_attention(reshape(q, {2, 4, 3}), k, v); }, {"full_attention", "(B, H, N, E)"});
  check_error([&] { full_attention(q, k, v, {}, Causal::Yes); }, {"full_attention", "causal", "N = 4, S = 5"});
  check_error([&] { full_attention(q, k, v, {Tensor(), from_vector<int64_t>({1, 2}, {2})}); },
              {"full_attention", "lengths must be int64 or int32 of shape (1,)"});
  check_error([&] { full_attention(q, k, v, {Tensor(), from_vector<double>({1}, {1})}); },
              {"full_attention", "lengths must be int64 or int32", "float64"});
  check_error([&] { full_attention(q, k, v, {Tensor(), from_vector<int64_t>({6}, {1})}); },
              {"full_attention", "length of 6"});
  Generator gen(0);
  check_error([&] { cluster_queries(q, Tensor(), {0, 63, 10}, gen); }, {"cluster_queries", "clusters"});
  check_error([&] { cluster_queries(q, Tensor(), {2, 64, 10}, gen); }, {"cluster_queries", "bits must be in [1, 63]"});
  const QueryClusters clusters = cluster_queries(q, Tensor(), {2, 63, 10}, gen);
  check_error([&] { improved_clustered_attention(q, k, v, clusters, 0); }, {"improved_clustered_attention", "topk"});
  check_error([&] { clustered_attention(q, k, v, {clusters.ids, 0}); }, {"clustered_attention", "at least one cluster"});
  check_error([&] { clustered_attention(q, k, v, {zeros({1, 2, 3}, {DType::Int64}), 2}); }, {"clustered_attention", "ids"});
  check_error([&] { attend(AttentionConfig::parse("clustered"), q, k, v, {}, Causal::Yes, gen); }, {"attend", "causal"});
  check_error([&] { attend(AttentionConfig::parse("neural-clustering"), q, k, v, {}, Causal::No, gen); },
              {"attend", "neural_clustering_attention"});
}

TEST_CASE("attention lengths are index tensors: int32 gives what int64 gives") {
  Generator gen(3);
  const Tensor q = randn({2, 2, 5, 3}, gen, {DType::Float64}), k = randn({2, 2, 6, 3}, gen, {DType::Float64}),
               v = randn({2, 2, 6, 4}, gen, {DType::Float64});
  const Padding wide{from_vector<int64_t>({5, 3}, {2}), from_vector<int64_t>({6, 2}, {2})};
  const Padding narrow{from_vector<int32_t>({5, 3}, {2}), from_vector<int32_t>({6, 2}, {2})};
  check_close(full_attention(q, k, v, narrow), full_attention(q, k, v, wide), 0, 0);
  Generator g1(4), g2(4);
  const QueryClusters a = cluster_queries(q, wide.query_lengths, {2, 63, 5}, g1);
  const QueryClusters b = cluster_queries(q, narrow.query_lengths, {2, 63, 5}, g2);
  CHECK(a.ids.to_vector<int64_t>() == b.ids.to_vector<int64_t>());
  check_close(clustered_attention(q, k, v, b, narrow), clustered_attention(q, k, v, a, wide), 0, 0);
  check_error([&] { full_attention(q, k, v, {Tensor(), from_vector<int32_t>({6, 7}, {2})}); },
              {"full_attention", "length of 7", "[0, 6]"});
}

TEST_CASE("clustered attention names the caller's cluster id and its position when one is out of range") {
  const Tensor q = zeros({1, 2, 4, 3}, {DType::Float64}), k = zeros({1, 2, 5, 3}, {DType::Float64}),
               v = zeros({1, 2, 5, 2}, {DType::Float64});
  // C = 2: ids 0, 1 are clusters and 2 marks a padded query; 5 (at head 1, query 2) and −1 are neither.
  const Tensor too_large = from_vector<int64_t>({0, 1, 2, 0, 1, 1, 5, 0}, {1, 2, 4});
  check_error([&] { clustered_attention(q, k, v, {too_large, 2}); },
              {"clustered_attention", "clusters.ids holds 5 at (0, 1, 2)", "outside [0, 2]", "clusters.count = 2"});
  check_error([&] { improved_clustered_attention(q, k, v, {too_large, 2}, 1); },
              {"improved_clustered_attention", "clusters.ids holds 5 at (0, 1, 2)"});
  const Tensor negative = from_vector<int64_t>({0, -1, 0, 0, 1, 1, 1, 0}, {1, 2, 4});
  check_error([&] { clustered_attention(q, k, v, {negative, 2}); }, {"clustered_attention", "clusters.ids holds -1 at (0, 0, 1)"});
  // The padding id C itself is accepted.
  const Tensor with_padding = from_vector<int64_t>({0, 1, 2, 2, 1, 0, 2, 2}, {1, 2, 4});
  CHECK(clustered_attention(q, k, v, {with_padding, 2}).shape() == Shape{1, 2, 4, 2});
}
