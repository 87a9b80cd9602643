// Softmax and log-softmax over the last dim. Shapes: x, y (R, C) seen as R rows of C classes
// (R = product of the leading dims); a mask broadcasts to x's full shape.
#include "ops/softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cpu_capability.h"
#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/softmax.h"
#include "ops/dispatch.h"
#include "ops/fast_exp.h"
#include "ops/loops.h"
#include "ops/shape.h"

#if TP_CPU_DISPATCH
#include <immintrin.h>
#endif

namespace tapestry {

namespace {

enum class Kind { Softmax, LogSoftmax };

constexpr int64_t kParallelWork = 32768;  // elements below which a loop stays on one thread

// Offset of row r's first element in a tensor read through broadcast `strides` as `shape`.
int64_t row_offset(int64_t r, const Shape& shape, const Strides& strides) {
  int64_t offset = 0;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    offset += (r % shape[d]) * strides[d];
    r /= shape[d];
  }
  return offset;
}

cuda::SoftmaxKind cuda_kind(Kind kind) {
  return kind == Kind::Softmax ? cuda::SoftmaxKind::Softmax : cuda::SoftmaxKind::LogSoftmax;
}

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launcher of ops/cuda/softmax.h) ----

// A row with a NaN becomes NaN throughout (docs/PORTING.md, "NaN"), never a masked row of zeros; a
// row with every entry −inf has no distribution: zeros (softmax) or −inf (log-softmax). Returns
// whether the row was one of these, and else its maximum in *m.
template <class T>
[[gnu::always_inline]] inline bool special_row(Kind kind, T* y, int64_t C, T* m) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  T largest = -inf;
  int nan = 0;
#pragma omp simd reduction(max : largest) reduction(| : nan)
  for (int64_t c = 0; c < C; ++c) {
    largest = y[c] > largest ? y[c] : largest;
    nan |= y[c] != y[c];
  }
  *m = largest;
  if (!nan && largest != -inf) return false;
  const T fill = nan ? std::numeric_limits<T>::quiet_NaN() : kind == Kind::Softmax ? T(0) : -inf;
  std::fill(y, y + C, fill);
  return true;
}

// Normalises a row of y in place (softmax); y holds z = x (+ bias), −inf where masked. The sum is an
// `omp simd` reduction in double (a single running sum is a chain of dependent adds). Compiled for
// the baseline only: the clustered attentions and neural clustering take their softmax here, and
// its other capabilities' orders of summation would move their last bits (tests/test_copy_task_golden.cpp).
template <class T>
void softmax_row(T* y, int64_t C) {
  T m;
  if (special_row(Kind::Softmax, y, C, &m)) return;
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < C; ++c) {
    y[c] = exp_nonpositive_of(y[c] - m);  // masked: e^−inf = 0 exactly
    s += y[c];
  }
  const T inv = static_cast<T>(1.0 / s);
  for (int64_t c = 0; c < C; ++c) y[c] *= inv;
}

// ---- log-softmax rows, compiled for each CPU capability (core/cpu_capability.h) ----
// Their sums take element c into lane c mod kLanes (in double) and join the lanes in a fixed tree;
// `fused`: the exponential's multiply-adds fused (ops/fast_exp.h), for AVX2 and AVX-512, which then
// give the same bits. Compiled for the baseline alone they ran in SSE2's lanes: at the speech
// recogniser's 51 classes, 2 ns an element (docs/PERFORMANCE.md).

constexpr int64_t kLanes = 16;

// Σ_{c < n} term(c) in kLanes lanes of double, as above.
template <class Term>
[[gnu::always_inline]] inline double lane_sum(int64_t n, const Term& term) {
  double lanes[kLanes] = {};
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t c = 0; c < whole; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(term(c + l));
  for (int64_t c = whole; c < n; ++c) lanes[c - whole] += static_cast<double>(term(c));
  for (int64_t width = kLanes / 2; width > 0; width /= 2)
    for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  return lanes[0];
}

