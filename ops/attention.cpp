// Fused attention (ops/attention.h): checks, device dispatch, the CPU kernels and the backward.
// Shapes, as the CUDA launchers take them (ops/cuda/attention.h): q (G, N, E), k (G, S, E),
// v (G, S, M), out and dout (G, N, M), lse (G, N), with G = B · H.
#include "ops/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu_capability.h"
#include "core/creation.h"
#include "core/profiler.h"
#include "ops/autocast.h"
#include "ops/blas.h"
#include "ops/common.h"
#include "ops/creation.h"
#include "ops/cuda/attention.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/fast_exp.h"
#include "ops/index.h"
#include "ops/shape.h"
#include "ops/tile_gemm.h"

#if TP_CPU_DISPATCH
#include <immintrin.h>
#endif

namespace tapestry {

namespace {

using Shape4 = cuda::FusedAttentionShape;

// A tile is kQueryTile queries × kKeyTile keys: each BLAS call is then large enough to run near its
// peak, and a thread's workspace (three such tiles) stays at 0.75 MiB in float32 whatever N is.
constexpr int64_t kQueryTile = 128;
constexpr int64_t kKeyTile = 512;

// A row stride for a transposed operand of n columns: n and a cache line more, so that its rows,
// which tile_gemm reads one after another, do not all fall in the same set of the L1 cache (a
// stride of a multiple of 4 KiB maps every row to one set).
constexpr int64_t padded(int64_t n) { return n + 16; }

// Which keys each query sees, as fused_attention, fused_attention_ends and fused_attention_rows were
// given it: the key lengths (B,) with s.causal, or each query's own end (B, N); and, for
// fused_attention_rows, the rows of k and v that are each query item's keys (B, S), of item
// b / per_item. int64 on the tensors' device, each undefined when not given.
struct KeyLimits {
  Tensor lengths, ends, rows;
  int64_t per_item = 1;
};

// fused_attention_rows' keys: key j of query item b is row index[b · S + j] of k's and v's item
// b / per_item; a null index: row j of item b (every other op).
struct KeyRows {
  const int64_t* index = nullptr;
  int64_t per_item = 1, S = 0;
};

// Query i of head g sees the keys [0, end(g, i)).
struct Visibility {
  const Shape4& s;
  const int64_t* lengths;  // (B,), or null: no key padding
  const int64_t* ends;     // (B, N), or null: the lengths and s.causal decide
  Visibility(const Shape4& s, const KeyLimits& limits)
      : s(s),
        lengths(limits.lengths.defined() ? limits.lengths.data<int64_t>() : nullptr),
        ends(limits.ends.defined() ? limits.ends.data<int64_t>() : nullptr) {}
  int64_t end(int64_t g, int64_t i) const {
    if (ends) return ends[g / s.H * s.N + i];
    const int64_t e = lengths ? lengths[g / s.H] : s.S;
    return s.causal ? std::min(e, i + 1) : e;
  }
  // The most keys any of the queries [i0, i0 + rows) sees: key tiles from there on are skipped.
  int64_t tile_end(int64_t g, int64_t i0, int64_t rows) const {
    int64_t most = 0;
    for (int64_t r = 0; r < rows; ++r) most = std::max(most, end(g, i0 + r));
    return most;
  }
};

// ---- a tile's elementwise work, compiled for each CPU capability (core/cpu_capability.h) ----

// One tile of scores, rows × cols, row-major; row r sees its first seen[r] columns.
template <class T>
struct Tile {
  T* p;
  int64_t rows, cols;
  const int64_t* seen;
};

constexpr int64_t kLanes = 16;

// Σ x[0, n) in kLanes partial sums joined in a fixed tree: the same bits at every vector width.
template <class T>
[[gnu::always_inline]] inline T lane_sum(const T* x, int64_t n) {
  T lanes[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= n; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += x[c + l];
  for (int64_t l = 0; c + l < n; ++l) lanes[l] += x[c + l];
  for (int64_t width = kLanes / 2; width > 0; width /= 2)
    for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

// The online softmax over one key tile: the scores become e^(s − m), m each row's running maximum;
// the running sums take the tile's, and a row of o (the output so far, M wide) is rescaled when its
// maximum rises. `fused`: the exponential's multiply-adds fused (ops/fast_exp.h), for AVX2 and AVX-512.
template <class T, bool fused>
[[gnu::always_inline]] inline void online_softmax(const Tile<T>& t, T* row_max, T* row_sum, T* o, int64_t M) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < t.rows; ++r) {
    T* pr = t.p + r * t.cols;
    const int64_t seen = t.seen[r];
    T m = row_max[r];
    int nan = 0;  // a NaN score makes the query's output NaN (docs/PORTING.md, "NaN"), never zeros
#pragma omp simd reduction(max : m) reduction(| : nan)
    for (int64_t c = 0; c < seen; ++c) {
      m = pr[c] > m ? pr[c] : m;
      nan |= pr[c] != pr[c];
    }
    if (nan) m = std::numeric_limits<T>::quiet_NaN();
    T sum = 0;
    if (m != -inf) {
#pragma omp simd
      for (int64_t c = 0; c < seen; ++c) pr[c] = exp_nonpositive_of<T, fused>(pr[c] - m);
      sum = lane_sum(pr, seen);
    }
    std::fill(pr + (m == -inf ? 0 : seen), pr + t.cols, T(0));
    // The running sum and output were taken against the old maximum: rescale them to the new one.
    if (row_max[r] != m && row_max[r] != -inf) {
      const T factor = exp_nonpositive_of<T, fused>(row_max[r] - m);
      row_sum[r] *= factor;
      for (int64_t c = 0; c < M; ++c) o[r * M + c] *= factor;
    }
    row_max[r] = m;
    row_sum[r] += sum;
  }
}

// p_ij = e^(s_ij − lse_i) in place of the tile's scores, 0 where hidden (lse: the tile's rows').
template <class T, bool fused>
[[gnu::always_inline]] inline void probabilities(const Tile<T>& t, const T* lse) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  for (int64_t r = 0; r < t.rows; ++r) {
    T* pr = t.p + r * t.cols;
    const T l = lse[r];
    const int64_t seen = l == -inf ? 0 : t.seen[r];
#pragma omp simd
    for (int64_t c = 0; c < seen; ++c) pr[c] = exp_nonpositive_of<T, fused>(std::min(pr[c] - l, T(0)));
    std::fill(pr + seen, pr + t.cols, T(0));
  }
}

// dS = P ⊙ (dP − D) in place of dP, whose rows are as wide as the tile's (d: the tile's rows' D_i).
template <class T>
[[gnu::always_inline]] inline void score_gradients(const Tile<T>& t, T* dp, const T* d) {
  for (int64_t r = 0; r < t.rows; ++r) {
    const T di = d[r];
    T* dr = dp + r * t.cols;
    const T* pr = t.p + r * t.cols;
#pragma omp simd
    for (int64_t c = 0; c < t.cols; ++c) dr[c] = pr[c] * (dr[c] - di);
  }
}

// The three, as one capability compiled them.
template <class T>
struct TileKernels {
  void (*online_softmax)(const Tile<T>&, T*, T*, T*, int64_t);
  void (*probabilities)(const Tile<T>&, const T*);
  void (*score_gradients)(const Tile<T>&, T*, const T*);
};

template <class T>
void online_softmax_baseline(const Tile<T>& t, T* row_max, T* row_sum, T* o, int64_t M) {
  online_softmax<T, false>(t, row_max, row_sum, o, M);
}
template <class T>
void probabilities_baseline(const Tile<T>& t, const T* lse) {
  probabilities<T, false>(t, lse);
}
template <class T>
void score_gradients_baseline(const Tile<T>& t, T* dp, const T* d) {
  score_gradients(t, dp, d);
}

#if TP_CPU_DISPATCH
TP_TARGET_AVX2 void online_softmax_avx2(const Tile<float>& t, float* row_max, float* row_sum, float* o, int64_t M) {
  online_softmax<float, true>(t, row_max, row_sum, o, M);
}
TP_TARGET_AVX2 void probabilities_avx2(const Tile<float>& t, const float* lse) { probabilities<float, true>(t, lse); }
TP_TARGET_AVX2 void score_gradients_avx2(const Tile<float>& t, float* dp, const float* d) {
  score_gradients(t, dp, d);
}

// AVX-512: a row's last seen % 16 columns as one masked vector, its reductions in registers. The loops
// above leave those columns to scalar loops, and there GCC keeps the reductions (the maximum, the sums)
// in memory, stored as a vector and read back lane by lane, each read waiting for that store (a failed
// store-to-load forward): at 62 keys of a head of 16 that took most of the softmax's time. These two
// give the loops' values to the bit: the same exponential, operation for operation (ops/fast_exp.h),
// exact maxima, the same tree of sums.

// The lanes of [c, c + 16) below n.
TP_TARGET_AVX512 inline __mmask16 lanes_below(int64_t c, int64_t n) {
  return static_cast<__mmask16>(n - c >= 16 ? 0xFFFF : (1u << (n - c)) - 1);
}

// The low or the high 8 lanes (the maskz form: GCC 12 warns that the plain one's undefined
// pass-through may be uninitialised, as it does for _mm512_max_ps and _mm512_reduce_max_ps).
TP_TARGET_AVX512 inline __m256 half_avx512(__m512 x, bool high) {
  return high ? _mm512_maskz_extractf32x8_ps(0xFF, x, 1) : _mm512_maskz_extractf32x8_ps(0xFF, x, 0);
}

// lane_sum's tree over one vector of 16 lanes: halves added down to one.
TP_TARGET_AVX512 inline float tree_sum_avx512(__m512 lanes) {
  const __m256 h = _mm256_add_ps(half_avx512(lanes, false), half_avx512(lanes, true));
  const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  const __m128 pairs = _mm_add_ps(q, _mm_movehl_ps(q, q));  // lanes 0 + 2 and 1 + 3
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1)));
}

