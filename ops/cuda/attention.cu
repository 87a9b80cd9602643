// CUDA kernels of fused attention (ops/cuda/attention.h), after FlashAttention-2 (Dao 2023):
// query tiles × key tiles staged in shared memory, the online softmax's running maximum and sum in
// registers, and in the forward only the output and each query's log-sum-exp written.
//
//   forward_kernel          one block per (g, query tile): Algorithm 1 (the key tiles in turn)
//   row_dot_kernel          D_i = Σ_m dout_im · out_im, one warp per query (Algorithm 2, line 4)
//   key_gradients_kernel    one block per (g, key tile): dk and dv in registers over the query
//                           tiles that see the tile (Algorithm 2's outer loop over key tiles)
//   query_gradients_kernel  one block per (g, query tile): dq in registers over the key tiles
//
// dq is a separate pass rather than Algorithm 2's atomic adds from every key tile: each dq element
// is then written once, by one thread, as a sum in a fixed order, so the gradients have the same
// bits on every run as the rest of the backend's (no float atomics), and no memset must precede
// the kernel. The price is the scores and dP recomputed once more (two of the backward's five tile
// products); with these small SIMT tiles the atomics would have been N · S · E / 32 contended
// float additions per head, not free either.
//
// Head dims: one compile-time width D ∈ {32, 64, 128} holds both E and M (the bucket of max(E, M));
// the tiles are zero beyond E (q, k) and M (v, dout), so every product over D equals the product
// over the real width. Shared tiles are rows of D + 1 elements: the pad puts the 16 rows that a
// half-warp reads at one column in 16 different banks.
//
// Threads: a block has 128 threads as 8 thread rows (ty) × 16 lanes (tx), a warp being two thread
// rows. A thread holds the scores of the tile's rows ty + 8a and columns tx + 16b, so each tile row
// lives in the 16 lanes of one half-warp: row maxima and sums are xor-shuffles within that half,
// and the probabilities a product with V needs are broadcast from their lane by __shfl_sync (no
// shared P tile). Every thread of a block runs every loop (rows beyond N are masked, not skipped),
// so every __syncthreads and full-mask shuffle is reached by all threads.
//
// Shape letters as in ops/cuda/attention.h: G = B · H heads, N queries, S keys, E the query / key
// width, M the value width.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/dispatch.h"
#include "core/error.h"
#include "ops/attention.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/launch.cuh"

