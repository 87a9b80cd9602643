// CUDA launchers of the clustering primitives (ops/cuda/cluster.cu). Plain C++: ops/cluster.cpp
// checks the arguments and calls them for tensors on a GPU, with contiguous inputs and outputs
// allocated on their device. Shapes as in ops/cluster.h: G groups, N queries, S keys, C clusters,
// k top-k keys per cluster, R bits; a row width (E for keys, M for values) is called E here.
#pragma once

#include <cstdint>

#include "core/macros.h"
#include "core/tensor.h"

namespace tapestry::cuda {

// hamming_kmeans (ops/cluster.h) for codes (G, N) int64 and valid (G, N) bool into ids (G, N) and
// centroids (G, C), int64: the CPU's algorithm and tie rules, so the same inputs give the same ids
// and centroids bit for bit. No limit on C: the centroids pass through shared memory in tiles.
void hamming_kmeans(const Tensor& codes, const Tensor& valid, int64_t clusters, int64_t bits, int64_t iterations,
                    const Tensor& ids, const Tensor& centroids);

// The cluster that the valid query of rank `rank` (0-based, among the group's n valid queries) seeds
// with its code, or −1: the CPU seeds cluster j < m = min(C, n) with the valid query of rank
// ⌊j·n/m⌋. Those ranks strictly increase with j (n ≥ m), so a rank seeds at most one cluster, the
// smallest j with j·n ≥ rank·m, i.e. j = ⌈rank·m/n⌉, when ⌊j·n/m⌋ = rank and j < m.
TP_HOST_DEVICE inline int64_t seeded_cluster(int64_t rank, int64_t n, int64_t m) {
  const int64_t j = (rank * m + n - 1) / n;
  return j < m && j * n / m == rank ? j : -1;
}

// The queries of each (group, cluster), for the sparse products: ids (G, N) int64 in [0, C] sorted
// stably by (group, id) with a CUB radix sort.
struct QueryLayout {
  Tensor order;    // (G·N,) int64: flat query positions g·N + i, grouped by (g, cluster), ascending in one
  Tensor offsets;  // (G·(C + 1) + 1,) int64: cluster c of group g is order[offsets[g·(C+1) + c], offsets[g·(C+1) + c + 1]);
                   // c = C gathers the invalid queries
};
QueryLayout queries_by_cluster(const Tensor& ids, int64_t clusters);

// The three products of clustered_sparse_dot / clustered_sparse_weighted_sum and their gradients,
// for rows (G, S, E) (keys or values), topk (G, C, k) int64 and the layout of ids. Invalid queries
// (id C) are skipped: their outputs keep what the caller put there (zeros).
//
// out (G, N, k):  out[g, i, t] = a[g, i] · rows[g, topk[g, c_i, t]]            a (G, N, E)
void gather_dot(const Tensor& out, const Tensor& a, const Tensor& rows, const Tensor& topk, const QueryLayout& layout);
// out (G, N, E):  out[g, i] = Σ_t coef[g, i, t] · rows[g, topk[g, c_i, t]]      coef (G, N, k)
void weighted_rows(const Tensor& out, const Tensor& coef, const Tensor& rows, const Tensor& topk,
                   const QueryLayout& layout);
// grad_rows (G, S, E) += Σ_{i, t: topk[g, c_i, t] = s} coef[g, i, t] · a[g, i]   coef (G, N, k), a (G, N, E)
void scatter_outer(const Tensor& grad_rows, const Tensor& coef, const Tensor& a, const Tensor& topk,
                   const QueryLayout& layout);

}  // namespace tapestry::cuda
