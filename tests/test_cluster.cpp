#include "tests/testing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/cluster.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

int popcount(int64_t x) { return __builtin_popcountll(static_cast<uint64_t>(x)); }

// Dense reference of the sparse ops: for every query, the rows of its cluster's top-k keys.
Tensor cluster_rows(const Tensor& x, const Tensor& topk, const Tensor& ids) {
  const int64_t G = x.size(0), S = x.size(1), C = topk.size(1), k = topk.size(2), N = ids.size(1);
  std::vector<int64_t> index, keep;
  const std::vector<int64_t> t = topk.to_vector<int64_t>(), c = ids.to_vector<int64_t>();
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t cluster = c[g * N + i];
        index.push_back(g * S + (cluster == C ? 0 : t[(g * C + cluster) * k + j]));
        keep.push_back(cluster != C);
      }
  const Tensor rows = index_select(reshape(x, {G * S, x.size(2)}), 0, from_vector(index, {G * N * k}));
  const Tensor mask = to(from_vector(keep, {G * N * k, 1}), x.dtype());
  return reshape(rows * mask, {G, N, k, x.size(2)});
}

// Lloyd's algorithm in Hamming space as §3.2.2 states it, one group, bit by bit: the reference of
// hamming_kmeans (which counts eight bits at a time).
void naive_kmeans(const std::vector<uint64_t>& codes, const std::vector<bool>& valid, int64_t C, int64_t bits,
                  int64_t iterations, std::vector<int64_t>& ids, std::vector<uint64_t>& centroids) {
  std::vector<int64_t> members;
  for (size_t i = 0; i < codes.size(); ++i)
    if (valid[i]) members.push_back(static_cast<int64_t>(i));
  const int64_t n = static_cast<int64_t>(members.size()), seeded = std::min(C, n);
  centroids.assign(C, 0);
  std::vector<bool> active(C, false);
  for (int64_t j = 0; j < seeded; ++j) centroids[j] = codes[members[j * n / seeded]], active[j] = true;
  const auto distance = [](uint64_t a, uint64_t b) { return __builtin_popcountll(a ^ b); };
  const auto assign = [&] {
    ids.assign(codes.size(), C);
    for (int64_t i : members) {
      int best = 65;
      for (int64_t j = 0; j < C; ++j)
        if (active[j] && distance(codes[i], centroids[j]) < best) best = distance(codes[i], centroids[j]), ids[i] = j;
    }
  };
  assign();
  for (int64_t it = 0; it < iterations; ++it) {
    for (int64_t j = 0; j < C; ++j)
      for (int64_t r = 0; r < bits; ++r) {
        int64_t set = 0, size = 0;
        for (int64_t i : members)
          if (ids[i] == j) ++size, set += (codes[i] >> r) & 1;
        if (2 * set > size) centroids[j] |= uint64_t{1} << r;
        if (2 * set < size) centroids[j] &= ~(uint64_t{1} << r);
      }
    assign();
  }
}

}  // namespace

TEST_CASE("hamming_kmeans equals Lloyd's algorithm bit by bit (clusters of more than 255 members, 1 to 64 bits)") {
  // Its majorities count eight bits at a time in byte-wide counters emptied every 255 members of a
  // cluster: clusters of a thousand members and more cross that many times.
  Generator gen(12);
  for (const int64_t bits : {1, 8, 13, 40, 63, 64}) {
    for (const int64_t C : {1, 3, 40}) {
      INFO("bits " << bits << ", clusters " << C);
      const int64_t N = 3000;
      // Codes of `bits` random bits (a 64-bit code from two draws of 32).
      const std::vector<int64_t> low = randint(0, int64_t{1} << 32, {N}, gen).to_vector<int64_t>(),
                                 high = randint(0, int64_t{1} << 32, {N}, gen).to_vector<int64_t>();
      std::vector<uint64_t> codes(N);
      std::vector<int64_t> stored(N), valid_ids(N);
      std::vector<bool> valid(N);
      for (int64_t i = 0; i < N; ++i) {
        codes[i] = uint64_t(high[i]) << 32 | uint64_t(low[i]);
        if (bits < 64) codes[i] &= (uint64_t{1} << bits) - 1;
        stored[i] = static_cast<int64_t>(codes[i]);
        valid[i] = i % 7 != 3;
        valid_ids[i] = valid[i];
      }
      const HammingClusters out =
          hamming_kmeans(from_vector(stored, {1, N}), to(from_vector(valid_ids, {1, N}), DType::Bool), C, bits, 4);
      std::vector<int64_t> ids;
      std::vector<uint64_t> centroids;
      naive_kmeans(codes, valid, C, bits, 4, ids, centroids);
      CHECK(out.ids.to_vector<int64_t>() == ids);
      std::vector<int64_t> want(centroids.begin(), centroids.end());
      CHECK(out.centroids.to_vector<int64_t>() == want);
    }
  }
}

