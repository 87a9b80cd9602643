// CUDA kernels of the clustering primitives: Hamming k-means, and the clustered sparse products with
// their gradients (clustered-attention paper §3.2.2, §3.3, A.2).
//
// Hamming k-means runs all groups at once, one launch per step, L Lloyd iterations on the device:
// - seed: one block per group counts its valid queries, ranks them with a block-wide scan (carried
//   across tiles of the group), and every valid query whose rank the CPU picks (⌊j·n/m⌋) writes its
//   code into centroid j (seeded_cluster, ops/cuda/cluster.h);
// - assign: a block takes a tile of one group's queries and streams the group's active centroids
//   through shared memory, kCentroidTile at a time, so C is limited by nothing but memory; each
//   thread scans the centroids in index order and keeps the first strictly nearer one, which is the
//   CPU's rule (ties to the lowest index);
// - update: per-cluster member counts and per-bit counts of set bits, summed with integer atomics
//   (exact in any order, hence deterministic), then one thread per centroid applies the majority rule
//   (a tie, or an empty cluster, keeps the old bit).
// Everything is integer arithmetic: the result is the CPU's, bit for bit.
//
// Sparse products. All queries of a cluster read the same k rows (keys or values), so the queries
// are grouped by cluster (queries_by_cluster, a stable CUB radix sort of (group, id)) and one block
// serves one cluster: it stages the cluster's k rows in shared memory once and every query of the
// cluster reads them from there. When the k rows (padded to E + 1) do not fit kStageBytes, the
// block reads them from global memory instead (same arithmetic, same order). Every output element is computed by one
// thread, summing in the CPU's order (over e, or over t). The row gradients are deterministic
// without float atomics: first, per (cluster, t), one thread sums coef · a over the cluster's
// queries in order; then those (G·C·k) partial rows are added into the rows they belong to by the
// sorted-run index_add of ops/cuda/index.cu. The order of the additions differs from the CPU's, so
// these gradients agree with it to rounding, not bit for bit; they are the same on every run.
#include "ops/cuda/cluster.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "core/creation.h"
#include "core/dispatch.h"
#include "ops/cuda/index.h"
#include "ops/cuda/launch.cuh"
#include "ops/cuda/radix_sort.cuh"