// The lanes of [c, c + 16) below n, none where c ≥ n.
TP_TARGET_AVX512 inline __mmask16 lanes_within(int64_t c, int64_t n) { return n <= c ? 0 : lanes_below(c, n); }

// The rows of a tile that these kernels interleave: one row's maximum, exponentials and sums are
// chains of dependent instructions, and a row at a time waited on each of them (at 65 keys of a head
// of 16, the softmax took 40 % of fused attention's forward). Interleaved, four rows' chains overlap;
// each row's operations and their order are those of a row alone, so the bits are too.
constexpr int64_t kInterleaved = 4;

// online_softmax over rows [r0, r0 + R) of the tile. A row that sees fewer columns than the widest
// of them reads its remaining vectors as hidden: their maximum is the row's and their e^(s − m) is
// exactly 0, added to sums that are not negative, which leaves them as they were.
template <int R>
TP_TARGET_AVX512 void online_softmax_rows_avx512(const Tile<float>& t, int64_t r0, float* row_max, float* row_sum,
                                                 float* o, int64_t M) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const __m512 hidden = _mm512_set1_ps(-inf);  // the masked-off lanes: their e^(s − m) is 0
  float* pr[R];
  int64_t seen[R], widest = 0;
  __m512 maxima[R];
  __mmask16 nan[R];
  for (int r = 0; r < R; ++r) {
    pr[r] = t.p + (r0 + r) * t.cols;
    seen[r] = t.seen[r0 + r];
    widest = std::max(widest, seen[r]);
    maxima[r] = _mm512_set1_ps(row_max[r0 + r]);
    nan[r] = 0;
  }
  for (int64_t c = 0; c < widest; c += 16)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __m512 s = _mm512_mask_loadu_ps(hidden, lanes_within(c, seen[r]), pr[r] + c);
      maxima[r] = _mm512_maskz_max_ps(0xFFFF, s, maxima[r]);  // s > max ? s : max
      nan[r] |= _mm512_cmp_ps_mask(s, s, _CMP_UNORD_Q);
    }
  float m[R];
  __m512 mv[R], lanes[R];
  for (int r = 0; r < R; ++r) {
    const __m256 h = _mm256_max_ps(half_avx512(maxima[r], false), half_avx512(maxima[r], true));
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    const float largest = _mm_cvtss_f32(_mm_max_ss(q, _mm_shuffle_ps(q, q, 1)));
    m[r] = nan[r] ? std::numeric_limits<float>::quiet_NaN() : largest;
    if (m[r] == -inf) seen[r] = 0;  // no key seen: no exponential stored, the sum 0
    mv[r] = _mm512_set1_ps(m[r]);
    lanes[r] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < widest; c += 16)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __mmask16 k = lanes_within(c, seen[r]);
      const __m512 e = exp_nonpositive_avx512(_mm512_sub_ps(_mm512_mask_loadu_ps(hidden, k, pr[r] + c), mv[r]));
      _mm512_mask_storeu_ps(pr[r] + c, k, e);
      lanes[r] = _mm512_add_ps(lanes[r], e);
    }
  for (int r = 0; r < R; ++r) {
    const int64_t i = r0 + r;
    const float sum = m[r] == -inf ? 0.0f : tree_sum_avx512(lanes[r]);
    std::fill(pr[r] + seen[r], pr[r] + t.cols, 0.0f);
    if (row_max[i] != m[r] && row_max[i] != -inf) {  // as online_softmax
      const float factor = exp_nonpositive_as<true>(row_max[i] - m[r]);
      row_sum[i] *= factor;
      for (int64_t c = 0; c < M; ++c) o[i * M + c] *= factor;
    }
    row_max[i] = m[r];
    row_sum[i] += sum;
  }
}

