// Layer norm. Shapes: x, y, dy (R, D) seen as R rows of the D normalized elements; weight, bias
// (D); the saved per-row statistics mean, rstd (R), float64 whatever x's dtype: x − μ in float32
// would round μ to x's precision, which costs digits when |μ| ≫ σ.
//
// What the backward keeps: x, mean and rstd; under autocast (ops/autocast.h) instead x̂ = (x − μ) · rstd
// rounded to bfloat16, and rstd. The forward is float32 either way; the gradients then read x̂ to 8
// bits, as the products' gradients read their bfloat16 operands (docs/MIXED-PRECISION.md). x̂ rather
// than x: x rounded to 8 bits would lose x − μ entirely when |μ| ≫ σ; x̂'s rounding is relative to x̂.
#include "ops/norm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/bfloat16.h"
#include "core/cpu_capability.h"
#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/norm.h"
#include "ops/dispatch.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

constexpr int64_t kParallelWork = 32768;  // elements below which a loop stays on one thread

struct Rows {
  int64_t R = 0, D = 0;
  Shape normalized;  // the trailing dims of x that make up D; the shape of weight and bias
};

struct Forward {
  Tensor y, mean, rstd;  // (R, D) as x's shape; (R), (R) float64
  Tensor xhat;           // (R, D) bfloat16: x̂, when asked for (autocast); else undefined
};

struct Backward {
  Tensor dx, dweight, dbias;  // each undefined unless wanted
};

struct Wanted {
  bool dx = false, dweight = false, dbias = false;
};

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launcher of ops/cuda/norm.h) ----

// A row's sums run in kLanes float64 lanes (GCC's and Clang's vector extensions: one AVX-512
// register, two AVX2 ones, four SSE2 ones), element c in lane c % kLanes, and the lanes are added in
// one fixed order (total): every CPU capability gives the same bits.
constexpr int64_t kLanes = 8;
constexpr int64_t kRowChunk = 64;  // rows per part of dweight / dbias: the parts are added in order
// dropout_add_layer_norm draws dropout chunk by chunk: a chunk's first element must start a Philox
// block of 8 elements (apply_dropout, ops/dropout.h) whatever the row width.
static_assert(kRowChunk % 8 == 0, "a chunk of rows must start a Philox block at every row width");

typedef double Lanes __attribute__((vector_size(kLanes * sizeof(double))));
template <class T>
struct Packed;  // kLanes elements of T
template <>
struct Packed<float> {
  typedef float type __attribute__((vector_size(kLanes * sizeof(float))));
};
template <>
struct Packed<double> {
  typedef Lanes type;
};

// out = p[0 .. kLanes) in float64
template <class T>
[[gnu::always_inline]] inline void load(Lanes& out, const T* p) {
  typename Packed<T>::type v;
  std::memcpy(&v, p, sizeof v);
  out = __builtin_convertvector(v, Lanes);
}

// The same for bfloat16: each value's bits are a float32's top half.
[[gnu::always_inline]] inline void load(Lanes& out, const bfloat16* p) {
  typedef uint16_t Halves __attribute__((vector_size(kLanes * sizeof(uint16_t))));
  typedef uint32_t Words __attribute__((vector_size(kLanes * sizeof(uint32_t))));
  Halves h;
  std::memcpy(&h, p, sizeof h);
  const Words words = __builtin_convertvector(h, Words) << 16;
  Packed<float>::type v;
  std::memcpy(&v, &words, sizeof v);
  out = __builtin_convertvector(v, Lanes);
}