namespace tapestry::cuda {

namespace {

constexpr int64_t kCentroidTile = 1024;      // centroids per pass through shared memory (8 KiB)
constexpr int64_t kStageBytes = 48 * 1024;  // a cluster's k rows staged when they fit (the default
                                            // dynamic shared-memory limit of a block)

unsigned blocks_for_items(int64_t items) { return static_cast<unsigned>(std::clamp<int64_t>(items, 1, kMaxBlocks)); }

// ---- Hamming k-means ----

// Per group g: ids[g, :] = C (invalid until assigned), centroid j < m = min(C, n) = the code of the
// valid query of rank ⌊j·n/m⌋, active[g] = m. One block per group; centroids are zero beforehand.
__global__ void seed_kernel(const int64_t* codes, const bool* valid, int64_t G, int64_t N, int64_t C, int64_t* ids,
                            int64_t* centroids, int64_t* active) {
  using BlockReduce = cub::BlockReduce<int64_t, kThreads>;
  using BlockScan = cub::BlockScan<int64_t, kThreads>;
  __shared__ union {
    typename BlockReduce::TempStorage reduce;
    typename BlockScan::TempStorage scan;
  } temp;
  __shared__ int64_t valid_count;
  for (int64_t g = blockIdx.x; g < G; g += gridDim.x) {
    const int64_t* code = codes + g * N;
    const bool* ok = valid + g * N;
    int64_t mine = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) mine += ok[i] ? 1 : 0;
    const int64_t counted = BlockReduce(temp.reduce).Sum(mine);  // in thread 0
    if (threadIdx.x == 0) valid_count = counted;
    __syncthreads();
    const int64_t n = valid_count, m = n < C ? n : C;
    int64_t carry = 0;  // valid queries in the tiles before this one
    for (int64_t base = 0; base < N; base += blockDim.x) {
      const int64_t i = base + threadIdx.x;
      const int64_t flag = i < N && ok[i] ? 1 : 0;
      int64_t rank, tile_count;
      BlockScan(temp.scan).ExclusiveSum(flag, rank, tile_count);
      __syncthreads();  // temp is reused by the next tile's scan
      if (i < N) {
        ids[g * N + i] = C;
        const int64_t j = flag ? seeded_cluster(carry + rank, n, m) : -1;
        if (j >= 0) centroids[g * C + j] = code[i];
      }
      carry += tile_count;
    }
    if (threadIdx.x == 0) active[g] = m;
    __syncthreads();  // valid_count and temp are reused by the next group
  }
}

// ids[g, i] = the nearest of group g's first active[g] centroids to valid query i by popcount of
// the XOR, ties to the lowest index. Work item = (group, tile of blockDim queries); every thread of
// the block takes part in loading each centroid tile, whether or not it has a query.
__global__ void assign_kernel(const int64_t* codes, const bool* valid, const int64_t* centroids, const int64_t* active,
                              int64_t G, int64_t N, int64_t C, int64_t tiles, int64_t* ids) {
  __shared__ uint64_t tile[kCentroidTile];
  for (int64_t item = blockIdx.x; item < G * tiles; item += gridDim.x) {
    const int64_t g = item / tiles, i = item % tiles * blockDim.x + threadIdx.x;
    const bool mine = i < N && valid[g * N + i];
    const uint64_t code = mine ? static_cast<uint64_t>(codes[g * N + i]) : 0;
    const int64_t m = active[g];
    int best_distance = 65;
    int64_t best = -1;
    for (int64_t first = 0; first < m; first += kCentroidTile) {
      const int64_t count = m - first < kCentroidTile ? m - first : kCentroidTile;
      for (int64_t j = threadIdx.x; j < count; j += blockDim.x) tile[j] = static_cast<uint64_t>(centroids[g * C + first + j]);
      __syncthreads();
      if (mine) {
        for (int64_t j = 0; j < count; ++j) {
          const int distance = __popcll(code ^ tile[j]);
          if (distance < best_distance) best_distance = distance, best = first + j;
        }
      }
      __syncthreads();  // the tile is read by everyone before it is overwritten
    }
    if (mine) ids[g * N + i] = best;
  }
}

// members[g·C + j] = |cluster j of group g|, ones[(g·C + j)·R + r] = members with bit r set.
__global__ void count_kernel(const int64_t* codes, const bool* valid, const int64_t* ids, int64_t G, int64_t N,
                             int64_t C, int64_t bits, unsigned* members, unsigned* ones) {
  TP_GRID_STRIDE_LOOP(q, G * N) {
    if (!valid[q]) continue;
    const int64_t cluster = q / N * C + ids[q];
    atomicAdd(&members[cluster], 1u);
    const uint64_t code = static_cast<uint64_t>(codes[q]);
    for (int64_t r = 0; r < bits; ++r)
      if ((code >> r) & 1) atomicAdd(&ones[cluster * bits + r], 1u);
  }
}

// Each centroid bit r < R becomes the majority bit of the cluster's members; a tie or an empty
// cluster keeps it.
__global__ void update_kernel(const unsigned* members, const unsigned* ones, int64_t clusters, int64_t bits,
                              int64_t* centroids) {
  TP_GRID_STRIDE_LOOP(c, clusters) {
    uint64_t centroid = static_cast<uint64_t>(centroids[c]);
    const int64_t size = members[c];
    for (int64_t r = 0; r < bits; ++r) {
      const int64_t set = 2 * static_cast<int64_t>(ones[c * bits + r]);
      if (set > size) centroid |= uint64_t{1} << r;
      else if (set < size) centroid &= ~(uint64_t{1} << r);
    }
    centroids[c] = static_cast<int64_t>(centroid);
  }
}

// ---- sparse products ----

struct Dims {
  int64_t G, N, S, C, k, E;  // E: the row width (E for keys, M for values)
};

Dims dims_of(const Tensor& queries, const Tensor& rows, const Tensor& topk) {
  return {queries.size(0), queries.size(1), rows.size(1), topk.size(1), topk.size(2), rows.size(2)};
}

// Cluster b = g·C + c of group g: its queries are order[begin, end).
struct Members {
  int64_t begin, end;
};
__device__ Members members_of(const int64_t* offsets, const Dims& d, int64_t b) {
  const int64_t slot = b / d.C * (d.C + 1) + b % d.C;
  return {offsets[slot], offsets[slot + 1]};
}

// The k rows of cluster b: staged in shared memory, or read where they lie. Staged rows are E + 1
// apart, so that threads reading element e of neighbouring rows (gather_dot) hit different banks.
template <class T>
struct ClusterRows {
  const T* rows;        // (G, S, E)
  const int64_t* keys;  // (k,): topk[g, c]
  const T* stage;       // (k, E + 1), or nullptr
  int64_t g, S, E;
  __device__ const T* row(int64_t t) const { return stage ? stage + t * (E + 1) : rows + (g * S + keys[t]) * E; }
};

// Shared memory for a staged cluster's rows.
int64_t stage_bytes(int64_t k, int64_t E, int64_t element) { return k * (E + 1) * element; }

// Loads cluster b's rows into the stage (when staged) and returns their view. Block-wide.
template <class T>
__device__ ClusterRows<T> cluster_rows(const T* rows, const int64_t* topk, const Dims& d, int64_t b, T* stage) {
  const int64_t g = b / d.C;
  const int64_t* keys = topk + b * d.k;
  if (stage) {
    for (int64_t p = threadIdx.x; p < d.k * d.E; p += blockDim.x)
      stage[p / d.E * (d.E + 1) + p % d.E] = rows[(g * d.S + keys[p / d.E]) * d.E + p % d.E];
    __syncthreads();
  }
  return {rows, keys, stage, g, d.S, d.E};
}

// out[q, t] = Σ_e a[q, e] · row_t[e] for every query q of each cluster. One block per cluster.
template <class T>
__global__ void gather_dot_kernel(const T* a, const T* rows, const int64_t* topk, const int64_t* order,
                                  const int64_t* offsets, Dims d, bool staged, T* out) {
  extern __shared__ __align__(16) unsigned char shared[];
  T* stage = staged ? reinterpret_cast<T*>(shared) : nullptr;
  for (int64_t b = blockIdx.x; b < d.G * d.C; b += gridDim.x) {
    const Members m = members_of(offsets, d, b);
    if (m.begin == m.end) continue;  // the same for the whole block
    const ClusterRows<T> r = cluster_rows(rows, topk, d, b, stage);
    for (int64_t p = threadIdx.x; p < (m.end - m.begin) * d.k; p += blockDim.x) {
      const int64_t q = order[m.begin + p / d.k], t = p % d.k;
      const T* x = a + q * d.E;
      const T* y = r.row(t);
      T acc = 0;
      for (int64_t e = 0; e < d.E; ++e) acc += x[e] * y[e];
      out[q * d.k + t] = acc;
    }
    if (staged) __syncthreads();  // the stage is read by everyone before the next cluster's rows
  }
}

// out[q, e] = Σ_t coef[q, t] · row_t[e] for every query q of each cluster. One block per cluster.
template <class T>
__global__ void weighted_rows_kernel(const T* coef, const T* rows, const int64_t* topk, const int64_t* order,
                                     const int64_t* offsets, Dims d, bool staged, T* out) {
  extern __shared__ __align__(16) unsigned char shared[];
  T* stage = staged ? reinterpret_cast<T*>(shared) : nullptr;
  for (int64_t b = blockIdx.x; b < d.G * d.C; b += gridDim.x) {
    const Members m = members_of(offsets, d, b);
    if (m.begin == m.end) continue;
    const ClusterRows<T> r = cluster_rows(rows, topk, d, b, stage);
    for (int64_t p = threadIdx.x; p < (m.end - m.begin) * d.E; p += blockDim.x) {
      const int64_t q = order[m.begin + p / d.E], e = p % d.E;
      const T* w = coef + q * d.k;
      T acc = 0;
      for (int64_t t = 0; t < d.k; ++t) acc += w[t] * r.row(t)[e];
      out[q * d.E + e] = acc;
    }
    if (staged) __syncthreads();
  }
}

// partial[b, t, e] = Σ_{q in cluster b} coef[q, t] · a[q, e], over the queries in order.
template <class T>
__global__ void cluster_outer_kernel(const T* coef, const T* a, const int64_t* order, const int64_t* offsets, Dims d,
                                     T* partial) {
  TP_GRID_STRIDE_LOOP(x, d.G * d.C * d.k * d.E) {
    const int64_t e = x % d.E, t = x / d.E % d.k, b = x / (d.E * d.k);
    const Members m = members_of(offsets, d, b);
    T acc = 0;
    for (int64_t u = m.begin; u < m.end; ++u) {
      const int64_t q = order[u];
      acc += coef[q * d.k + t] * a[q * d.E + e];
    }
    partial[x] = acc;
  }
}

// flat[b·k + t] = g·S + topk[g, c, t]: the row of (G·S, E) that partial row (b, t) adds into.
__global__ void flat_rows_kernel(const int64_t* topk, Dims d, int64_t* flat) {
  TP_GRID_STRIDE_LOOP(x, d.G * d.C * d.k) flat[x] = x / (d.C * d.k) * d.S + topk[x];
}

// keys[q] = g·(C + 1) + ids[q]: the (group, cluster) slot of query q = g·N + i.
__global__ void slot_keys_kernel(const int64_t* ids, int64_t G, int64_t N, int64_t C, uint64_t* keys) {
  TP_GRID_STRIDE_LOOP(q, G * N) keys[q] = static_cast<uint64_t>(q / N * (C + 1) + ids[q]);
}

// Launches a one-block-per-cluster kernel, staging the k rows when they fit.
template <class T, class Kernel>
void per_cluster(CudaContext& ctx, Kernel kernel, const T* in, const Tensor& rows, const Tensor& topk,
                 const QueryLayout& layout, const Dims& d, const Tensor& out) {
  const int64_t bytes = stage_bytes(d.k, d.E, sizeof(T));
  const bool staged = bytes <= kStageBytes;
  kernel<<<blocks_for_items(d.G * d.C), kThreads, staged ? static_cast<size_t>(bytes) : 0, ctx.stream()>>>(
      in, static_cast<const T*>(rows.raw_data()), static_cast<const int64_t*>(topk.raw_data()),
      static_cast<const int64_t*>(layout.order.raw_data()), static_cast<const int64_t*>(layout.offsets.raw_data()), d,
      staged, static_cast<T*>(out.raw_data()));
  TP_CUDA_CHECK_LAUNCH();
}

}  // namespace

