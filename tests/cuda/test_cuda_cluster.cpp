// Clustering primitives on the GPU against the CPU.
//
// hamming_kmeans must give the CPU's ids and centroids exactly: planted clusters and random codes,
// one cluster, more clusters than queries, 2000 clusters (more than one pass of centroids through
// shared memory), invalid queries and groups with none valid, 0, 1 and 10 iterations, R = 8, 63, 64.
//
// clustered_sparse_dot and clustered_sparse_weighted_sum, values and the gradients of both
// differentiable inputs, against the CPU to rounding (the GPU's key / value gradients add in another,
// fixed, order): every parity size of N, invalid queries, empty and single-query clusters, repeated
// keys in a top-k row, k·E too large to stage in shared memory, strided inputs, k = 0, no queries; and
// clustered_sparse_attention, which composes them with softmax, on the same inputs.
#include <limits>

#include "ops/cluster.h"
#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Sums of k or E float products (and, for the key / value gradients, of many queries' terms) in
// different orders and with fused multiply-adds on the GPU.
Tolerance sparse_tol(DType dtype) { return dtype == DType::Float32 ? Tolerance{2e-4, 2e-4} : Tolerance{1e-11, 1e-11}; }

// Full 64-bit codes (G, N) from the signs of normal-ish projections, made on the CPU.
Tensor random_codes(int64_t G, int64_t N, uint64_t seed) { return pack_sign_bits(input({G, N, 64}, seed)); }

// G groups of N codes around `centers` random centres, each code 0–3 bit flips from its centre.
Tensor planted_codes(int64_t G, int64_t N, int64_t centers, uint64_t seed) {
  Generator gen(seed);
  const std::vector<int64_t> base = randint(std::numeric_limits<int64_t>::min() / 2, std::numeric_limits<int64_t>::max() / 2,
                                            {G, centers}, gen).to_vector<int64_t>();
  const std::vector<int64_t> pick = randint(0, centers, {G, N}, gen).to_vector<int64_t>();
  const std::vector<int64_t> flips = randint(0, 64, {G, N, 3}, gen).to_vector<int64_t>();
  const std::vector<int64_t> count = randint(0, 4, {G, N}, gen).to_vector<int64_t>();
  std::vector<int64_t> codes(static_cast<size_t>(G * N));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < N; ++i) {
      uint64_t code = static_cast<uint64_t>(base[g * centers + pick[g * N + i]]);
      for (int64_t f = 0; f < count[g * N + i]; ++f) code ^= uint64_t{1} << flips[(g * N + i) * 3 + f];
      codes[g * N + i] = static_cast<int64_t>(code);
    }
  return from_vector<int64_t>(codes, {G, N});
}

// Valid with probability about 1 − 1/period; group `empty_group` has no valid query at all.
Tensor valid_mask(int64_t G, int64_t N, uint64_t seed, int64_t period = 5, int64_t empty_group = -1) {
  Tensor valid = ne(small_integers({G, N}, seed, DType::Int64, 0, period), scalar(0.0, {DType::Int64}));
  if (empty_group >= 0 && empty_group < G) fill_(select(valid, 0, empty_group), 0.0);
  return valid;
}

void check_kmeans(const Tensor& codes, const Tensor& valid, int64_t clusters, int64_t bits, int64_t iterations) {
  INFO("codes " << to_string(codes.shape()) << " C " << clusters << " R " << bits << " L " << iterations);
  check_values([=](const std::vector<Tensor>& in) { return hamming_kmeans(in[0], in[1], clusters, bits, iterations).ids; },
               {codes, valid}, kExact);
  check_values([=](const std::vector<Tensor>& in) {
    return hamming_kmeans(in[0], in[1], clusters, bits, iterations).centroids;
  }, {codes, valid}, kExact);
}

// Inputs of a sparse product: rows (G, S, E), topk (G, C, k) in [0, S), ids (G, N) in [0, C] with
// about one query in `invalid_period` invalid (id C).
struct Sparse {
  Tensor queries, rows, topk, ids;
};

Sparse sparse_inputs(int64_t G, int64_t N, int64_t S, int64_t E, int64_t C, int64_t k, uint64_t seed, DType dtype,
                     int64_t invalid_period = 6) {
  Sparse s;
  s.queries = input({G, N, E}, seed, dtype);
  s.rows = input({G, S, E}, seed + 1, dtype);
  s.topk = small_integers({G, C, k}, seed + 2, DType::Int64, 0, S);
  const Tensor id = small_integers({G, N}, seed + 3, DType::Int64, 0, C);
  const Tensor invalid = eq(small_integers({G, N}, seed + 4, DType::Int64, 0, invalid_period), scalar(0.0, {DType::Int64}));
  s.ids = where(invalid, full({}, static_cast<double>(C), {DType::Int64}), id);
  return s;
}