[[gnu::always_inline]] inline double total(const Lanes& a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// The rows whose sums run interleaved: a row's sums are chains of dependent adds (at D = 64, eight
// vectors long, then the tree of lanes, a division, a square root), and a row at a time waited on
// each. Interleaved, four rows' chains overlap; each row's operations and their order are those of a
// row alone, so the bits are too.
constexpr int kInterleaved = 4;

// Rows [r, r + N) of x: μ = Σ x / D and rstd = 1 / √(σ² + eps), σ² = Σ (x − μ)² / D (two passes, in
// float64), each row's sums in its own lanes.
template <int N, class T>
[[gnu::always_inline]] inline void row_statistics(const T* x, int64_t r, int64_t D, double eps, double* mean,
                                                  double* rstd) {
  const int64_t full = D - D % kLanes;
  Lanes sum[N] = {}, sq[N] = {}, v;
  double mu[N];
  for (int64_t c = 0; c < full; c += kLanes)
    for (int i = 0; i < N; ++i) load(v, x + (r + i) * D + c), sum[i] += v;
  for (int i = 0; i < N; ++i) {
    const T* xr = x + (r + i) * D;
    for (int64_t c = full; c < D; ++c) sum[i][c - full] += xr[c];
    mu[i] = D > 0 ? total(sum[i]) / static_cast<double>(D) : 0.0;
  }
  for (int64_t c = 0; c < full; c += kLanes)
    for (int i = 0; i < N; ++i) load(v, x + (r + i) * D + c), v -= mu[i], sq[i] += v * v;
  for (int i = 0; i < N; ++i) {
    const T* xr = x + (r + i) * D;
    for (int64_t c = full; c < D; ++c) sq[i][c - full] += (xr[c] - mu[i]) * (xr[c] - mu[i]);
    const double var = D > 0 ? total(sq[i]) / static_cast<double>(D) : 0.0;
    mean[r + i] = mu[i];
    rstd[r + i] = 1.0 / std::sqrt(var + eps);
  }
}

// Rows [r0, r1): their μ and rstd (row_statistics), y = (x − μ) · rstd ⊙ w + b; where xhat is given,
// x̂ = (x − μ) · rstd in T, rounded to bfloat16.
template <class T>
[[gnu::always_inline]] inline void forward_rows(const T* x, const T* w, const T* b, T* y, bfloat16* xhat,
                                                double* mean, double* rstd, int64_t r0, int64_t r1, int64_t D,
                                                double eps) {
  int64_t r = r0;
  for (; r + kInterleaved <= r1; r += kInterleaved) row_statistics<kInterleaved>(x, r, D, eps, mean, rstd);
  for (; r < r1; ++r) row_statistics<1>(x, r, D, eps, mean, rstd);
  for (r = r0; r < r1; ++r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    const double mu = mean[r], s = rstd[r];
    if (w && b) {
      for (int64_t c = 0; c < D; ++c) yr[c] = static_cast<T>((xr[c] - mu) * s) * w[c] + b[c];
    } else {
      for (int64_t c = 0; c < D; ++c) {
        const T xh = static_cast<T>((xr[c] - mu) * s);
        yr[c] = (w ? xh * w[c] : xh) + (b ? b[c] : T(0));
      }
    }
    if (xhat) {
      bfloat16* hr = xhat + r * D;
      for (int64_t c = 0; c < D; ++c) hr[c] = bfloat16(static_cast<float>(static_cast<T>((xr[c] - mu) * s)));
    }
  }
}

// x̂ = (x − m) · sx of row r: X = T, x is the forward's input (m = μ, sx = rstd); X = bfloat16, x is
// x̂ itself, as the forward saved it under autocast (m = 0, sx = 1; mean is not read).
template <class X>
[[gnu::always_inline]] inline std::pair<double, double> centre_scale(const double* mean, const double* rstd,
                                                                     int64_t r) {
  if constexpr (std::is_same_v<X, bfloat16>) return {0.0, 1.0};
  return {mean[r], rstd[r]};
}

// Rows [r, r + N) with g = dy ⊙ w (in float64): a = mean_c g and b = mean_c(g ⊙ x̂), each row's sums
// in its own lanes, interleaved as row_statistics's.
template <int N, class T, class X>
[[gnu::always_inline]] inline void row_gradient_means(const T* dy, const X* x, const double* mean,
                                                      const double* rstd, const T* w, int64_t r, int64_t D,
                                                      double* a, double* b) {
  const int64_t full = D - D % kLanes;
  Lanes sum_g[N] = {}, sum_gx[N] = {}, g, v, wv;
  double m[N], sx[N];
  for (int i = 0; i < N; ++i) std::tie(m[i], sx[i]) = centre_scale<X>(mean, rstd, r + i);
  for (int64_t c = 0; c < full; c += kLanes)
    for (int i = 0; i < N; ++i) {
      load(g, dy + (r + i) * D + c);
      if (w) load(wv, w + c), g *= wv;
      load(v, x + (r + i) * D + c);
      sum_g[i] += g;
      sum_gx[i] += g * ((v - m[i]) * sx[i]);
    }
  for (int i = 0; i < N; ++i) {
    const T* gr = dy + (r + i) * D;
    const X* xr = x + (r + i) * D;
    for (int64_t c = full; c < D; ++c) {
      const double gc = w ? static_cast<double>(gr[c]) * w[c] : gr[c];
      sum_g[i][c - full] += gc;
      sum_gx[i][c - full] += gc * ((xr[c] - m[i]) * sx[i]);
    }
    a[i] = total(sum_g[i]) / static_cast<double>(D);
    b[i] = total(sum_gx[i]) / static_cast<double>(D);
  }
}

// Rows [r0, r1) with x̂ = (x − μ) · rstd, g = dy ⊙ w (in float64): where dx is wanted,
// dx = rstd · (g − mean_c g − x̂ ⊙ mean_c(g ⊙ x̂)); where pw, pb are wanted, the rows' part of dweight
// and dbias, pw += Σ_rows dy ⊙ x̂, pb += Σ_rows dy, row after row. X as centre_scale's.
template <class T, class X>
[[gnu::always_inline]] inline void backward_rows(const T* dy, const X* x, const double* mean, const double* rstd,
                                                 const T* w, T* dx, double* pw, double* pb, int64_t r0, int64_t r1,
                                                 int64_t D) {
  for (int64_t r = r0; r < r1;) {
    const int n = r + kInterleaved <= r1 ? kInterleaved : 1;
    double a[kInterleaved], b[kInterleaved];
    if (dx && n == kInterleaved) row_gradient_means<kInterleaved>(dy, x, mean, rstd, w, r, D, a, b);
    if (dx && n == 1) row_gradient_means<1>(dy, x, mean, rstd, w, r, D, a, b);
    for (int i = 0; i < n; ++i, ++r) {
      const T* gr = dy + r * D;
      const X* xr = x + r * D;
      const auto [m, sx] = centre_scale<X>(mean, rstd, r);
      if (dx) {
        T* dr = dx + r * D;
        for (int64_t c = 0; c < D; ++c) {
          const double gc = w ? static_cast<double>(gr[c]) * w[c] : gr[c];
          dr[c] = static_cast<T>(rstd[r] * (gc - a[i] - (xr[c] - m) * sx * b[i]));
        }
      }
      if (pw)
        for (int64_t c = 0; c < D; ++c) pw[c] += gr[c] * ((xr[c] - m) * sx);
      if (pb)
        for (int64_t c = 0; c < D; ++c) pb[c] += gr[c];
    }
  }
}

template <class T>
void forward_rows_baseline(const T* x, const T* w, const T* b, T* y, bfloat16* xhat, double* mean, double* rstd,
                           int64_t r0, int64_t r1, int64_t D, double eps) {
  forward_rows(x, w, b, y, xhat, mean, rstd, r0, r1, D, eps);
}
template <class T, class X>
void backward_rows_baseline(const T* dy, const X* x, const double* mean, const double* rstd, const T* w, T* dx,
                            double* pw, double* pb, int64_t r0, int64_t r1, int64_t D) {
  backward_rows(dy, x, mean, rstd, w, dx, pw, pb, r0, r1, D);
}
#if TP_CPU_DISPATCH
template <class T>
TP_TARGET_AVX2 void forward_rows_avx2(const T* x, const T* w, const T* b, T* y, bfloat16* xhat, double* mean,
                                      double* rstd, int64_t r0, int64_t r1, int64_t D, double eps) {
  forward_rows(x, w, b, y, xhat, mean, rstd, r0, r1, D, eps);
}
template <class T, class X>
TP_TARGET_AVX2 void backward_rows_avx2(const T* dy, const X* x, const double* mean, const double* rstd, const T* w,
                                       T* dx, double* pw, double* pb, int64_t r0, int64_t r1, int64_t D) {
  backward_rows(dy, x, mean, rstd, w, dx, pw, pb, r0, r1, D);
}
template <class T>
TP_TARGET_AVX512 void forward_rows_avx512(const T* x, const T* w, const T* b, T* y, bfloat16* xhat, double* mean,
                                          double* rstd, int64_t r0, int64_t r1, int64_t D, double eps) {
  forward_rows(x, w, b, y, xhat, mean, rstd, r0, r1, D, eps);
}
template <class T, class X>
TP_TARGET_AVX512 void backward_rows_avx512(const T* dy, const X* x, const double* mean, const double* rstd,
                                           const T* w, T* dx, double* pw, double* pb, int64_t r0, int64_t r1,
                                           int64_t D) {
  backward_rows(dy, x, mean, rstd, w, dx, pw, pb, r0, r1, D);
}
#endif

// The widest capability in use, for float32 and float64 alike (the same bits on each).
template <class T>
decltype(&forward_rows_baseline<T>) forward_kernel() {
#if TP_CPU_DISPATCH
  switch (cpu_capability()) {
    case CpuCapability::Avx512: return forward_rows_avx512<T>;
    case CpuCapability::Avx2: return forward_rows_avx2<T>;
    case CpuCapability::Baseline: break;
  }
#endif
  return forward_rows_baseline<T>;
}

// The same for the backward of T's rows from the saved X (T: x; bfloat16: x̂).
template <class T, class X>
decltype(&backward_rows_baseline<T, X>) backward_kernel() {
#if TP_CPU_DISPATCH
  switch (cpu_capability()) {
    case CpuCapability::Avx512: return backward_rows_avx512<T, X>;
    case CpuCapability::Avx2: return backward_rows_avx2<T, X>;
    case CpuCapability::Baseline: break;
  }
#endif
  return backward_rows_baseline<T, X>;
}

// h[i] += x[i] for i in [0, n): dropout_add_layer_norm's x + dropout(s), compiled as the row kernels are.
template <class T>
[[gnu::always_inline]] inline void add_into(const T* x, T* h, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) h[i] = x[i] + h[i];
}
template <class T>
void add_into_baseline(const T* x, T* h, int64_t n) {
  add_into(x, h, n);
}
#if TP_CPU_DISPATCH
template <class T>
TP_TARGET_AVX2 void add_into_avx2(const T* x, T* h, int64_t n) {
  add_into(x, h, n);
}
template <class T>
TP_TARGET_AVX512 void add_into_avx512(const T* x, T* h, int64_t n) {
  add_into(x, h, n);
}
#endif