void hamming_kmeans(const Tensor& codes, const Tensor& valid, int64_t clusters, int64_t bits, int64_t iterations,
                    const Tensor& ids, const Tensor& centroids) {
  const int64_t G = codes.size(0), N = codes.size(1), C = clusters;
  if (G == 0) return;
  CudaContext& ctx = active_context(codes.device());
  int64_t* cents = static_cast<int64_t*>(centroids.raw_data());
  TP_CUDA_CHECK(cudaMemsetAsync(cents, 0, static_cast<size_t>(G * C) * sizeof(int64_t), ctx.stream()));
  if (N == 0) return;
  const int64_t* pc = static_cast<const int64_t*>(codes.raw_data());
  const bool* pv = static_cast<const bool*>(valid.raw_data());
  int64_t* pids = static_cast<int64_t*>(ids.raw_data());
  ScratchBuffer active(ctx.allocator(), static_cast<size_t>(G) * sizeof(int64_t));  // (G,) m per group
  int64_t* pactive = static_cast<int64_t*>(active.data());
  seed_kernel<<<blocks_for_items(G), kThreads, 0, ctx.stream()>>>(pc, pv, G, N, C, pids, cents, pactive);
  TP_CUDA_CHECK_LAUNCH();
  const int64_t tiles = (N + kThreads - 1) / kThreads;
  const auto assign = [&] {
    assign_kernel<<<blocks_for_items(G * tiles), kThreads, 0, ctx.stream()>>>(pc, pv, cents, pactive, G, N, C, tiles, pids);
    TP_CUDA_CHECK_LAUNCH();
  };
  assign();
  if (iterations == 0) return;
  const size_t member_bytes = static_cast<size_t>(G * C) * sizeof(unsigned);
  const size_t ones_bytes = member_bytes * static_cast<size_t>(bits);
  ScratchBuffer members(ctx.allocator(), member_bytes);  // (G, C)
  ScratchBuffer ones(ctx.allocator(), ones_bytes);        // (G, C, R)
  unsigned* pm = static_cast<unsigned*>(members.data());
  unsigned* po = static_cast<unsigned*>(ones.data());
  for (int64_t it = 0; it < iterations; ++it) {
    TP_CUDA_CHECK(cudaMemsetAsync(pm, 0, member_bytes, ctx.stream()));
    TP_CUDA_CHECK(cudaMemsetAsync(po, 0, ones_bytes, ctx.stream()));
    count_kernel<<<blocks_for(G * N), kThreads, 0, ctx.stream()>>>(pc, pv, pids, G, N, C, bits, pm, po);
    TP_CUDA_CHECK_LAUNCH();
    update_kernel<<<blocks_for(G * C), kThreads, 0, ctx.stream()>>>(pm, po, G * C, bits, cents);
    TP_CUDA_CHECK_LAUNCH();
    assign();
  }
}

