#include "tests/testing.h"

#include <algorithm>
#include <cstdint>
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
}