TEST_CASE("hamming_kmeans recovers planted clusters") {
  // Three well separated codes, each with 20 members that differ from it in at most 2 bits.
  Generator gen(3);
  const std::vector<int64_t> centers{0x0, int64_t{0x7fffffff} << 20, int64_t{0x1555555555555555}};
  const std::vector<int64_t> flips = randint(0, 63, {60, 2}, gen).to_vector<int64_t>();
  std::vector<int64_t> codes;
  std::vector<int64_t> planted;
  for (int64_t i = 0; i < 60; ++i) {
    const int64_t c = (i * 7) % 3;  // interleaved, so initial centroids see every cluster
    codes.push_back(centers[c] ^ (int64_t{1} << flips[2 * i]) ^ (int64_t{1} << flips[2 * i + 1]));
    planted.push_back(c);
  }
  const HammingClusters out = hamming_kmeans(from_vector(codes, {1, 60}), ones({1, 60}, {DType::Bool}), 3, 63, 10);
  const std::vector<int64_t> ids = out.ids.to_vector<int64_t>();
  // The same partition as planted (cluster numbers may be permuted).
  for (int64_t i = 0; i < 60; ++i)
    for (int64_t j = 0; j < 60; ++j) CHECK((ids[i] == ids[j]) == (planted[i] == planted[j]));
  // The centroids are the planted centers (the majority of members with few flips).
  const std::vector<int64_t> cents = out.centroids.to_vector<int64_t>();
  for (int64_t i = 0; i < 60; ++i) CHECK(cents[ids[i]] == centers[planted[i]]);
}

TEST_CASE("hamming_kmeans assigns every query to its nearest centroid") {
  Generator gen(11);
  const int64_t G = 3, N = 200, C = 7, R = 20;
  const Tensor codes = randint(0, int64_t{1} << R, {G, N}, gen);
  Tensor valid = lt(rand({G, N}, gen), scalar(0.8, {DType::Float32}));
  const HammingClusters out = hamming_kmeans(codes, valid, C, R, 5);
  const std::vector<int64_t> code = codes.to_vector<int64_t>(), ids = out.ids.to_vector<int64_t>(),
                             cents = out.centroids.to_vector<int64_t>();
  const std::vector<bool> ok = valid.to_vector<bool>();
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < N; ++i) {
      const int64_t id = ids[g * N + i];
      if (!ok[g * N + i]) {
        CHECK(id == C);
        continue;
      }
      REQUIRE(id >= 0);
      REQUIRE(id < C);
      int best = 64;
      int64_t best_j = -1;
      for (int64_t j = 0; j < C; ++j) {
        const int d = popcount(code[g * N + i] ^ cents[g * C + j]);
        if (d < best) best = d, best_j = j;
      }
      CHECK(id == best_j);  // nearest, ties to the lowest index
    }
}

TEST_CASE("hamming_kmeans: more clusters than queries, one cluster, empty groups, thousands of clusters") {
  const Tensor codes = from_vector<int64_t>({1, 2, 4, 1 | 2, 0, 0}, {2, 3});
  const Tensor valid = from_vector<bool>({true, true, true, true, false, false}, {2, 3});
  const HammingClusters many = hamming_kmeans(codes, valid, 5, 8, 3);
  CHECK(many.ids.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 0, 5, 5});
  const HammingClusters one = hamming_kmeans(codes, valid, 1, 8, 3);
  CHECK(one.ids.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0, 0, 1, 1});
  Generator gen(1);
  const Tensor big = randint(0, int64_t{1} << 40, {1, 3000}, gen);
  const HammingClusters wide = hamming_kmeans(big, ones({1, 3000}, {DType::Bool}), 2000, 40, 2);
  for (int64_t id : wide.ids.to_vector<int64_t>()) {
    REQUIRE(id >= 0);
    REQUIRE(id < 2000);
  }
}

TEST_CASE("hamming_kmeans refuses bad arguments") {
  const Tensor codes = zeros({2, 3}, {DType::Int64});
  const Tensor valid = ones({2, 3}, {DType::Bool});
  check_error([&] { hamming_kmeans(codes, valid, 0, 8, 1); }, {"hamming_kmeans", "cluster"});
  check_error([&] { hamming_kmeans(codes, valid, 2, 65, 1); }, {"hamming_kmeans", "bits"});
  check_error([&] { hamming_kmeans(codes, valid, 2, 8, -1); }, {"hamming_kmeans", "iterations"});
  check_error([&] { hamming_kmeans(to(codes, DType::Float32), valid, 2, 8, 1); }, {"hamming_kmeans", "int64"});
  check_error([&] { hamming_kmeans(codes, ones({3, 2}, {DType::Bool}), 2, 8, 1); }, {"hamming_kmeans", "valid"});
}