// y = z − m − log Σ_c e^(z − m) in place of z (−inf stays −inf).
template <class T, bool fused>
[[gnu::always_inline]] inline void log_softmax_row(T* y, int64_t C) {
  T m;
  if (special_row(Kind::LogSoftmax, y, C, &m)) return;
  const double s = lane_sum(C, [&](int64_t c) { return exp_nonpositive_of<T, fused>(y[c] - m); });
  const T log_s = static_cast<T>(std::log(s));
  for (int64_t c = 0; c < C; ++c) y[c] = (y[c] - m) - log_s;
}

// dx = dy − e^y ⊙ Σ_c dy over the entries with y > −inf; masked entries (y = −inf) get 0.
template <class T, bool fused>
[[gnu::always_inline]] inline void log_softmax_backward_row(const T* dy, const T* y, T* dx, int64_t C) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  // dy read whatever y holds: written as a read under the condition, GCC 12 vectorised it for AVX2 as
  // masked loads of the row's second eight entries under the first eight's mask (wrong sums).
  const T total = static_cast<T>(lane_sum(C, [&](int64_t c) {
    const T g = dy[c];
    return y[c] == -inf ? T(0) : g;
  }));
  for (int64_t c = 0; c < C; ++c) {
    const T g = dy[c] - exp_nonpositive_of<T, fused>(y[c]) * total;
    dx[c] = y[c] == -inf ? T(0) : g;
  }
}

// The two, as one capability compiled them.
template <class T>
struct LogSoftmaxKernels {
  void (*forward)(T* y, int64_t C);
  void (*backward)(const T* dy, const T* y, T* dx, int64_t C);
};

template <class T>
void log_softmax_row_baseline(T* y, int64_t C) {
  log_softmax_row<T, false>(y, C);
}
template <class T>
void log_softmax_backward_row_baseline(const T* dy, const T* y, T* dx, int64_t C) {
  log_softmax_backward_row<T, false>(dy, y, dx, C);
}

#if TP_CPU_DISPATCH
TP_TARGET_AVX2 void log_softmax_row_avx2(float* y, int64_t C) { log_softmax_row<float, true>(y, C); }
TP_TARGET_AVX2 void log_softmax_backward_row_avx2(const float* dy, const float* y, float* dx, int64_t C) {
  log_softmax_backward_row<float, true>(dy, y, dx, C);
}

// AVX-512: the loops above in intrinsics, a row's last C % 16 entries as one masked vector and the
// lanes in registers (compiled from the loops, the lanes lived on the stack, each tail element's
// store and the tree's wider loads a failed store-to-load forward). The same operations in the same
// order: the same bits as AVX2's.

// The entries [c, c + 16) below C.
TP_TARGET_AVX512 inline __mmask16 entries(int64_t c, int64_t C) {
  return static_cast<__mmask16>(C - c >= 16 ? 0xFFFF : (1u << (C - c)) - 1);
}

// lane_sum's 16 lanes, 0–7 in lo and 8–15 in hi, joined by its tree.
TP_TARGET_AVX512 inline double tree_sum(__m512d lo, __m512d hi) {
  const __m512d s8 = _mm512_add_pd(lo, hi);
  const __m256d s4 = _mm256_add_pd(_mm512_maskz_extractf64x4_pd(0xF, s8, 0), _mm512_maskz_extractf64x4_pd(0xF, s8, 1));
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
}

// The largest of x's lanes (the maskz forms: GCC 12 warns that the plain ones' undefined pass-through
// may be uninitialised).
TP_TARGET_AVX512 inline float largest_lane(__m512 x) {
  const __m256 h = _mm256_max_ps(_mm512_maskz_extractf32x8_ps(0xFF, x, 0), _mm512_maskz_extractf32x8_ps(0xFF, x, 1));
  __m128 q = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_max_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_max_ss(q, _mm_shuffle_ps(q, q, 1)));
}

// lo += the low 8 lanes of x, hi += the high 8, widened to double.
TP_TARGET_AVX512 inline void add_widened(__m512 x, __m512d* lo, __m512d* hi) {
  *lo = _mm512_add_pd(*lo, _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_extractf32x8_ps(0xFF, x, 0)));
  *hi = _mm512_add_pd(*hi, _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_extractf32x8_ps(0xFF, x, 1)));
}