template <class T>
decltype(&add_into_baseline<T>) add_into_kernel() {
#if TP_CPU_DISPATCH
  switch (cpu_capability()) {
    case CpuCapability::Avx512: return add_into_avx512<T>;
    case CpuCapability::Avx2: return add_into_avx2<T>;
    case CpuCapability::Baseline: break;
  }
#endif
  return add_into_baseline<T>;
}

// What a caller does with rows [r0, r1) of the (R, D) rows, beside the kernels' work on them.
using RowsFn = std::function<void(int64_t r0, int64_t r1)>;

// With `save_xhat`, f.xhat is x̂ in bfloat16 (autocast's saved tensor) and f.mean is left undefined.
// On the CPU, `rows_first` (where given) writes each chunk of x's rows before the chunk is normalised,
// on the thread that normalises it, so that the rows are in its cache (dropout_add_layer_norm).
Forward layer_norm_forward(const Tensor& x, const Rows& rows, const Tensor& weight, const Tensor& bias, double eps,
                           bool save_xhat, const RowsFn& rows_first = {}) {
  const Tensor xc = contiguous(x.detach());
  const Tensor wc = weight.defined() ? contiguous(weight.detach()) : Tensor();
  const Tensor bc = bias.defined() ? contiguous(bias.detach()) : Tensor();
  const int64_t R = rows.R, D = rows.D;
  Forward out{empty(x.shape(), x.options()), empty({R}, {DType::Float64, x.device()}),
              empty({R}, {DType::Float64, x.device()}),
              save_xhat ? empty(x.shape(), {DType::BFloat16, x.device()}) : Tensor()};
  const bool on_gpu = on_cuda("layer_norm", x, [&] {
    cuda::layer_norm_forward(xc, wc, bc, eps, R, D, out.y, out.xhat, out.mean, out.rstd);
  });
  if (!on_gpu) visit_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = forward_kernel<T>();
    const T* w = wc.defined() ? wc.data<T>() : nullptr;
    const T* b = bc.defined() ? bc.data<T>() : nullptr;
    bfloat16* xhat = save_xhat ? out.xhat.data<bfloat16>() : nullptr;
    const int64_t chunks = (R + kRowChunk - 1) / kRowChunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && R * D > kParallelWork)
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t r0 = k * kRowChunk, r1 = std::min(R, (k + 1) * kRowChunk);
      if (rows_first) rows_first(r0, r1);
      kernel(xc.data<T>(), w, b, out.y.data<T>(), xhat, out.mean.data<double>(), out.rstd.data<double>(), r0, r1, D,
             eps);
    }
  });
  if (save_xhat) out.mean = Tensor();  // the backward reads x̂, not x − μ
  return out;
}