TP_TARGET_AVX512 void online_softmax_avx512(const Tile<float>& t, float* row_max, float* row_sum, float* o,
                                            int64_t M) {
  int64_t r = 0;
  for (; r + kInterleaved <= t.rows; r += kInterleaved)
    online_softmax_rows_avx512<kInterleaved>(t, r, row_max, row_sum, o, M);
  for (; r < t.rows; ++r) online_softmax_rows_avx512<1>(t, r, row_max, row_sum, o, M);
}

// probabilities over rows [r0, r0 + R) of the tile, interleaved as online_softmax_rows_avx512's.
template <int R>
TP_TARGET_AVX512 void probabilities_rows_avx512(const Tile<float>& t, int64_t r0, const float* lse) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const __m512 zero = _mm512_setzero_ps();
  float* pr[R];
  int64_t seen[R], widest = 0;
  __m512 l[R];
  for (int r = 0; r < R; ++r) {
    pr[r] = t.p + (r0 + r) * t.cols;
    seen[r] = lse[r0 + r] == -inf ? 0 : t.seen[r0 + r];
    widest = std::max(widest, seen[r]);
    l[r] = _mm512_set1_ps(lse[r0 + r]);
  }
  for (int64_t c = 0; c < widest; c += 16)
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const __mmask16 k = lanes_within(c, seen[r]);
      // std::min(x, 0): 0 < x ? 0 : x (a NaN x stays)
      const __m512 x = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, pr[r] + c), l[r]);
      const __m512 capped = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(zero, x, _CMP_LT_OQ), x, zero);
      _mm512_mask_storeu_ps(pr[r] + c, k, exp_nonpositive_avx512(capped));
    }
  for (int r = 0; r < R; ++r) std::fill(pr[r] + seen[r], pr[r] + t.cols, 0.0f);
}

TP_TARGET_AVX512 void probabilities_avx512(const Tile<float>& t, const float* lse) {
  int64_t r = 0;
  for (; r + kInterleaved <= t.rows; r += kInterleaved) probabilities_rows_avx512<kInterleaved>(t, r, lse);
  for (; r < t.rows; ++r) probabilities_rows_avx512<1>(t, r, lse);
}
TP_TARGET_AVX512 void score_gradients_avx512(const Tile<float>& t, float* dp, const float* d) {
  score_gradients(t, dp, d);
}
#endif

// float32 takes the widest capability in use; float64 (gradchecks) the baseline.
template <class T>
TileKernels<T> tile_kernels() {
#if TP_CPU_DISPATCH
  if constexpr (std::is_same_v<T, float>) {
    switch (cpu_capability()) {
      case CpuCapability::Avx512: return {online_softmax_avx512, probabilities_avx512, score_gradients_avx512};
      case CpuCapability::Avx2: return {online_softmax_avx2, probabilities_avx2, score_gradients_avx2};
      case CpuCapability::Baseline: break;
    }
  }
#endif
  return {online_softmax_baseline<T>, probabilities_baseline<T>, score_gradients_baseline<T>};
}

// q, k or v as the CPU kernels read it, or out, dq, dk or dv as they write it: a (B, H, rows, F) tensor
// with any strides whose last is 1, so that heads split from a (B, N, H·F) projection by a permute are
// read where they lie, and the output and gradients are written in that layout (in_layout_of), not
// copied to it and from it.
template <class T>
struct Rows {
  T* data;                      // T const for the tensors read, not for those written
  int64_t H, batch, head, row;  // heads; the strides of dims 0, 1 and 2
  KeyRows pick;                 // k and v of fused_attention_rows: its keys' rows; else none
  explicit Rows(const Tensor& t, const KeyRows& pick = {})
      : data(t.data<std::remove_const_t<T>>()),
        H(t.size(1)),
        batch(t.strides()[0]),
        head(t.strides()[1]),
        row(t.strides()[2]),
        pick(pick) {}
  // Row r of head g (g = b · H + h): with pick, key r of query item b.
  T* at(int64_t g, int64_t r) const {
    const int64_t b = g / H;
    if (!pick.index) return data + b * batch + g % H * head + r * row;
    return data + b / pick.per_item * batch + g % H * head + pick.index[b * pick.S + r] * row;
  }
};