namespace tapestry::cuda {

namespace {

constexpr int kTileThreads = 128;
constexpr int kLanes = 16;                           // threads along a tile's keys or columns
constexpr int kThreadRows = kTileThreads / kLanes;  // 8 thread rows along a tile's queries
constexpr unsigned kFullWarp = 0xffffffffu;

// Rows per tile, queries (kRows) and keys (kKeys), for the head-dim bucket D. A thread holds
// kRows / 8 × kKeys / 16 scores (tile_products), so a tile product reads kRows / 8 + kKeys / 16
// shared values per kRows / 8 · kKeys / 16 multiply-adds: 64 × 64 tiles read 12 per 32, where 32 × 32
// tiles read 6 per 8 and left the kernels bound by shared-memory bandwidth (on an H200 the fused
// layer took 1.8× the unfused one's time with them: docs/PERFORMANCE.md). At D = 128 the key tile is
// 32 rows, so that key_gradients_kernel's dk and dv accumulators (2 · kKeys / 8 · D / 16 registers)
// fit without spilling. float64 takes 16 × 16: its path serves the gradient checks, not speed.
template <class T, int D>
struct Tile {
  static constexpr int kRows = 64, kKeys = D <= 64 ? 64 : 32;
};
template <int D>
struct Tile<double, D> {
  static constexpr int kRows = 16, kKeys = 16;
};

struct Sizes {
  int64_t G, H, N, S, E, M;
  bool causal;
  const int64_t* ends;  // (B, N) each query's key end, or null: the key lengths and `causal` decide
};

// Query i of head g sees the keys [0, visible_end): its own end where `ends` is given; else those
// before the key length of its sample (`length`), and with a causal mask those up to i. A row past N
// (a partial tile's padding) sees none.
__device__ int64_t visible_end(const Sizes& z, int64_t g, int64_t length, int64_t i) {
  if (i >= z.N) return 0;
  if (z.ends) return z.ends[g / z.H * z.N + i];
  return z.causal ? min(length, i + 1) : length;
}

// The most keys a query of the tile [i0, i0 + rows) sees: later key tiles are masked for every row
// and skipped (the causal mask's upper triangle, the padding). visible_end grows with i without
// `ends`; with them, any query may see every key.
__device__ int64_t tile_keys(const Sizes& z, int64_t g, int64_t length, int64_t i0, int rows) {
  return z.ends ? z.S : visible_end(z, g, length, min(i0 + rows, z.N) - 1);
}

// Work item w of a kernel over G · tiles (head, tile) pairs: the head g, the tile's first row (of
// `rows` a tile) and the key length of g's sample.
struct Item {
  int64_t g, first, length;
};
__device__ Item item_of(const Sizes& z, const int64_t* lengths, int64_t w, int64_t tiles, int rows) {
  const int64_t g = w / tiles;
  return {g, w % tiles * rows, lengths ? lengths[g / z.H] : z.S};
}

// dst (rows × D, row stride D + 1) = the rows [first, first + rows) of src (count × width,
// contiguous), zero beyond count and width. Consecutive threads read consecutive elements of a row.
template <class T, int D>
__device__ void load_tile(T* dst, const T* src, int rows, int64_t first, int64_t count, int64_t width) {
  for (int idx = threadIdx.x; idx < rows * D; idx += kTileThreads) {
    const int r = idx / D, c = idx % D;
    const int64_t row = first + r;
    dst[r * (D + 1) + c] = row < count && c < width ? src[row * width + c] : T(0);
  }
}

// out[x][y] = a_row · b_row over D, for the rows ty + 8x of `a` and tx + 16y of `b` (tiles of
// load_tile): one thread's part of a tile product A Bᵀ. In a half-warp the 16 b rows fall in 16
// banks (stride D + 1); the a row is one address per half (a broadcast).
template <class T, int D, int X, int Y>
__device__ void tile_products(const T* a, const T* b, T (&out)[X][Y]) {
  const int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
#pragma unroll
  for (int x = 0; x < X; ++x)
#pragma unroll
    for (int y = 0; y < Y; ++y) out[x][y] = T(0);
#pragma unroll 4
  for (int e = 0; e < D; ++e) {
    T av[X], bv[Y];
#pragma unroll
    for (int x = 0; x < X; ++x) av[x] = a[(ty + kThreadRows * x) * (D + 1) + e];
#pragma unroll
    for (int y = 0; y < Y; ++y) bv[y] = b[(tx + kLanes * y) * (D + 1) + e];
#pragma unroll
    for (int x = 0; x < X; ++x)
#pragma unroll
      for (int y = 0; y < Y; ++y) out[x][y] += av[x] * bv[y];
  }
}

// acc[x][c] += Σ_t w[x][t] · rows[t][tx + 16c] over the 16·Y tile rows t, where w[x][t] is the
// register w[x][t / 16] of lane t % 16 of this half-warp (a tile_products layout): P V, dS K,
// Pᵀ dO and dSᵀ Q without a shared copy of P or dS. The rows are read at one row per step, 16
// consecutive columns per half-warp.
template <class T, int D, int X, int Y>
__device__ void accumulate_rows(const T (&w)[X][Y], const T* rows, T (&acc)[X][D / kLanes]) {
  const int tx = threadIdx.x % kLanes, half = (threadIdx.x % 32) & kLanes;
#pragma unroll
  for (int y = 0; y < Y; ++y)
#pragma unroll 4
    for (int t = 0; t < kLanes; ++t) {
      T wt[X];
#pragma unroll
      for (int x = 0; x < X; ++x) wt[x] = __shfl_sync(kFullWarp, w[x][y], half | t);
      const T* row = rows + (kLanes * y + t) * (D + 1);
#pragma unroll
      for (int c = 0; c < D / kLanes; ++c) {
        const T r = row[tx + kLanes * c];
#pragma unroll
        for (int x = 0; x < X; ++x) acc[x][c] += wt[x] * r;
      }
    }
}

// The larger of a and b, NaN if either is: a NaN score makes its query's output NaN, never zeros,
// as on the CPU (fmax would drop the NaN and a row of one NaN score would pass for a masked row).
template <class T>
__device__ T max_keeping_nan(T a, T b) {
  return a != a || a > b ? a : b;
}

// The maximum (max_keeping_nan) and the sum of x over the 16 lanes of this half-warp (one tile row).
template <class T>
__device__ T row_max(T x) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) x = max_keeping_nan(x, __shfl_xor_sync(kFullWarp, x, offset));
  return x;
}
template <class T>
__device__ T row_sum(T x) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullWarp, x, offset);
  return x;
}