// One pass over the rows, in chunks of kRowChunk, for dx and each chunk's part of dweight and dbias;
// the parts are then added in chunk order (deterministic: no atomics, the same sums for any number
// of threads). `saved` is what the forward kept: x, or x̂ in bfloat16 (then mean_t is undefined).
// On the CPU, `rows_then` (where given) reads each chunk of dx's rows once they are written, on the
// same thread, while they are in its cache (dropout_add_layer_norm).
using DxRowsFn = std::function<void(const Tensor& dx, int64_t r0, int64_t r1)>;
Backward layer_norm_backward(const Tensor& dy_in, const Tensor& saved, const Tensor& mean_t, const Tensor& rstd_t,
                             const Tensor& weight, const Rows& rows, Wanted want, const DxRowsFn& rows_then = {}) {
  const Tensor dy = contiguous(dy_in);
  const bool saved_xhat = saved.dtype() == DType::BFloat16;
  const int64_t R = rows.R, D = rows.D;
  Backward out;
  if (want.dx) out.dx = empty(saved.shape(), dy.options());
  if (want.dweight) out.dweight = empty(rows.normalized, dy.options());
  if (want.dbias) out.dbias = empty(rows.normalized, dy.options());
  // The CUDA kernels read x̂ in dy's dtype: widened for the call.
  if (on_cuda("layer_norm", dy_in, [&] {
        cuda::layer_norm_backward(dy, saved_xhat ? to(saved, dy.dtype()) : saved, mean_t, rstd_t, weight, R, D,
                                  out.dx, out.dweight, out.dbias);
      }))
    return out;
  visit_floating(dy.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    T* dx = want.dx ? out.dx.data<T>() : nullptr;
    const int64_t chunks = (R + kRowChunk - 1) / kRowChunk;
    std::vector<double> pw(want.dweight ? chunks * D : 0), pb(want.dbias ? chunks * D : 0);
    const auto run = [&](auto kernel, const auto* x, const double* mean) {
#pragma omp parallel for schedule(static) if (chunks > 1 && R * D > kParallelWork)
      for (int64_t k = 0; k < chunks; ++k) {
        const int64_t r0 = k * kRowChunk, r1 = std::min(R, (k + 1) * kRowChunk);
        kernel(dy.data<T>(), x, mean, rstd_t.data<double>(), w, dx, pw.empty() ? nullptr : pw.data() + k * D,
               pb.empty() ? nullptr : pb.data() + k * D, r0, r1, D);
        if (rows_then) rows_then(out.dx, r0, r1);
      }
    };
    if (saved_xhat)
      run(backward_kernel<T, bfloat16>(), saved.data<bfloat16>(), nullptr);
    else
      run(backward_kernel<T, T>(), saved.data<T>(), mean_t.data<double>());
    const auto total = [&](const std::vector<double>& parts, Tensor& result) {
      T* dst = result.data<T>();
      for (int64_t c = 0; c < D; ++c) {
        double sum = 0;
        for (int64_t k = 0; k < chunks; ++k) sum += parts[k * D + c];
        dst[c] = static_cast<T>(sum);
      }
    };
    if (want.dweight) total(pw, out.dweight);
    if (want.dbias) total(pb, out.dbias);
  });
  return out;
}