// Keys [j0, j0 + cols) of head g, `width` wide, transposed into dst (width × cols, row stride ld).
template <class T>
void transpose_keys(const Rows<const T>& x, int64_t g, int64_t j0, int64_t cols, int64_t width, T* dst, int64_t ld) {
  if (!x.pick.index) return transpose_rows(cols, width, x.at(g, j0), x.row, dst, ld);
  for (int64_t j = 0; j < cols; ++j) {
    const T* src = x.at(g, j0 + j);
    for (int64_t c = 0; c < width; ++c) dst[c * ld + j] = src[c];
  }
}

// Keys [j0, j0 + cols) of head g as tile_gemm reads them: where they lie, at their row stride, or,
// picked rows, copied into buf (cols × width).
template <class T>
std::pair<const T*, int64_t> key_tile(const Rows<const T>& x, int64_t g, int64_t j0, int64_t cols, int64_t width,
                                      T* buf) {
  if (!x.pick.index) return {x.at(g, j0), x.row};
  for (int64_t j = 0; j < cols; ++j) std::copy(x.at(g, j0 + j), x.at(g, j0 + j) + width, buf + j * width);
  return {buf, width};
}

// Whether the CPU kernels read t as it is: its last dim contiguous and its rows at a stride BLAS takes.
bool rows_readable(const Tensor& t) {
  return t.strides()[3] == 1 && t.strides()[2] >= std::max<int64_t>(1, t.size(3));
}

// A new (B, H, X, F) tensor in `like`'s layout of heads (like: (B, H, X, ·)): where like's heads lie
// within its rows (heads split from a (B, X, H·F) projection), a permuted (B, X, H, F) tensor, which
// the heads' merge (a permute and a reshape) then takes without a copy; contiguous otherwise.
Tensor in_layout_of(const Tensor& like, const Shape& shape, DType dtype) {
  const Options options{dtype, like.device()};
  if (like.strides()[1] >= like.strides()[2]) return empty(shape, options);
  return permute(empty({shape[0], shape[2], shape[1], shape[3]}, options), {0, 2, 1, 3});
}

// A thread's scratch of n elements, not initialised (each kernel writes a tile before it reads it) and
// no larger than the call's tiles: a call over 65 keys zeroed 0.25 MiB tiles it used a 16th of. Not a
// ScratchBuffer from the CPU's caching allocator (core/device.h): with it, fused attention alone at
// 65 keys ran 4–10 % slower (one-off runs), so these thread-local tiles stay outside its accounting.
template <class T>
class Workspace {
 public:
  explicit Workspace(int64_t n) : data_(new T[static_cast<size_t>(n)]) {}
  T* data() const { return data_.get(); }

 private:
  std::unique_ptr<T[]> data_;
};

// ---- forward: one query tile at a time, its key tiles in turn, with an online softmax ----

template <class T>
void forward_cpu(const Shape4& s, const Rows<const T>& q, const Rows<const T>& k, const Rows<const T>& v,
                 const KeyLimits& limits, const Rows<T>& out, T* lse) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  const Visibility visible(s, limits);
  const TileKernels<T> kernels = tile_kernels<T>();
  const int64_t G = s.B * s.H, tiles = (s.N + kQueryTile - 1) / kQueryTile;
  const SingleThreadedBlas one_thread;  // where tile_gemm runs BLAS (ops/tile_gemm.h)
#pragma omp parallel
  {
    const Workspace<T> p(std::min(kQueryTile, s.N) * std::min(kKeyTile, s.S));
    std::vector<T> row_max(kQueryTile), row_sum(kQueryTile);
    std::vector<T> o(kQueryTile * s.M);  // the tile's output rows while their sums run
    const int64_t ldkt = padded(s.S);
    const Workspace<T> kt(s.E * ldkt);  // (E, S), row stride ldkt: Kᵀ of the head this thread works on
    int64_t kt_head = -1;
    std::vector<int64_t> seen(kQueryTile);
    std::vector<T> v_rows(v.pick.index ? kKeyTile * s.M : 0);  // a key tile's picked rows of V
#pragma omp for schedule(dynamic)
    for (int64_t w = 0; w < G * tiles; ++w) {
      const int64_t g = w / tiles, i0 = (w % tiles) * kQueryTile, rows = std::min(kQueryTile, s.N - i0);
      const T* qt = q.at(g, i0);
      std::fill(o.begin(), o.end(), T(0));
      std::fill(row_max.begin(), row_max.end(), -inf);
      std::fill(row_sum.begin(), row_sum.end(), T(0));
      const int64_t keys = visible.tile_end(g, i0, rows);
      if (kt_head != g) transpose_keys(k, g, 0, s.S, s.E, kt.data(), ldkt), kt_head = g;
      for (int64_t j0 = 0; j0 < keys; j0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, keys - j0);
        // s_ij = scale · q_i · k_j for the tile (eq. 1 of the clustered-attention paper, before softmax)
        tile_gemm<T>(rows, cols, s.E, T(s.scale), qt, q.row, 1, kt.data() + j0, ldkt, T(0), p.data(), cols);
        for (int64_t r = 0; r < rows; ++r) seen[r] = std::clamp<int64_t>(visible.end(g, i0 + r) - j0, 0, cols);
        kernels.online_softmax({p.data(), rows, cols, seen.data()}, row_max.data(), row_sum.data(), o.data(), s.M);
        const auto [vt, ldv] = key_tile(v, g, j0, cols, s.M, v_rows.data());
        tile_gemm<T>(rows, s.M, cols, T(1), p.data(), cols, 1, vt, ldv, T(1), o.data(), s.M);  // O += P V
      }
      for (int64_t r = 0; r < rows; ++r) {
        const bool none = row_sum[r] == T(0);  // the query sees no key
        const T inv = none ? T(0) : T(1) / row_sum[r];
        T* out_row = out.at(g, i0 + r);
        for (int64_t c = 0; c < s.M; ++c) out_row[c] = o[r * s.M + c] * inv;
        lse[g * s.N + i0 + r] = none ? -inf : row_max[r] + std::log(row_sum[r]);
      }
    }
  }
}