// ---- forward: FlashAttention-2, Algorithm 1 ----

// One block per (g, query tile of BR rows), block-strided over G · query_tiles. For each key tile
// the queries can see: S = scale · Q Kᵀ (masked to −inf), the row maximum m' = max(m, rowmax S),
// P = e^(S − m'), l = e^(m − m') l + rowsum P, O = e^(m − m') O + P V; at the end O / l and
// lse = m + log l (Algorithm 1, lines 8–14). A row that sees no key keeps m = −inf, l = 0: out 0,
// lse −inf, and never forms −inf − (−inf).
template <class T, int D>
__global__ void __launch_bounds__(kTileThreads)
    forward_kernel(Sizes z, T scale, const T* q, const T* k, const T* v, const int64_t* lengths, T* out, T* lse,
                   int64_t query_tiles) {
  constexpr int BR = Tile<T, D>::kRows, BC = Tile<T, D>::kKeys;
  constexpr int RA = BR / kThreadRows, KB = BC / kLanes, CB = D / kLanes;
  extern __shared__ __align__(16) unsigned char shared[];
  T* sq = reinterpret_cast<T*>(shared);  // (BR, D) the query tile, row stride D + 1
  T* skv = sq + BR * (D + 1);            // (BC, D) the key tile, then the value tile
  const int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
  const T inf = T(INFINITY);
  for (int64_t w = blockIdx.x; w < z.G * query_tiles; w += gridDim.x) {
    const auto [g, i0, length] = item_of(z, lengths, w, query_tiles, BR);
    __syncthreads();  // the previous item's threads are done with sq and skv
    load_tile<T, D>(sq, q + g * z.N * z.E, BR, i0, z.N, z.E);
    int64_t end[RA];
    T m[RA], l[RA], o[RA][CB];  // l: this lane's part of the row sum (the rescales are row-uniform)
#pragma unroll
    for (int a = 0; a < RA; ++a) {
      end[a] = visible_end(z, g, length, i0 + ty + kThreadRows * a);
      m[a] = -inf;
      l[a] = T(0);
#pragma unroll
      for (int c = 0; c < CB; ++c) o[a][c] = T(0);
    }
    const int64_t keys = tile_keys(z, g, length, i0, BR);
    for (int64_t j0 = 0; j0 < keys; j0 += BC) {
      __syncthreads();  // the previous tile's values have been read
      load_tile<T, D>(skv, k + g * z.S * z.E, BC, j0, z.S, z.E);
      __syncthreads();  // the key tile (and, the first time, the query tile) are in place
      T s[RA][KB];
      tile_products<T, D, RA, KB>(sq, skv, s);  // s[a][b] = q_(i0+ty+8a) · k_(j0+tx+16b)
      __syncthreads();  // every thread has read the key tile
      load_tile<T, D>(skv, v + g * z.S * z.M, BC, j0, z.S, z.M);
#pragma unroll
      for (int a = 0; a < RA; ++a) {
        T tile_max = -inf;
#pragma unroll
        for (int b = 0; b < KB; ++b) {
          s[a][b] = j0 + tx + kLanes * b < end[a] ? scale * s[a][b] : -inf;
          tile_max = max_keeping_nan(tile_max, s[a][b]);
        }
        const T next = max_keeping_nan(m[a], row_max(tile_max));  // NaN stays NaN: out and lse NaN
        if (next == -inf) {  // nothing seen yet: P = 0, and O, l stay 0
#pragma unroll
          for (int b = 0; b < KB; ++b) s[a][b] = T(0);
          continue;
        }
        const T factor = exp(m[a] - next);  // 0 when m = −inf (then O and l are 0 anyway)
        l[a] *= factor;
#pragma unroll
        for (int c = 0; c < CB; ++c) o[a][c] *= factor;
#pragma unroll
        for (int b = 0; b < KB; ++b) {
          s[a][b] = exp(s[a][b] - next);  // masked: e^−inf = 0
          l[a] += s[a][b];
        }
        m[a] = next;
      }
      __syncthreads();  // the value tile is in place
      accumulate_rows<T, D, RA, KB>(s, skv, o);  // O += P V
    }
#pragma unroll
    for (int a = 0; a < RA; ++a) {
      const T sum = row_sum(l[a]);
      const int64_t i = i0 + ty + kThreadRows * a;
      if (i >= z.N) continue;
      const T inv = sum == T(0) ? T(0) : T(1) / sum;  // sum ≥ 1 once a key is seen, or NaN
#pragma unroll
      for (int c = 0; c < CB; ++c)
        if (tx + kLanes * c < z.M) out[(g * z.N + i) * z.M + tx + kLanes * c] = o[a][c] * inv;
      if (tx == 0) lse[g * z.N + i] = sum == T(0) ? -inf : m[a] + log(sum);
    }
  }
}