void check_parameter(const char* op, const char* what, const Tensor& p, const Tensor& x,
                     const Shape& normalized_shape) {
  if (!p.defined()) return;
  check_same_device(op, {&x, &p});
  TP_CHECK(p.dtype() == x.dtype(), op, what, " has dtype ", p.dtype(), " but x has ", x.dtype(),
           " (shape ", to_string(x.shape()), ")");
  TP_CHECK(p.shape() == normalized_shape, op, what, " has shape ", to_string(p.shape()),
           " but the normalized shape is ", to_string(normalized_shape), " (x has shape ",
           to_string(x.shape()), ")");
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  if (autocast_widens({&x}))  // ops/autocast.h
    return layer_norm(autocast_float32(x), normalized_shape, weight, bias, eps);
  check_floating("layer_norm", x);
  const int64_t k = static_cast<int64_t>(normalized_shape.size());
  TP_CHECK(k >= 1 && k <= x.dim() && Shape(x.shape().end() - k, x.shape().end()) == normalized_shape,
           "layer_norm", "the normalized shape ", to_string(normalized_shape),
           " must be a non-empty list of trailing dims of x, whose shape is ", to_string(x.shape()));
  TP_CHECK(eps >= 0 && std::isfinite(eps), "layer_norm", "eps must be finite and non-negative, got ", eps);
  check_parameter("layer_norm", "weight", weight, x, normalized_shape);
  check_parameter("layer_norm", "bias", bias, x, normalized_shape);

  const Rows rows{numel(Shape(x.shape().begin(), x.shape().end() - k)), numel(normalized_shape), normalized_shape};
  std::vector<Tensor> inputs{x};
  const size_t wi = weight.defined() ? inputs.size() : 0;  // 0: absent (input 0 is x)
  if (weight.defined()) inputs.push_back(weight);
  const size_t bi = bias.defined() ? inputs.size() : 0;
  if (bias.defined()) inputs.push_back(bias);
  // Under autocast the backward keeps x̂ in bfloat16 rather than x (the file's comment).
  const bool save_xhat = autocast_enabled() && x.dtype() == DType::Float32 && should_record(inputs);
  const Tensor xc = contiguous(x.detach());
  Forward f = layer_norm_forward(xc, rows, weight, bias, eps, save_xhat);

  // x̂ = (x − μ) · rstd, g = dy ⊙ w:  dx = rstd · (g − mean_c g − x̂ ⊙ mean_c(g ⊙ x̂))
  // dweight = Σ_rows dy ⊙ x̂,  dbias = Σ_rows dy
  record("layer_norm", inputs, {f.y},
         [rows, wi, bi, save_xhat, xs = Saved(save_xhat ? f.xhat : xc),
          ws = weight.defined() ? Saved(contiguous(weight.detach())) : Saved(),
          means = save_xhat ? Saved() : Saved(f.mean), rstds = Saved(f.rstd)](const std::vector<Tensor>& dy,
                                                                               Gradients& g) {
           const Wanted want{g.needs(0), wi && g.needs(wi), bi && g.needs(bi)};
           const Backward b = layer_norm_backward(dy[0], xs.get(), save_xhat ? Tensor() : means.get(), rstds.get(),
                                                  wi ? ws.get() : Tensor(), rows, want);
           if (want.dx) g.accumulate(0, b.dx);
           if (want.dweight) g.accumulate(wi, b.dweight);
           if (want.dbias) g.accumulate(bi, b.dbias);
         });
  return f.y;
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  if (autocast_widens({&x})) return layer_norm(autocast_float32(x), weight, bias, eps);  // ops/autocast.h
  check_floating("layer_norm", x);
  TP_CHECK(x.dim() >= 1, "layer_norm", "expected a tensor of at least 1 dim, got a 0-d tensor");
  return layer_norm(x, Shape{x.shape().back()}, weight, bias, eps);
}