// ---- backward: one key tile at a time, every query tile that sees it in turn ----

template <class T>
void backward_cpu(const Shape4& s, const Rows<const T>& q, const Rows<const T>& k, const Rows<const T>& v,
                  const KeyLimits& limits, const Rows<const T>& out, const T* lse, const Rows<const T>& dout,
                  const T* dlse, const Rows<T>& dq, const Rows<T>& dk, const Rows<T>& dv) {
  const Visibility visible(s, limits);
  const TileKernels<T> kernels = tile_kernels<T>();
  const int64_t G = s.B * s.H, tiles = (s.S + kKeyTile - 1) / kKeyTile;
  const T scale = T(s.scale);
  const auto zero = [](const Rows<T>& x, int64_t g, int64_t r0, int64_t rows, int64_t width) {
    for (int64_t r = r0; r < r0 + rows; ++r) std::fill(x.at(g, r), x.at(g, r) + width, T(0));
  };
  // Key tiles of one head share dq. With at least as many heads as threads, a head's tiles run on
  // one thread, in order, into dq; with fewer, each thread sums its tiles' dq into a buffer of its own.
  // Each work item zeroes what it writes and makes its head's D (below) itself: as passes of their own,
  // before the items, they were four more parallel regions to start and wait for.
  const int threads = omp_get_max_threads();
  const bool by_head = G >= threads || tiles == 1;
  std::vector<T> dq_partial(by_head ? 0 : static_cast<size_t>(threads) * G * s.N * s.E, T(0));
  const SingleThreadedBlas one_thread;  // where tile_gemm runs BLAS (ops/tile_gemm.h)
#pragma omp parallel
  {
    const int64_t tile = std::min(kQueryTile, s.N) * std::min(kKeyTile, s.S), ldt = padded(std::min(kKeyTile, s.S));
    const Workspace<T> p(tile), dp(tile);
    const Workspace<T> kt(s.E * ldt), vt(s.M * ldt);  // (E, cols), (M, cols), row stride ldt: the key tile's Kᵀ, Vᵀ
    std::vector<int64_t> seen(kQueryTile);
    std::vector<T> k_rows(k.pick.index ? kKeyTile * s.E : 0);  // a key tile's picked rows of K
    std::vector<T> d(s.N);  // the head's D_i
    T* dq_mine = by_head ? nullptr : dq_partial.data() + static_cast<size_t>(omp_get_thread_num()) * G * s.N * s.E;
#pragma omp for schedule(dynamic)
    for (int64_t w = 0; w < (by_head ? G : G * tiles); ++w) {
      const int64_t g = by_head ? w : w / tiles;
      // D_i = Σ_m dout_im · out_im = Σ_j p_ij dp_ij, the softmax backward's row term, less dlse_i where
      // lse is an output: ds_ij = p_ij (dp_ij − D_i) + p_ij dlse_i.
      for (int64_t i = 0; i < s.N; ++i) {
        const T* dout_row = dout.at(g, i);
        const T* out_row = out.at(g, i);
        T acc = 0;
        for (int64_t c = 0; c < s.M; ++c) acc += dout_row[c] * out_row[c];
        d[i] = dlse ? acc - dlse[g * s.N + i] : acc;
      }
      if (by_head) zero(dq, g, 0, s.N, s.E);
      for (int64_t t = by_head ? 0 : w % tiles; t < (by_head ? tiles : w % tiles + 1); ++t) {
        const int64_t j0 = t * kKeyTile, cols = std::min(kKeyTile, s.S - j0);
        const auto [k_tile, ldk] = key_tile(k, g, j0, cols, s.E, k_rows.data());
        zero(dk, g, j0, cols, s.E);
        zero(dv, g, j0, cols, s.M);
        T* dkt = dk.at(g, j0);
        T* dvt = dv.at(g, j0);
        transpose_keys(k, g, j0, cols, s.E, kt.data(), ldt);
        transpose_keys(v, g, j0, cols, s.M, vt.data(), ldt);
        // With a causal mask no query before j0 sees the tile; padding hides it from all or none.
        for (int64_t i0 = s.causal ? j0 / kQueryTile * kQueryTile : 0; i0 < s.N; i0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, s.N - i0);
          if (visible.tile_end(g, i0, rows) <= j0) continue;
          const T* qt = q.at(g, i0);
          const T* dot = dout.at(g, i0);
          T* dqt = by_head ? dq.at(g, i0) : dq_mine + (g * s.N + i0) * s.E;
          const int64_t ldq = by_head ? dq.row : s.E;
          const Tile<T> tile{p.data(), rows, cols, seen.data()};
          for (int64_t r = 0; r < rows; ++r) seen[r] = std::clamp<int64_t>(visible.end(g, i0 + r) - j0, 0, cols);
          tile_gemm<T>(rows, cols, s.E, scale, qt, q.row, 1, kt.data(), ldt, T(0), p.data(), cols);  // S
          kernels.probabilities(tile, lse + g * s.N + i0);
          tile_gemm<T>(cols, s.M, rows, T(1), p.data(), 1, cols, dot, dout.row, T(1), dvt, dv.row);  // dV += Pᵀ dO
          tile_gemm<T>(rows, cols, s.M, T(1), dot, dout.row, 1, vt.data(), ldt, T(0), dp.data(), cols);  // dP = dO Vᵀ
          kernels.score_gradients(tile, dp.data(), d.data() + i0);                                      // dS
          tile_gemm<T>(cols, s.E, rows, scale, dp.data(), 1, cols, qt, q.row, T(1), dkt, dk.row);  // dK += scale dSᵀ Q
          tile_gemm<T>(rows, s.E, cols, scale, dp.data(), cols, 1, k_tile, ldk, T(1), dqt, ldq);  // dQ += scale dS K
        }
      }
    }
  }
  if (by_head) return;
  const size_t part = static_cast<size_t>(G) * s.N * s.E;  // one thread's buffer
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < G * s.N; ++i) {
    T* row = dq.at(i / s.N, i % s.N);
    for (int64_t e = 0; e < s.E; ++e) {
      T sum = dq_partial[i * s.E + e];
      for (int th = 1; th < threads; ++th) sum += dq_partial[th * part + i * s.E + e];
      row[e] = sum;
    }
  }
}