// ---- backward: FlashAttention-2, Algorithm 2 ----

// d_i = Σ_m dout_im · out_im (Algorithm 2, line 4), less dlse_i where lse is an output (dlse not
// null), one warp per query row.
template <class T>
__global__ void row_dot_kernel(int64_t rows, int64_t M, const T* dout, const T* out, const T* dlse, T* d) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    T acc = 0;
    for (int64_t c = lane; c < M; c += 32) acc += dout[row * M + c] * out[row * M + c];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(kFullWarp, acc, offset);
    if (lane == 0) d[row] = dlse ? acc - dlse[row] : acc;
  }
}

// One block per (g, key tile of BC keys), block-strided over G · key_tiles (Algorithm 2's outer
// loop): the tile's k and v stay in shared memory, dk and dv in registers, while the query tiles
// that see a key of it pass: Sᵀ = scale · K Qᵀ, Pᵀ = e^(Sᵀ − lse) (0 where masked), dV += Pᵀ dO,
// dPᵀ = V dOᵀ, dSᵀ = Pᵀ ⊙ (dPᵀ − d), dK += scale · dSᵀ Q (lines 10–16, transposed so that a thread
// holds keys ty + 8a and queries tx + 16b). Writes every dk and dv row of the tile, zeros where no
// query sees the key.
template <class T, int D>
__global__ void __launch_bounds__(kTileThreads)
    key_gradients_kernel(Sizes z, T scale, const T* q, const T* k, const T* v, const int64_t* lengths,
                         const T* dout, const T* lse, const T* d, T* dk, T* dv, int64_t key_tiles) {
  constexpr int BR = Tile<T, D>::kRows, BC = Tile<T, D>::kKeys;
  constexpr int KA = BC / kThreadRows, QB = BR / kLanes, CB = D / kLanes;
  extern __shared__ __align__(16) unsigned char shared[];
  T* sk = reinterpret_cast<T*>(shared);  // (BC, D) the key tile, row stride D + 1
  T* sv = sk + BC * (D + 1);             // (BC, D) the value tile
  T* sq = sv + BC * (D + 1);             // (BR, D) the query tile
  T* sdo = sq + BR * (D + 1);            // (BR, D) the output gradient's tile
  T* slse = sdo + BR * (D + 1);          // (BR,) lse of the tile's queries
  T* sd = slse + BR;                     // (BR,) d of the tile's queries
  const int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
  for (int64_t w = blockIdx.x; w < z.G * key_tiles; w += gridDim.x) {
    const auto [g, j0, length] = item_of(z, lengths, w, key_tiles, BC);
    __syncthreads();  // the previous item's threads are done with the tiles
    load_tile<T, D>(sk, k + g * z.S * z.E, BC, j0, z.S, z.E);
    load_tile<T, D>(sv, v + g * z.S * z.M, BC, j0, z.S, z.M);
    T dk_acc[KA][CB], dv_acc[KA][CB];
#pragma unroll
    for (int a = 0; a < KA; ++a)
#pragma unroll
      for (int c = 0; c < CB; ++c) dk_acc[a][c] = dv_acc[a][c] = T(0);
    // The queries that see a key of the tile: none when the tile is all padding; with a causal
    // mask those from j0 on (the query tiles before j0's are skipped); else all.
    const int64_t first = z.ends ? 0 : length <= j0 ? z.N : z.causal ? j0 / BR * BR : 0;
    for (int64_t i0 = first; i0 < z.N; i0 += BR) {
      __syncthreads();  // the previous query tile has been read
      load_tile<T, D>(sq, q + g * z.N * z.E, BR, i0, z.N, z.E);
      load_tile<T, D>(sdo, dout + g * z.N * z.M, BR, i0, z.N, z.M);
      for (int r = threadIdx.x; r < BR; r += kTileThreads) {
        const bool real = i0 + r < z.N;
        slse[r] = real ? lse[g * z.N + i0 + r] : -T(INFINITY);
        sd[r] = real ? d[g * z.N + i0 + r] : T(0);
      }
      __syncthreads();  // the query tile (and, the first time, the key tile) are in place
      T p[KA][QB], ds[KA][QB];
      tile_products<T, D, KA, QB>(sk, sq, p);    // k_(j0+ty+8a) · q_(i0+tx+16b)
      tile_products<T, D, KA, QB>(sv, sdo, ds);  // dp = v_j · dout_i
#pragma unroll
      for (int a = 0; a < KA; ++a)
#pragma unroll
        for (int b = 0; b < QB; ++b) {
          const int r = tx + kLanes * b;
          const bool seen = j0 + ty + kThreadRows * a < visible_end(z, g, length, i0 + r);  // then lse is finite
          p[a][b] = seen ? exp(scale * p[a][b] - slse[r]) : T(0);
          ds[a][b] = p[a][b] * (ds[a][b] - sd[r]);
        }
      accumulate_rows<T, D, KA, QB>(p, sdo, dv_acc);  // dV += Pᵀ dO
      accumulate_rows<T, D, KA, QB>(ds, sq, dk_acc);  // dK += dSᵀ Q (scale at the end)
    }
#pragma unroll
    for (int a = 0; a < KA; ++a) {
      const int64_t j = j0 + ty + kThreadRows * a;
      if (j >= z.S) continue;
#pragma unroll
      for (int c = 0; c < CB; ++c) {
        const int col = tx + kLanes * c;
        if (col < z.E) dk[(g * z.S + j) * z.E + col] = scale * dk_acc[a][c];
        if (col < z.M) dv[(g * z.S + j) * z.M + col] = dv_acc[a][c];
      }
    }
  }
}