TEST_CASE("clustered sparse products equal their dense composition, values and gradients") {
  const int64_t G = 2, N = 5, S = 6, E = 3, M = 4, C = 3, k = 2;
  const Tensor topk = from_vector<int64_t>({0, 5, 2, 2, 4, 1, 3, 3, 0, 1, 5, 4}, {G, C, k});  // repeats allowed
  const Tensor ids = from_vector<int64_t>({0, 1, 2, 1, 3, 2, 2, 0, 3, 1}, {G, N});           // 3 = no cluster
  const Tensor q = uniform({G, N, E}, 1), key = uniform({G, S, E}, 2), value = uniform({G, S, M}, 3),
               w = uniform({G, N, k}, 4);
  const Tensor dense_dot = sum(cluster_rows(key, topk, ids) * unsqueeze(q, 2), {-1});
  check_close(clustered_sparse_dot(q, key, topk, ids), dense_dot, 1e-12, 1e-12);
  const Tensor dense_sum = sum(cluster_rows(value, topk, ids) * unsqueeze(w, -1), {2});
  check_close(clustered_sparse_weighted_sum(w, value, topk, ids), dense_sum, 1e-12, 1e-12);

  check_gradients([&](const std::vector<Tensor>& in) { return clustered_sparse_dot(in[0], in[1], topk, ids); },
                  {q, key});
  check_gradients([&](const std::vector<Tensor>& in) { return clustered_sparse_weighted_sum(in[0], in[1], topk, ids); },
                  {w, value});
}

// clustered_sparse_attention as improved-clustered composed it before (nn/attention/clustered.cpp).
Tensor sparse_attention_composed(const Tensor& q, const Tensor& key, const Tensor& value, const Tensor& topk,
                                 const Tensor& ids, const Tensor& mass, const Tensor& keep) {
  const Tensor dots = clustered_sparse_dot(q, key, topk, ids) / std::sqrt(static_cast<double>(q.size(2)));
  return clustered_sparse_weighted_sum(softmax(dots, keep) * mass, value, topk, ids);
}

TEST_CASE("clustered_sparse_attention: the composition's values to the bit, its gradients, gradcheck") {
  // Repeated keys in a cluster's list, queries of no cluster (id 3), and a keep mask with a row kept
  // whole, rows kept in part and a row with nothing kept (p = 0 there).
  const int64_t G = 2, N = 5, S = 6, E = 3, M = 4, C = 3, k = 3;
  const Tensor topk = from_vector<int64_t>({0, 5, 2, 2, 4, 1, 3, 3, 0,  //
                                            1, 5, 4, 0, 2, 3, 5, 5, 1},
                                           {G, C, k});
  const Tensor ids = from_vector<int64_t>({0, 1, 2, 1, 3, 2, 2, 0, 3, 1}, {G, N});
  const Tensor q = uniform({G, N, E}, 11, -2, 2), key = uniform({G, S, E}, 12, -2, 2), value = uniform({G, S, M}, 13),
               mass = uniform({G, N, 1}, 14, 0.1, 1);
  const Tensor keep = from_vector<bool>({1, 1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 1,  //
                                         0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1},
                                        {G, N, k});
  for (const Tensor& mask : {keep, Tensor()}) {
    INFO((mask.defined() ? "with keep" : "all kept"));
    for (const DType dtype : {DType::Float64, DType::Float32}) {
      INFO(dtype_name(dtype));
      std::vector<Tensor> a, b;
      for (const Tensor& t : {q, key, value, mass}) {
        a.push_back(to(t, dtype).detach().set_requires_grad(true));
        b.push_back(to(t, dtype).detach().set_requires_grad(true));
      }
      const Tensor fused = clustered_sparse_attention(a[0], a[1], a[2], topk, ids, a[3], mask);
      const Tensor composed = sparse_attention_composed(b[0], b[1], b[2], topk, ids, b[3], mask);
      CHECK(to(fused, DType::Float64).to_vector<double>() == to(composed, DType::Float64).to_vector<double>());
      const Tensor dy = to(uniform({G, N, M}, 15), dtype);
      fused.backward(dy);
      composed.backward(dy);
      const double tol = dtype == DType::Float64 ? 1e-13 : 1e-5;
      for (size_t i = 0; i < a.size(); ++i)
        check_close(to(a[i].grad(), DType::Float64), to(b[i].grad(), DType::Float64), tol, tol);
    }
    check_gradients([&](const std::vector<Tensor>& in) {
      return clustered_sparse_attention(in[0], in[1], in[2], topk, ids, in[3], mask);
    }, {q, key, value, mass});
  }
}