// The key lengths as int64 on the tensors' device, checked against S; undefined when there are none.
Tensor checked_lengths(const char* op, const Tensor& lengths, const Shape4& s, Device device) {
  if (!lengths.defined()) return {};
  TP_CHECK(is_integer(lengths.dtype()) && lengths.shape() == Shape{s.B}, op,
           "key_lengths must be int64 or int32 of shape (", s.B, ",), got ", lengths.dtype(), " ",
           to_string(lengths.shape()));
  for (int64_t n : lengths.to_vector<int64_t>())
    TP_CHECK(n >= 0 && n <= s.S, op, "a key length of ", n, " is outside [0, ", s.S, "]");
  return contiguous(to(to(lengths, device), DType::Int64));
}

// The queries' key ends as int64 on the tensors' device, checked against S, and their sum (the
// visible pairs of one head).
std::pair<Tensor, double> checked_ends(const char* op, const Tensor& ends, const Shape4& s, Device device) {
  TP_CHECK(ends.defined() && is_integer(ends.dtype()) && ends.shape() == (Shape{s.B, s.N}), op,
           "key_ends must be int64 or int32 of shape (", s.B, ", ", s.N, "), got ",
           ends.defined() ? detail::concat(ends.dtype(), " ", to_string(ends.shape())) : "none");
  double pairs = 0;
  for (int64_t n : ends.to_vector<int64_t>()) {
    TP_CHECK(n >= 0 && n <= s.S, op, "a key end of ", n, " is outside [0, ", s.S, "]");
    pairs += double(n);
  }
  return {contiguous(to(to(ends, device), DType::Int64)), pairs};
}

// fused_attention_rows' rows as the CPU kernels read them; none for the other ops. (A GPU never
// gets them: fused_attention_rows gathers the rows there and calls fused_attention_ends.)
KeyRows picked_rows(const Shape4& s, const KeyLimits& limits) {
  if (!limits.rows.defined()) return {};
  TP_CHECK(limits.rows.device().is_cpu(), "fused_attention_rows", "picked rows reach only the CPU's kernels");
  return {limits.rows.data<int64_t>(), limits.per_item, s.S};
}

// The row of t's flattened (items · R) rows that each picked key is: key j of query item b is row
// rows[b, j] of item b / per_item. (B · S,) int64 on rows' device.
Tensor flat_rows(const Tensor& rows, int64_t per_item, int64_t R) {
  const int64_t B = rows.size(0), S = rows.size(1);
  std::vector<int64_t> first(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) first[static_cast<size_t>(b)] = b / per_item * R;
  return reshape(rows + to(from_vector<int64_t>(first, {B, 1}), rows.device()), {B * S});
}

// t (items, H, R, F) with the rows `rows` (B, S) picks, item b's from t's item b / per_item:
// (B, H, S, F), composed from primitives (index_select over t's flattened rows), differentiable.
Tensor picked(const Tensor& t, const Tensor& rows, int64_t per_item) {
  const int64_t B = rows.size(0), S = rows.size(1), H = t.size(1), R = t.size(2), F = t.size(3);
  const Tensor flat = flat_rows(rows, per_item, R);
  const Tensor selected = index_select(reshape(permute(t, {0, 2, 1, 3}), {t.size(0) * R, H * F}), 0, flat);
  return permute(reshape(selected, {B, S, H, F}), {0, 2, 1, 3});
}

// picked's backward: the gradient of `like` (k or v, (items, H, R, F)) from that of the keys the
// query items picked (grad (B, H, S, F), laid out as (B, S, H, F)), each picked row's gradient added
// into its row by index_add over like's flattened rows.
Tensor picked_gradient(const Tensor& grad, const Tensor& rows, int64_t per_item, const Tensor& like) {
  const int64_t B = grad.size(0), H = grad.size(1), S = grad.size(2), F = grad.size(3);
  const int64_t items = like.size(0), R = like.size(2);
  const Tensor sums = index_add(zeros({items * R, H * F}, grad.options()), 0, flat_rows(rows, per_item, R),
                                reshape(permute(grad, {0, 2, 1, 3}), {B * S, H * F}));
  return permute(reshape(sums, {items, R, H, F}), {0, 2, 1, 3});
}

// The kernels on their device: out and lse from q, k, v (one floating dtype; contiguous on a GPU, on
// the CPU as Rows reads and writes them).
void forward(const Shape4& s, const Tensor& q, const Tensor& k, const Tensor& v, const KeyLimits& limits,
             const Tensor& out, const Tensor& lse) {
  if (numel(out.shape()) + numel(lse.shape()) == 0) return;
  const auto launch = [&] { cuda::fused_attention_forward(s, q, k, v, limits.lengths, limits.ends, out, lse); };
  if (on_cuda("fused_attention", q, launch)) return;
  const KeyRows pick = picked_rows(s, limits);
  visit_floating(q.dtype(), "fused_attention", [&](auto tag) {
    using T = decltype(tag);
    forward_cpu<T>(s, Rows<const T>(q), Rows<const T>(k, pick), Rows<const T>(v, pick), limits, Rows<T>(out),
                   lse.data<T>());
  });
}