TP_TARGET_AVX512 void log_softmax_row_avx512(float* y, int64_t C) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  __m512 largest = _mm512_set1_ps(-inf);
  __mmask16 nan = 0;
  for (int64_t c = 0; c < C; c += 16) {
    const __m512 z = _mm512_mask_loadu_ps(largest, entries(c, C), y + c);  // beyond C: the maximum so far
    largest = _mm512_maskz_max_ps(0xFFFF, z, largest);  // z > largest ? z : largest, as special_row
    nan |= _mm512_cmp_ps_mask(z, z, _CMP_UNORD_Q);
  }
  const float m = largest_lane(largest);
  if (nan || m == -inf) {
    float unused;
    special_row(Kind::LogSoftmax, y, C, &unused);
    return;
  }
  const __m512 mv = _mm512_set1_ps(m);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t c = 0; c < C; c += 16) {
    const __mmask16 k = entries(c, C);
    add_widened(_mm512_maskz_mov_ps(k, exp_nonpositive_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, y + c), mv))),
                &lo, &hi);
  }
  const __m512 log_s = _mm512_set1_ps(static_cast<float>(std::log(tree_sum(lo, hi))));
  for (int64_t c = 0; c < C; c += 16) {
    const __mmask16 k = entries(c, C);
    _mm512_mask_storeu_ps(y + c, k, _mm512_sub_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, y + c), mv), log_s));
  }
}

TP_TARGET_AVX512 void log_softmax_backward_row_avx512(const float* dy, const float* y, float* dx, int64_t C) {
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  for (int64_t c = 0; c < C; c += 16) {
    const __mmask16 k = entries(c, C);
    const __mmask16 kept = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, y + c), minus_inf, _CMP_NEQ_UQ);
    add_widened(_mm512_maskz_loadu_ps(kept, dy + c), &lo, &hi);
  }
  const __m512 total = _mm512_set1_ps(static_cast<float>(tree_sum(lo, hi)));
  for (int64_t c = 0; c < C; c += 16) {
    const __mmask16 k = entries(c, C);
    const __m512 yc = _mm512_maskz_loadu_ps(k, y + c);
    const __mmask16 kept = _mm512_mask_cmp_ps_mask(k, yc, minus_inf, _CMP_NEQ_UQ);
    const __m512 g = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dy + c), _mm512_mul_ps(exp_nonpositive_avx512(yc), total));
    _mm512_mask_storeu_ps(dx + c, k, _mm512_maskz_mov_ps(kept, g));
  }
}
#endif

// float32 takes the widest capability in use; float64 the baseline.
template <class T>
LogSoftmaxKernels<T> log_softmax_kernels() {
#if TP_CPU_DISPATCH
  if constexpr (std::is_same_v<T, float>) {
    switch (cpu_capability()) {
      case CpuCapability::Avx512: return {log_softmax_row_avx512, log_softmax_backward_row_avx512};
      case CpuCapability::Avx2: return {log_softmax_row_avx2, log_softmax_backward_row_avx2};
      case CpuCapability::Baseline: break;
    }
  }
#endif
  return {log_softmax_row_baseline<T>, log_softmax_backward_row_baseline<T>};
}

Tensor softmax_forward(const char* op, Kind kind, const Tensor& x, const Tensor& mask) {
  const Tensor xc = contiguous(x.detach());
  Tensor y = empty(x.shape(), x.options());
  if (on_cuda(op, x, [&] { cuda::softmax_forward(op, cuda_kind(kind), xc, mask, y); })) return y;
  const Shape& shape = x.shape();
  const int64_t C = shape.back(), R = numel(Shape(shape.begin(), shape.end() - 1));
  const Strides ms = mask.defined() ? broadcast_strides(mask, shape) : Strides(shape.size(), 0);
  const int64_t mstep = ms.back();
  visit_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    constexpr T inf = std::numeric_limits<T>::infinity();
    const T* src = xc.data<T>();
    T* dst = y.data<T>();
    const bool* keep = mask.defined() && mask.dtype() == DType::Bool ? mask.data<bool>() : nullptr;
    const T* bias = mask.defined() && mask.dtype() != DType::Bool ? mask.data<T>() : nullptr;
    const auto log_softmax_kernel = log_softmax_kernels<T>().forward;
#pragma omp parallel for schedule(static) if (R > 1 && R * C > kParallelWork)
    for (int64_t r = 0; r < R; ++r) {
      const T* xr = src + r * C;
      T* yr = dst + r * C;
      const int64_t mo = mask.defined() ? row_offset(r, shape, ms) : 0;
      if (keep) {
        for (int64_t c = 0; c < C; ++c) yr[c] = keep[mo + c * mstep] ? xr[c] : -inf;
      } else if (bias) {
        for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] + bias[mo + c * mstep];
      } else {
        for (int64_t c = 0; c < C; ++c) yr[c] = xr[c];
      }
      if (kind == Kind::Softmax)
        softmax_row(yr, C);
      else
        log_softmax_kernel(yr, C);
    }
  });
  return y;
}