QueryLayout queries_by_cluster(const Tensor& ids, int64_t clusters) {
  const int64_t G = ids.size(0), N = ids.size(1), n = G * N, slots = G * (clusters + 1);
  const Options options{DType::Int64, ids.device()};
  QueryLayout layout{empty({n}, options), empty({slots + 1}, options)};
  CudaContext& ctx = active_context(ids.device());
  ScratchBuffer keys(ctx.allocator(), static_cast<size_t>(n) * sizeof(uint64_t));
  ScratchBuffer sorted(ctx.allocator(), static_cast<size_t>(n) * sizeof(uint64_t));
  if (n > 0) {
    slot_keys_kernel<<<blocks_for(n), kThreads, 0, ctx.stream()>>>(static_cast<const int64_t*>(ids.raw_data()), G, N,
                                                                    clusters, static_cast<uint64_t*>(keys.data()));
    TP_CUDA_CHECK_LAUNCH();
    stable_sort_order(ctx, static_cast<const uint64_t*>(keys.data()), static_cast<uint64_t*>(sorted.data()),
                      static_cast<int64_t*>(layout.order.raw_data()), n, bits_for(static_cast<uint64_t>(slots - 1)));
  }
  run_offsets(ctx, static_cast<const uint64_t*>(sorted.data()), n, slots, static_cast<int64_t*>(layout.offsets.raw_data()));
  return layout;
}