// dq, dk, dv from the forward's tensors, as forward takes them, dout and dlse (contiguous; undefined
// where lse is no output); on a GPU every tensor contiguous, on the CPU as Rows reads and writes them.
void backward(const Shape4& s, const Tensor& q, const Tensor& k, const Tensor& v, const KeyLimits& limits,
              const Tensor& out, const Tensor& lse, const Tensor& dout, const Tensor& dlse, const Tensor& dq,
              const Tensor& dk, const Tensor& dv) {
  const auto launch = [&] {
    cuda::fused_attention_backward(s, q, k, v, limits.lengths, limits.ends, out, lse, dout, dlse, dq, dk, dv);
  };
  if (on_cuda("fused_attention", q, launch)) return;
  const KeyRows pick = picked_rows(s, limits);
  visit_floating(q.dtype(), "fused_attention", [&](auto tag) {
    using T = decltype(tag);
    backward_cpu<T>(s, Rows<const T>(q), Rows<const T>(k, pick), Rows<const T>(v, pick), limits, Rows<const T>(out),
                    lse.data<T>(), Rows<const T>(dout), dlse.defined() ? dlse.data<T>() : nullptr, Rows<T>(dq),
                    Rows<T>(dk), Rows<T>(dv));
  });
}

// t (B, H, X, F) in `dtype`, laid out as t (in_layout_of), off the tape; t itself in its own dtype.
// In t's layout the conversion runs over the elements as they lie (coalesce_dims, ops/loops.h):
// converted to a contiguous tensor, heads split from a projection went 16 elements at a time.
Tensor converted(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  const Tensor y = in_layout_of(t, t.shape(), dtype);
  copy_(y, t.detach());
  return y;
}

// A bfloat16 tensor as float32, any other as it is: bfloat16 attention runs the float32 kernels on
// copies made for the one call, while what the tape keeps stays bfloat16.
Tensor wide(const Tensor& t) { return t.dtype() == DType::BFloat16 ? converted(t, DType::Float32) : t; }

// The shape of q, k, v (B, H, N, E), (B, H, S, E), (B, H, S, M), checked.
Shape4 checked_shape(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  check_same_device(op, {&q, &k, &v});
  check_floating(op, q);
  check_same_dtype(op, q, k);
  check_same_dtype(op, q, v);
  TP_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
           "expected q (B, H, N, E), k (B, H, S, E), v (B, H, S, M); got ", to_string(q.shape()), ", ",
           to_string(k.shape()), ", ", to_string(v.shape()));
  Shape4 s{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3), causal, 0.0};
  TP_CHECK(k.size(0) == s.B && v.size(0) == s.B && k.size(1) == s.H && v.size(1) == s.H && k.size(3) == s.E &&
               v.size(2) == s.S,
           op, "q ", to_string(q.shape()), ", k ", to_string(k.shape()), ", v ", to_string(v.shape()),
           " do not fit (B, H, N, E), (B, H, S, E), (B, H, S, M)");
  TP_CHECK(s.E > 0, op, "the head dimension E must be positive, got ", to_string(q.shape()));
  TP_CHECK(!causal || s.N == s.S, op, "causal attention needs as many queries as keys, got N = ", s.N, ", S = ", s.S);
  TP_CHECK(fused_attention_fits(q, v), op, "on a GPU the head dims must be at most ", kFusedAttentionMaxHeadDim,
           ", got E = ", s.E, ", M = ", s.M);
  s.scale = 1.0 / std::sqrt(static_cast<double>(s.E));
  return s;
}

// Whether the op's lse is an output (fused_attention_lse) or kept for the backward only.
enum class LseOutput { No, Yes };

// The op on checked arguments; `pairs` is the number of (query, key) pairs seen over all heads.
AttentionWithLse attend(const char* op, const Shape4& s, const Tensor& q, const Tensor& k, const Tensor& v,
                        const KeyLimits& limits, double pairs, LseOutput lse_output) {
  // The CUDA kernels take contiguous tensors; the CPU's read any whose rows BLAS can take (Rows), and
  // write the output and the gradients in the layout of q, k and v (in_layout_of).
  const auto as_read = [](const Tensor& t) {
    return !t.device().is_cuda() && rows_readable(t) ? t.detach() : contiguous(t.detach());
  };
  const auto new_like = [](const Tensor& like, const Shape& shape, DType dtype) {
    return like.device().is_cuda() ? empty(shape, {dtype, like.device()}) : in_layout_of(like, shape, dtype);
  };
  const Tensor qc = as_read(q), kc = as_read(k), vc = as_read(v);
  // bfloat16: out rounded from the float32 kernel's (wide), lse kept in float32.
  const DType compute = q.dtype() == DType::BFloat16 ? DType::Float32 : q.dtype();
  Tensor out = new_like(qc, {s.B, s.H, s.N, s.M}, q.dtype());
  const Tensor out_wide = compute == q.dtype() ? out : new_like(qc, out.shape(), compute);
  const Tensor lse = empty({s.B, s.H, s.N}, {compute, q.device()});
  forward(s, wide(qc), wide(kc), wide(vc), limits, out_wide, lse);
  if (out_wide.dtype() != out.dtype()) copy_(out, out_wide);

  // FLOPs of the products: Q Kᵀ and P V forward; backward recomputes Q Kᵀ and forms dV, dP, dK, dQ.
  profile_flops(2 * pairs * double(s.E + s.M));
  const bool with_lse = lse_output == LseOutput::Yes;
  record(op, {q, k, v}, with_lse ? std::vector<Tensor>{out, lse} : std::vector<Tensor>{out},
         [s, pairs, limits, as_read, new_like, qs = Saved(qc), ks = Saved(kc), vs = Saved(vc), os = Saved(out),
          ls = Saved(lse)](const std::vector<Tensor>& dy, Gradients& g) {
           profile_flops(2 * pairs * double(3 * s.E + 2 * s.M));
           const Tensor q = wide(qs.get()), k = wide(ks.get()), v = wide(vs.get()), out = wide(os.get());
           const Tensor dout = wide(as_read(dy[0])), dlse = dy.size() > 1 ? contiguous(dy[1]) : Tensor();
           // Picked rows: the gradients of the keys as the query items saw them, (B, H, S, F) laid out as
           // (B, S, H, F), then added into k's and v's rows (picked_gradient).
           const bool by_rows = limits.rows.defined();
           const auto picked_keys = [&](const Tensor& like, int64_t F) {
             return permute(empty({s.B, s.S, s.H, F}, like.options()), {0, 2, 1, 3});
           };
           const Tensor dq = new_like(q, q.shape(), q.dtype()),
                        dk = by_rows ? picked_keys(k, s.E) : new_like(k, k.shape(), k.dtype()),
                        dv = by_rows ? picked_keys(v, s.M) : new_like(v, v.shape(), v.dtype());
           backward(s, q, k, v, limits, out, ls.get(), dout, dlse, dq, dk, dv);
           const auto into_rows = [&](const Tensor& grad, const Tensor& like) {
             return by_rows ? picked_gradient(grad, limits.rows, limits.per_item, like) : grad;
           };
           const DType dtype = qs.get().dtype();  // bfloat16 gradients rounded from the float32 kernel's
           if (g.needs(0)) g.accumulate(0, converted(dq, dtype));
           if (g.needs(1)) g.accumulate(1, converted(into_rows(dk, k), dtype));
           if (g.needs(2)) g.accumulate(2, converted(into_rows(dv, v), dtype));
         });
  return {out, lse};
}