// Both products, values and gradients. The weights of the weighted sum are (G, N, k).
void check_sparse(const Sparse& s, DType dtype) {
  const int64_t G = s.queries.size(0), N = s.queries.size(1), k = s.topk.size(2);
  INFO("G " << G << " N " << N << " S " << s.rows.size(1) << " E " << s.rows.size(2) << " C " << s.topk.size(1)
            << " k " << k << " " << dtype);
  check_parity([](const std::vector<Tensor>& in) { return clustered_sparse_dot(in[0], in[1], in[2], in[3]); },
               {s.queries, s.rows, s.topk, s.ids}, sparse_tol(dtype));
  check_parity([](const std::vector<Tensor>& in) { return clustered_sparse_weighted_sum(in[0], in[1], in[2], in[3]); },
               {input({G, N, k}, 77, dtype), s.rows, s.topk, s.ids}, sparse_tol(dtype));
  // the attention over the top keys: the two products and their gradients composed with softmax, three
  // in four keys kept
  const Tensor keep = ne(small_integers({G, N, k}, 78, DType::Int64, 0, 4), scalar(0.0, {DType::Int64}));
  check_parity([](const std::vector<Tensor>& in) {
    return clustered_sparse_attention(in[0], in[1], in[2], in[3], in[4], in[5], in[6]);
  }, {s.queries, s.rows, input({G, s.rows.size(1), 5}, 79, dtype), s.topk, s.ids, input({G, N, 1}, 80, dtype, 0.1, 1.0),
      keep}, sparse_tol(dtype));
}

}  // namespace

TEST_CASE("hamming_kmeans: planted clusters and random codes give the CPU's ids and centroids") {
  for (int64_t n : parity_sizes()) {
    INFO("N " << n);
    const uint64_t seed = 10 * static_cast<uint64_t>(n);
    check_kmeans(planted_codes(3, n, 5, seed + 1), valid_mask(3, n, seed + 2), 5, 64, 10);
    check_kmeans(random_codes(2, n, seed + 3), valid_mask(2, n, seed + 4, 4, 1), 7, 63, 10);
  }
  // R = 8 bits of random codes (the bits above R stay from the seeding), and no / one iteration
  Generator gen(5);
  const Tensor small = randint(0, 256, {4, 1000}, gen);
  for (int64_t iterations : {0, 1, 10}) check_kmeans(small, valid_mask(4, 1000, 6), 15, 8, iterations);
  check_kmeans(random_codes(2, 1000, 7), valid_mask(2, 1000, 8), 15, 8, 3);
}

TEST_CASE("hamming_kmeans: one cluster, more clusters than queries, 2000 clusters, every query invalid") {
  check_kmeans(random_codes(3, 1000, 101), valid_mask(3, 1000, 102), 1, 64, 10);
  check_kmeans(random_codes(3, 33, 103), valid_mask(3, 33, 104, 3, 2), 100, 64, 10);
  check_kmeans(planted_codes(2, 4097, 1500, 105), valid_mask(2, 4097, 106, 50), 2000, 64, 10);
  check_kmeans(random_codes(2, 4097, 107), valid_mask(2, 4097, 108, 50), 2000, 63, 3);
  check_kmeans(random_codes(2, 31, 109), zeros({2, 31}, {DType::Bool}), 4, 64, 5);
  check_kmeans(random_codes(2, 0, 110), zeros({2, 0}, {DType::Bool}), 4, 64, 5);
  check_kmeans(random_codes(0, 7, 111), zeros({0, 7}, {DType::Bool}), 4, 64, 5);
  // a strided codes tensor: made contiguous by the op
  check_values([](const std::vector<Tensor>& in) { return hamming_kmeans(transpose(in[0], 0, 1), in[1], 9, 64, 4).ids; },
               {random_codes(33, 3, 112), valid_mask(3, 33, 113)}, kExact);
}

TEST_CASE("clustered sparse products: every size of N, values and gradients") {
  uint64_t seed = 200;
  for (int64_t n : parity_sizes())
    for (DType dtype : {DType::Float32, DType::Float64}) {
      check_sparse(sparse_inputs(2, n, 50, 16, 7, 8, seed += 10, dtype), dtype);
    }
}