TEST_CASE("clustered_sparse_attention holds none of its N × k tensors for the backward") {
  // 8 groups of 512 queries over 32 keys each: the composition holds the dot products, the softmax
  // and the weights (three G × N × k tensors, 1.5 MiB in float32); the op holds its inputs alone.
  Allocator& alloc = context(Device::cpu()).allocator();
  const int64_t G = 8, N = 512, S = 256, E = 16, C = 16, k = 32;
  Generator gen(5);
  const Tensor q = randn({G, N, E}, gen).set_requires_grad(true), key = randn({G, S, E}, gen).set_requires_grad(true),
               value = randn({G, S, E}, gen).set_requires_grad(true), mass = rand({G, N, 1}, gen);
  const Tensor topk = randint(0, S, {G, C, k}, gen), ids = randint(0, C + 1, {G, N}, gen);
  const int64_t nk = G * N * k * 4, output = G * N * E * 4;
  const auto held = [&](const std::function<Tensor()>& forward) {
    alloc.empty_cache();
    const int64_t before = alloc.stats().in_use;
    const Tensor y = forward();
    return alloc.stats().in_use - before - output;
  };
  const int64_t fused = held([&] { return clustered_sparse_attention(q, key, value, topk, ids, mass, Tensor()); });
  const int64_t composed = held([&] { return sparse_attention_composed(q, key, value, topk, ids, mass, Tensor()); });
  INFO("held beyond the output: fused " << fused << " bytes, composed " << composed << ", one N × k tensor " << nk);
  CHECK(fused < nk / 2);
  CHECK(composed >= 2 * nk);
}

TEST_CASE("clustered sparse products refuse bad arguments before reading") {
  const Tensor q = zeros({1, 2, 3}, {DType::Float64}), key = zeros({1, 4, 3}, {DType::Float64});
  const Tensor topk = zeros({1, 2, 2}, {DType::Int64}), ids = zeros({1, 2}, {DType::Int64});
  check_error([&] { clustered_sparse_dot(q, key, from_vector<int64_t>({0, 4, 0, 0}, {1, 2, 2}), ids); },
              {"clustered_sparse_dot", "top-k key index 4"});
  check_error([&] { clustered_sparse_dot(q, key, topk, from_vector<int64_t>({0, 3}, {1, 2})); },
              {"clustered_sparse_dot", "cluster id 3"});
  check_error([&] { clustered_sparse_dot(q, zeros({1, 4, 2}, {DType::Float64}), topk, ids); },
              {"clustered_sparse_dot", "E"});
  check_error([&] { clustered_sparse_dot(q, to(key, DType::Float32), topk, ids); }, {"clustered_sparse_dot", "dtype"});
  check_error([&] { clustered_sparse_weighted_sum(zeros({1, 2, 3}, {DType::Float64}), key, topk, ids); },
              {"clustered_sparse_weighted_sum", "entries per query"});
  check_error([&] { clustered_sparse_weighted_sum(zeros({1, 2, 2}, {DType::Float64}), key, to(topk, DType::Int32), ids); },
              {"clustered_sparse_weighted_sum", "int64"});
  // clustered_sparse_attention: its own arguments (q, key, topk and ids are checked as above)
  const Tensor value = zeros({1, 4, 5}, {DType::Float64}), mass = ones({1, 2, 1}, {DType::Float64});
  const auto attend = [&](const Tensor& v, const Tensor& m, const Tensor& keep) {
    clustered_sparse_attention(q, key, v, topk, ids, m, keep);
  };
  check_error([&] { attend(zeros({1, 3, 5}, {DType::Float64}), mass, Tensor()); },
              {"clustered_sparse_attention", "value"});
  check_error([&] { attend(value, ones({1, 2}, {DType::Float64}), Tensor()); }, {"clustered_sparse_attention", "mass"});
  check_error([&] { attend(value, ones({1, 2, 1}), Tensor()); }, {"clustered_sparse_attention", "dtype"});
  check_error([&] { attend(value, mass, ones({1, 2, 2})); }, {"clustered_sparse_attention", "keep", "bool"});
  check_error([&] { attend(value, mass, ones({1, 2, 3}, {DType::Bool})); }, {"clustered_sparse_attention", "keep"});
  check_error([&] { attend(Tensor(), mass, Tensor()); }, {"clustered_sparse_attention", "undefined"});
  check_error([&] { clustered_sparse_attention(q, key, value, from_vector<int64_t>({0, 4, 0, 0}, {1, 2, 2}), ids, mass,
                                               Tensor()); },
              {"clustered_sparse_attention", "top-k key index 4"});
}