// dx from dy and the saved output y, both (R, C), one pass per row:
//   softmax:      dx = y ⊙ (dy − Σ_c dy ⊙ y)
//   log_softmax:  dx = dy − e^y ⊙ Σ_c dy, over entries with y > −inf (masked ones get 0)
Tensor softmax_backward(const char* op, Kind kind, const Tensor& dy_in, const Tensor& y) {
  const Tensor dy = contiguous(dy_in);
  Tensor dx = empty(y.shape(), y.options());
  if (on_cuda(op, dy_in, [&] { cuda::softmax_backward(op, cuda_kind(kind), dy, y, dx); })) return dx;
  const int64_t C = y.shape().back(), R = numel(Shape(y.shape().begin(), y.shape().end() - 1));
  visit_floating(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* g = dy.data<T>();
    const T* out = y.data<T>();
    T* dst = dx.data<T>();
    const auto log_softmax_backward_kernel = log_softmax_kernels<T>().backward;
#pragma omp parallel for schedule(static) if (R > 1 && R * C > kParallelWork)
    for (int64_t r = 0; r < R; ++r) {
      const T* gr = g + r * C;
      const T* yr = out + r * C;
      T* dr = dst + r * C;
      if (kind == Kind::LogSoftmax) {
        log_softmax_backward_kernel(gr, yr, dr, C);
        continue;
      }
      double acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t c = 0; c < C; ++c) acc += static_cast<double>(gr[c]) * yr[c];
      const T dot = static_cast<T>(acc);
      for (int64_t c = 0; c < C; ++c) dr[c] = yr[c] * (gr[c] - dot);
    }
  });
  return dx;
}

// ---- the op ----

Tensor softmax_op(const char* op, Kind kind, const Tensor& x, const Tensor& mask) {
  if (autocast_widens({&x, &mask}))  // ops/autocast.h
    return softmax_op(op, kind, autocast_float32(x), autocast_float32(mask));
  check_floating(op, x);
  TP_CHECK(x.dim() >= 1, op, "expected a tensor of at least 1 dim (classes along the last), got a 0-d tensor");
  if (mask.defined()) {
    check_same_device(op, {&x, &mask});
    TP_CHECK(mask.dtype() == DType::Bool || mask.dtype() == x.dtype(), op,
             "the mask must be bool (true = keep) or additive of x's dtype ", x.dtype(), ", got ",
             mask.dtype(), " of shape ", to_string(mask.shape()));
    TP_CHECK(mask.dim() <= x.dim() && broadcast_shapes(mask.shape(), x.shape(), op) == x.shape(), op,
             "a mask of shape ", to_string(mask.shape()), " does not broadcast to x of shape ",
             to_string(x.shape()));
  }
  Tensor y = softmax_forward(op, kind, x, mask);

  // x and an additive mask enter as z = x + mask, so both receive dz (the mask summed to its shape)
  std::vector<Tensor> inputs{x};
  if (mask.defined() && mask.dtype() != DType::Bool) inputs.push_back(mask);
  record(op, inputs, {y}, [op, kind, ys = Saved(y)](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor dz = softmax_backward(op, kind, dy[0], ys.get());
    if (g.needs(0)) g.accumulate(0, dz);
    if (g.needs(1)) g.accumulate(1, dz);
  });
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, const Tensor& mask) { return softmax_op("softmax", Kind::Softmax, x, mask); }
Tensor log_softmax(const Tensor& x, const Tensor& mask) { return softmax_op("log_softmax", Kind::LogSoftmax, x, mask); }

}  // namespace tapestry