// One block per (g, query tile), block-strided over G · query_tiles: dq_i = scale Σ_j ds_ij k_j over
// the key tiles the tile's queries see, with S, P, dP and dS recomputed as key_gradients_kernel's
// (the same products in the same order, so the same bits). Writes every dq row, zeros for a query
// that sees no key.
template <class T, int D>
__global__ void __launch_bounds__(kTileThreads)
    query_gradients_kernel(Sizes z, T scale, const T* q, const T* k, const T* v, const int64_t* lengths,
                           const T* dout, const T* lse, const T* d, T* dq, int64_t query_tiles) {
  constexpr int BR = Tile<T, D>::kRows, BC = Tile<T, D>::kKeys;
  constexpr int RA = BR / kThreadRows, KB = BC / kLanes, CB = D / kLanes;
  extern __shared__ __align__(16) unsigned char shared[];
  T* sq = reinterpret_cast<T*>(shared);  // (BR, D) the query tile, row stride D + 1
  T* sdo = sq + BR * (D + 1);            // (BR, D) the output gradient's tile
  T* sk = sdo + BR * (D + 1);            // (BC, D) the key tile
  T* sv = sk + BC * (D + 1);             // (BC, D) the value tile
  const int tx = threadIdx.x % kLanes, ty = threadIdx.x / kLanes;
  for (int64_t w = blockIdx.x; w < z.G * query_tiles; w += gridDim.x) {
    const auto [g, i0, length] = item_of(z, lengths, w, query_tiles, BR);
    __syncthreads();  // the previous item's threads are done with the tiles
    load_tile<T, D>(sq, q + g * z.N * z.E, BR, i0, z.N, z.E);
    load_tile<T, D>(sdo, dout + g * z.N * z.M, BR, i0, z.N, z.M);
    int64_t end[RA];
    T row_lse[RA], row_d[RA], acc[RA][CB];
#pragma unroll
    for (int a = 0; a < RA; ++a) {
      const int64_t i = i0 + ty + kThreadRows * a;
      end[a] = visible_end(z, g, length, i);
      row_lse[a] = i < z.N ? lse[g * z.N + i] : T(0);  // read only where a key is seen
      row_d[a] = i < z.N ? d[g * z.N + i] : T(0);
#pragma unroll
      for (int c = 0; c < CB; ++c) acc[a][c] = T(0);
    }
    const int64_t keys = tile_keys(z, g, length, i0, BR);
    for (int64_t j0 = 0; j0 < keys; j0 += BC) {
      __syncthreads();  // the previous key tile has been read
      load_tile<T, D>(sk, k + g * z.S * z.E, BC, j0, z.S, z.E);
      load_tile<T, D>(sv, v + g * z.S * z.M, BC, j0, z.S, z.M);
      __syncthreads();  // the key tile (and, the first time, the query tile) are in place
      T ds[RA][KB], dp[RA][KB];
      tile_products<T, D, RA, KB>(sq, sk, ds);    // q_(i0+ty+8a) · k_(j0+tx+16b)
      tile_products<T, D, RA, KB>(sdo, sv, dp);   // dout_i · v_j
#pragma unroll
      for (int a = 0; a < RA; ++a)
#pragma unroll
        for (int b = 0; b < KB; ++b) {
          const bool seen = j0 + tx + kLanes * b < end[a];
          const T p = seen ? exp(scale * ds[a][b] - row_lse[a]) : T(0);
          ds[a][b] = p * (dp[a][b] - row_d[a]);
        }
      accumulate_rows<T, D, RA, KB>(ds, sk, acc);  // dQ += dS K (scale at the end)
    }
#pragma unroll
    for (int a = 0; a < RA; ++a) {
      const int64_t i = i0 + ty + kThreadRows * a;
      if (i >= z.N) continue;
#pragma unroll
      for (int c = 0; c < CB; ++c)
        if (tx + kLanes * c < z.E) dq[(g * z.N + i) * z.E + tx + kLanes * c] = scale * acc[a][c];
    }
  }
}