Tensor dropout_add_layer_norm(const Tensor& x, const Tensor& s, double p, Generator& gen, Mode mode,
                              const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "dropout_add_layer_norm";
  TP_CHECK(x.defined() && s.defined(), op, "got an undefined tensor");
  // Under autocast s may be a bfloat16 product beside a float32 x; the add promotes it.
  TP_CHECK(x.shape() == s.shape() && (x.dtype() == s.dtype() || autocast_enabled()), op,
           "x and s must be of one shape and dtype, got ", x.dtype(), " ", to_string(x.shape()), " and ", s.dtype(),
           " ", to_string(s.shape()));
  check_same_device(op, {&x, &s});
  check_floating(op, x);
  check_floating(op, s);
  TP_CHECK(x.dim() >= 1, op, "expected tensors of at least 1 dim, got 0-d ones");
  TP_CHECK(p >= 0 && p < 1, op, "the drop probability p must lie in [0, 1), got ", p);
  // The three ops where the fused loops do not run: on a GPU, in bfloat16, and under autocast (whose
  // layer_norm keeps x̂ in bfloat16 for its backward).
  const bool fused = x.device().is_cpu() && (x.dtype() == DType::Float32 || x.dtype() == DType::Float64) &&
                     !autocast_enabled();
  if (!fused) return layer_norm(x + dropout(s, p, gen, mode), weight, bias, eps);

  const int64_t D = x.shape().back();
  const Rows rows{x.numel() / std::max<int64_t>(D, 1), D, Shape{D}};
  check_parameter(op, "weight", weight, x, rows.normalized);
  check_parameter(op, "bias", bias, x, rows.normalized);
  TP_CHECK(eps >= 0 && std::isfinite(eps), op, "eps must be finite and non-negative, got ", eps);
  // dropout's draw, reserved as dropout reserves it (also for p = 0); none in eval mode.
  const bool masked = mode == Mode::Train && p > 0;
  const DropoutDraw draw = mode == Mode::Train ? reserve_dropout(gen, x.numel(), p) : DropoutDraw{};
  const Tensor xc = contiguous(x.detach()), sc = contiguous(s.detach());
  // h = x + dropout(s), a chunk of rows at a time, just before the chunk is normalised; the
  // backward reads h as layer_norm's reads its x.
  const Tensor h = empty(x.shape(), x.options());
  Forward f;
  visit_floating(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T *xp = xc.data<T>(), *sp = sc.data<T>();
    T* hp = h.data<T>();
    const auto add = add_into_kernel<T>();
    f = layer_norm_forward(h, rows, weight, bias, eps, false, [&](int64_t r0, int64_t r1) {
      const int64_t begin = r0 * D, end = r1 * D;
      if (masked) apply_dropout(draw, sp + begin, hp + begin, begin, end);
      else std::copy(sp + begin, sp + end, hp + begin);
      add(xp + begin, hp + begin, end - begin);  // add's x + d, in T
    });
  });

  std::vector<Tensor> inputs{x, s};
  const size_t wi = weight.defined() ? inputs.size() : 0;  // 0: absent
  if (weight.defined()) inputs.push_back(weight);
  const size_t bi = bias.defined() ? inputs.size() : 0;
  if (bias.defined()) inputs.push_back(bias);
  // dh: layer_norm's dx at h;  dx = dh,  ds = dropout's backward of dh (its mask drawn again)
  record(op, inputs, {f.y},
         [rows, wi, bi, masked, draw, hs = Saved(h), means = Saved(f.mean), rstds = Saved(f.rstd),
          ws = weight.defined() ? Saved(contiguous(weight.detach())) : Saved()](const std::vector<Tensor>& dy,
                                                                               Gradients& g) {
           const Wanted want{g.needs(0) || g.needs(1), wi && g.needs(wi), bi && g.needs(bi)};
           Tensor ds = g.needs(1) && masked ? empty(hs.get().shape(), dy[0].options()) : Tensor();
           Backward b;
           visit_floating(dy[0].dtype(), "dropout_add_layer_norm", [&](auto tag) {
             using T = decltype(tag);
             T* dsp = ds.defined() ? ds.data<T>() : nullptr;
             b = layer_norm_backward(dy[0], hs.get(), means.get(), rstds.get(), wi ? ws.get() : Tensor(), rows, want,
                                     [&](const Tensor& dh, int64_t r0, int64_t r1) {
                                       if (!dsp) return;
                                       const int64_t begin = r0 * rows.D, end = r1 * rows.D;
                                       apply_dropout(draw, dh.data<T>() + begin, dsp + begin, begin, end);
                                     });
           });
           if (g.needs(1)) g.accumulate(1, masked ? ds : b.dx);
           if (g.needs(0)) g.accumulate(0, std::move(b.dx));
           if (want.dweight) g.accumulate(wi, b.dweight);
           if (want.dbias) g.accumulate(bi, b.dbias);
         });
  return f.y;
}

}  // namespace tapestry