TEST_CASE("clustered sparse products: shared-memory fallback, many clusters, edge shapes, views") {
  uint64_t seed = 300;
  // k·E beyond the 48 KiB stage: rows are read from global memory
  check_sparse(sparse_inputs(2, 300, 300, 64, 5, 200, seed += 10, DType::Float32), DType::Float32);
  check_sparse(sparse_inputs(2, 300, 300, 64, 5, 100, seed += 10, DType::Float64), DType::Float64);
  // the last k that is staged (94 rows of 65 doubles fit 48 KiB) and the first that is not
  check_sparse(sparse_inputs(1, 100, 200, 64, 3, 94, seed += 10, DType::Float64), DType::Float64);
  check_sparse(sparse_inputs(1, 100, 200, 64, 3, 95, seed += 10, DType::Float64), DType::Float64);
  // 2000 clusters, most of them empty; one cluster; every query invalid; single-query clusters
  check_sparse(sparse_inputs(2, 1000, 64, 8, 2000, 4, seed += 10, DType::Float64), DType::Float64);
  check_sparse(sparse_inputs(3, 1000, 64, 8, 1, 4, seed += 10, DType::Float64), DType::Float64);
  check_sparse(sparse_inputs(2, 33, 64, 8, 4, 4, seed += 10, DType::Float64, 1), DType::Float64);
  check_sparse(sparse_inputs(1, 31, 64, 8, 31, 4, seed += 10, DType::Float64), DType::Float64);
  // k = 0, E = 1, a single key, no queries, no groups
  check_sparse(sparse_inputs(2, 33, 16, 8, 3, 0, seed += 10, DType::Float64), DType::Float64);
  check_sparse(sparse_inputs(2, 33, 16, 1, 3, 5, seed += 10, DType::Float64), DType::Float64);
  check_sparse(sparse_inputs(2, 33, 1, 8, 3, 5, seed += 10, DType::Float64), DType::Float64);
  check_sparse(sparse_inputs(2, 0, 16, 8, 3, 5, seed += 10, DType::Float64), DType::Float64);
  check_sparse(sparse_inputs(0, 5, 16, 8, 3, 5, seed += 10, DType::Float64), DType::Float64);
  // strided queries and rows: (G, E, N) and (G, E, S) leaves seen transposed
  const Sparse s = sparse_inputs(2, 1000, 50, 16, 7, 8, seed += 10, DType::Float32);
  check_parity([](const std::vector<Tensor>& in) {
    return clustered_sparse_dot(transpose(in[0], 1, 2), transpose(in[1], 1, 2), in[2], in[3]);
  }, {contiguous(transpose(s.queries, 1, 2)), contiguous(transpose(s.rows, 1, 2)), s.topk, s.ids}, sparse_tol(DType::Float32));
  check_parity([](const std::vector<Tensor>& in) {
    return clustered_sparse_weighted_sum(transpose(in[0], 1, 2), in[1], in[2], in[3]);
  }, {input({2, 8, 1000}, 5), s.rows, s.topk, s.ids}, sparse_tol(DType::Float32));
}

TEST_CASE("clustered sparse products refuse bad top-k and ids on the device with the CPU's messages") {
  const Tensor q = to(zeros({1, 2, 2}, {DType::Float64}), dut()), key = to(zeros({1, 4, 2}, {DType::Float64}), dut());
  const Tensor topk = to(from_vector<int64_t>({0, 1, 2, 3}, {1, 2, 2}), dut());
  const Tensor ids = to(from_vector<int64_t>({0, 2}, {1, 2}), dut());
  check_error([&] { clustered_sparse_dot(q, key, to(from_vector<int64_t>({0, 4, 0, -1}, {1, 2, 2}), dut()), ids); },
              {"clustered_sparse_dot", "top-k key index 4", "[0, 4)"});
  check_error([&] { clustered_sparse_dot(q, key, topk, to(from_vector<int64_t>({0, 3}, {1, 2}), dut())); },
              {"clustered_sparse_dot", "cluster id 3", "[0, 2]"});
  check_error([&] { clustered_sparse_weighted_sum(q, key, topk, to(from_vector<int64_t>({-1, 0}, {1, 2}), dut())); },
              {"clustered_sparse_weighted_sum", "cluster id -1"});
  // and go on working afterwards
  check_sparse(sparse_inputs(1, 31, 16, 8, 3, 4, 9, DType::Float64), DType::Float64);
}