Sizes sizes_of(const FusedAttentionShape& s, const Tensor& key_ends) {
  return {s.B * s.H, s.H, s.N, s.S, s.E, s.M, s.causal, key_ends.defined() ? key_ends.data<int64_t>() : nullptr};
}

// Calls f with the head-dim bucket D (a std::integral_constant) that holds E and M.
static_assert(kFusedAttentionMaxHeadDim == 128, "the buckets below end at kFusedAttentionMaxHeadDim");
template <class F>
void with_head_dim(const Sizes& z, F&& f) {
  const int64_t width = std::max(z.E, z.M);
  if (width <= 32) f(std::integral_constant<int, 32>{});
  else if (width <= 64) f(std::integral_constant<int, 64>{});
  else if (width <= kFusedAttentionMaxHeadDim) f(std::integral_constant<int, 128>{});
  else fail("fused_attention", "on a GPU the head dims must be at most ", kFusedAttentionMaxHeadDim, ", got E = ", z.E,
            ", M = ", z.M);
}

// The bytes of shared memory of a kernel that holds `tiles` tiles of kRows or kKeys rows of D + 1.
template <class T, int D>
constexpr size_t tile_bytes(int query_tiles, int key_tiles) {
  return static_cast<size_t>(query_tiles * Tile<T, D>::kRows + key_tiles * Tile<T, D>::kKeys) * (D + 1) * sizeof(T);
}