// fused_attention and fused_attention_lse.
AttentionWithLse fused(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_lengths,
                       bool causal, LseOutput lse_output) {
  // Under autocast (ops/autocast.h), bfloat16 beside float32 computes in float32; all bfloat16 stays so.
  if ((q.dtype() != k.dtype() || q.dtype() != v.dtype()) && autocast_widens({&q, &k, &v}))
    return fused(op, autocast_float32(q), autocast_float32(k), autocast_float32(v), key_lengths, causal, lse_output);
  const Shape4 s = checked_shape(op, q, k, v, causal);
  const Tensor lengths = checked_lengths(op, key_lengths, s, q.device());
  // A causal mask skips about half of the pairs.
  const double pairs = double(s.B) * double(s.H) * double(s.N) * double(s.S) * (causal ? 0.5 : 1.0);
  return attend(op, s, q, k, v, {lengths, Tensor(), Tensor(), 1}, pairs, lse_output);
}

}  // namespace

bool fused_attention_fits(const Tensor& q, const Tensor& v) {
  return !q.device().is_cuda() || (q.size(-1) <= kFusedAttentionMaxHeadDim && v.size(-1) <= kFusedAttentionMaxHeadDim);
}

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_lengths, bool causal) {
  return fused("fused_attention", q, k, v, key_lengths, causal, LseOutput::No).out;
}

AttentionWithLse fused_attention_lse(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_lengths,
                                     bool causal) {
  return fused("fused_attention_lse", q, k, v, key_lengths, causal, LseOutput::Yes);
}

Tensor fused_attention_ends(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_ends) {
  if ((q.dtype() != k.dtype() || q.dtype() != v.dtype()) && autocast_widens({&q, &k, &v}))
    return fused_attention_ends(autocast_float32(q), autocast_float32(k), autocast_float32(v), key_ends);
  const char* op = "fused_attention_ends";
  const Shape4 s = checked_shape(op, q, k, v, false);
  const auto [ends, pairs] = checked_ends(op, key_ends, s, q.device());
  return attend(op, s, q, k, v, {Tensor(), ends, Tensor(), 1}, pairs * double(s.H), LseOutput::No).out;
}

Tensor fused_attention_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& key_rows,
                            const Tensor& key_ends) {
  if ((q.dtype() != k.dtype() || q.dtype() != v.dtype()) && autocast_widens({&q, &k, &v}))
    return fused_attention_rows(autocast_float32(q), autocast_float32(k), autocast_float32(v), key_rows, key_ends);
  const char* op = "fused_attention_rows";
  check_same_device(op, {&q, &k, &v});
  check_floating(op, q);
  check_same_dtype(op, q, k);
  check_same_dtype(op, q, v);
  TP_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
           "expected q (B, H, N, E), k (B', H, R, E), v (B', H, R, M); got ", to_string(q.shape()), ", ",
           to_string(k.shape()), ", ", to_string(v.shape()));
  const int64_t items = k.size(0), R = k.size(2);
  TP_CHECK(items >= 1 && q.size(0) % items == 0 && v.size(0) == items && k.size(1) == q.size(1) &&
               v.size(1) == q.size(1) && k.size(3) == q.size(3) && v.size(2) == R,
           op, "q ", to_string(q.shape()), ", k ", to_string(k.shape()), ", v ", to_string(v.shape()),
           " do not fit (B, H, N, E), (B', H, R, E), (B', H, R, M) with B a multiple of B'");
  TP_CHECK(q.size(3) > 0, op, "the head dimension E must be positive, got ", to_string(q.shape()));
  TP_CHECK(key_rows.defined() && is_integer(key_rows.dtype()) && key_rows.dim() == 2 &&
               key_rows.size(0) == q.size(0),
           op, "key_rows must be int64 or int32 of shape (", q.size(0), ", S), got ",
           key_rows.defined() ? detail::concat(key_rows.dtype(), " ", to_string(key_rows.shape())) : "none");
  for (int64_t r : key_rows.to_vector<int64_t>())
    TP_CHECK(r >= 0 && r < R, op, "a key row of ", r, " is outside [0, ", R, ")");
  const Tensor rows = contiguous(to(to(key_rows, q.device()), DType::Int64));
  const int64_t per_item = q.size(0) / items;
  // A GPU's kernels take contiguous keys: the picked rows gathered, then fused_attention_ends.
  if (q.device().is_cuda())
    return fused_attention_ends(q, picked(k, rows, per_item), picked(v, rows, per_item), key_ends);
  const Shape4 s{q.size(0), q.size(1), q.size(2), rows.size(1), q.size(3), v.size(3), false,
                 1.0 / std::sqrt(static_cast<double>(q.size(3)))};
  const auto [ends, pairs] = checked_ends(op, key_ends, s, q.device());
  return attend(op, s, q, k, v, {Tensor(), ends, rows, per_item}, pairs * double(s.H), LseOutput::No).out;
}

}  // namespace tapestry