void gather_dot(const Tensor& out, const Tensor& a, const Tensor& rows, const Tensor& topk, const QueryLayout& layout) {
  visit_floating(a.dtype(), "clustered_sparse_dot", [&](auto tag) {
    using T = decltype(tag);
    const Dims d = dims_of(a, rows, topk);
    if (d.G * d.C == 0 || d.N == 0 || d.k == 0) return;
    per_cluster<T>(active_context(out.device()), gather_dot_kernel<T>, static_cast<const T*>(a.raw_data()), rows, topk,
                   layout, d, out);
  });
}

void weighted_rows(const Tensor& out, const Tensor& coef, const Tensor& rows, const Tensor& topk,
                   const QueryLayout& layout) {
  visit_floating(coef.dtype(), "clustered_sparse_weighted_sum", [&](auto tag) {
    using T = decltype(tag);
    const Dims d = dims_of(coef, rows, topk);
    if (d.G * d.C == 0 || d.N == 0 || d.E == 0) return;
    per_cluster<T>(active_context(out.device()), weighted_rows_kernel<T>, static_cast<const T*>(coef.raw_data()), rows,
                   topk, layout, d, out);
  });
}

void scatter_outer(const Tensor& grad_rows, const Tensor& coef, const Tensor& a, const Tensor& topk,
                   const QueryLayout& layout) {
  visit_floating(coef.dtype(), "clustered sparse product", [&](auto tag) {
    using T = decltype(tag);
    const Dims d = dims_of(coef, grad_rows, topk);
    const int64_t pairs = d.G * d.C * d.k;  // (cluster, t) pairs, one partial row each
    if (pairs == 0 || d.N == 0 || d.E == 0) return;
    CudaContext& ctx = active_context(grad_rows.device());
    const Tensor partial = empty({pairs, d.E}, grad_rows.options());
    const Tensor flat = empty({pairs}, {DType::Int64, grad_rows.device()});
    cluster_outer_kernel<<<blocks_for(pairs * d.E), kThreads, 0, ctx.stream()>>>(
        static_cast<const T*>(coef.raw_data()), static_cast<const T*>(a.raw_data()),
        static_cast<const int64_t*>(layout.order.raw_data()), static_cast<const int64_t*>(layout.offsets.raw_data()), d,
        static_cast<T*>(partial.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
    flat_rows_kernel<<<blocks_for(pairs), kThreads, 0, ctx.stream()>>>(static_cast<const int64_t*>(topk.raw_data()), d,
                                                                       static_cast<int64_t*>(flat.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
    // grad_rows (G·S, E) += the partial rows, each into its key's row, in (cluster, t) order.
    index_add("clustered sparse product", make_view(grad_rows, {d.G * d.S, d.E}, {d.E, 1}, grad_rows.offset()), 0,
              flat, partial);
  });
}

}  // namespace tapestry::cuda