// Launches a tiled kernel over `items` (g, tile) pairs with `bytes` of dynamic shared memory.
// Above 48 KiB a kernel must opt in (cudaFuncAttributeMaxDynamicSharedMemorySize); every launch
// sets the attribute, which costs a host call and keeps no state here.
template <class... Params, class... Args>
void launch_tiled(void (*kernel)(Params...), int64_t items, size_t bytes, cudaStream_t stream, Args... args) {
  if (items == 0) return;
  TP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  kernel<<<static_cast<unsigned>(std::min(items, kMaxBlocks)), kTileThreads, bytes, stream>>>(args...);
  TP_CUDA_CHECK_LAUNCH();
}

const int64_t* lengths_of(const Tensor& key_lengths) {
  return key_lengths.defined() ? key_lengths.data<int64_t>() : nullptr;
}

}  // namespace

void fused_attention_forward(const FusedAttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& key_lengths, const Tensor& key_ends, const Tensor& out, const Tensor& lse) {
  const Sizes z = sizes_of(s, key_ends);
  if (z.G * z.N == 0) return;
  CudaContext& ctx = active_context(q.device());
  visit_floating(q.dtype(), "fused_attention", [&](auto tag) {
    using T = decltype(tag);
    with_head_dim(z, [&](auto bucket) {
      constexpr int D = decltype(bucket)::value;
      const int64_t query_tiles = (z.N + Tile<T, D>::kRows - 1) / Tile<T, D>::kRows;
      launch_tiled(forward_kernel<T, D>, z.G * query_tiles, tile_bytes<T, D>(1, 1), ctx.stream(), z, T(s.scale),
                   q.data<T>(), k.data<T>(), v.data<T>(), lengths_of(key_lengths), out.data<T>(), lse.data<T>(),
                   query_tiles);
    });
  });
}

void fused_attention_backward(const FusedAttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& key_lengths, const Tensor& key_ends, const Tensor& out, const Tensor& lse,
                              const Tensor& dout, const Tensor& dlse, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv) {
  const Sizes z = sizes_of(s, key_ends);
  if (z.G == 0) return;
  CudaContext& ctx = active_context(q.device());
  visit_floating(q.dtype(), "fused_attention", [&](auto tag) {
    using T = decltype(tag);
    ScratchBuffer row_terms(ctx.allocator(), static_cast<size_t>(std::max<int64_t>(z.G * z.N, 1)) * sizeof(T));
    T* d = static_cast<T*>(row_terms.data());  // (G, N) d_i = dout_i · out_i
    if (z.N > 0) {
      row_dot_kernel<T><<<blocks_for(z.G * z.N * 32), kThreads, 0, ctx.stream()>>>(
          z.G * z.N, z.M, dout.data<T>(), out.data<T>(), dlse.defined() ? dlse.data<T>() : nullptr, d);
      TP_CUDA_CHECK_LAUNCH();
    }
    with_head_dim(z, [&](auto bucket) {
      constexpr int D = decltype(bucket)::value;
      const int64_t query_tiles = (z.N + Tile<T, D>::kRows - 1) / Tile<T, D>::kRows;
      const int64_t key_tiles = (z.S + Tile<T, D>::kKeys - 1) / Tile<T, D>::kKeys;
      // dk and dv: every key row is written, zeros where N = 0 or no query sees the key
      launch_tiled(key_gradients_kernel<T, D>, z.G * key_tiles,
                   tile_bytes<T, D>(2, 2) + 2 * Tile<T, D>::kRows * sizeof(T), ctx.stream(), z, T(s.scale), q.data<T>(),
                   k.data<T>(), v.data<T>(), lengths_of(key_lengths), dout.data<T>(), lse.data<T>(),
                   static_cast<const T*>(d), dk.data<T>(), dv.data<T>(), key_tiles);
      launch_tiled(query_gradients_kernel<T, D>, z.G * query_tiles, tile_bytes<T, D>(2, 2), ctx.stream(), z,
                   T(s.scale), q.data<T>(), k.data<T>(), v.data<T>(), lengths_of(key_lengths), dout.data<T>(),
                   lse.data<T>(), static_cast<const T*>(d), dq.data<T>(), query_tiles);
    });
  });
}

}  // namespace tapestry::cuda
