// Layer norm. Shapes: x, y, dy (R, D) seen as R rows of the D normalized elements; weight, bias
// (D); the saved per-row statistics mean, rstd (R), float64 whatever x's dtype: x − μ in float32
// would round μ to x's precision, which costs digits when |μ| ≫ σ.
#include "ops/norm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/cpu_capability.h"
#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/norm.h"
#include "ops/dispatch.h"
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

[[gnu::always_inline]] inline double total(const Lanes& a) {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// Rows [r0, r1): μ = Σ x / D, σ² = Σ (x − μ)² / D (two passes, in float64), rstd = 1 / √(σ² + eps),
// y = (x − μ) · rstd ⊙ w + b.
template <class T>
[[gnu::always_inline]] inline void forward_rows(const T* x, const T* w, const T* b, T* y, double* mean,
                                                double* rstd, int64_t r0, int64_t r1, int64_t D, double eps) {
  const int64_t full = D - D % kLanes;
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    Lanes sum = {}, sq = {}, v;
    for (int64_t c = 0; c < full; c += kLanes) load(v, xr + c), sum += v;
    for (int64_t c = full; c < D; ++c) sum[c - full] += xr[c];
    const double mu = D > 0 ? total(sum) / static_cast<double>(D) : 0.0;
    for (int64_t c = 0; c < full; c += kLanes) load(v, xr + c), v -= mu, sq += v * v;
    for (int64_t c = full; c < D; ++c) sq[c - full] += (xr[c] - mu) * (xr[c] - mu);
    const double var = D > 0 ? total(sq) / static_cast<double>(D) : 0.0;
    const double s = 1.0 / std::sqrt(var + eps);
    mean[r] = mu;
    rstd[r] = s;
    if (w && b) {
      for (int64_t c = 0; c < D; ++c) yr[c] = static_cast<T>((xr[c] - mu) * s) * w[c] + b[c];
    } else {
      for (int64_t c = 0; c < D; ++c) {
        const T xhat = static_cast<T>((xr[c] - mu) * s);
        yr[c] = (w ? xhat * w[c] : xhat) + (b ? b[c] : T(0));
      }
    }
  }
}

// Rows [r0, r1) with x̂ = (x − μ) · rstd, g = dy ⊙ w (in float64): where dx is wanted,
// dx = rstd · (g − mean_c g − x̂ ⊙ mean_c(g ⊙ x̂)); where pw, pb are wanted, the rows' part of dweight
// and dbias, pw += Σ_rows dy ⊙ x̂, pb += Σ_rows dy (in the same pass over dy and x).
template <class T>
[[gnu::always_inline]] inline void backward_rows(const T* dy, const T* x, const double* mean, const double* rstd,
                                                 const T* w, T* dx, double* pw, double* pb, int64_t r0, int64_t r1,
                                                 int64_t D) {
  const int64_t full = D - D % kLanes;
  for (int64_t r = r0; r < r1; ++r) {
    const T* gr = dy + r * D;
    const T* xr = x + r * D;
    const double m = mean[r], s = rstd[r];
    if (dx) {
      Lanes sum_g = {}, sum_gx = {}, g, v, wv;
      for (int64_t c = 0; c < full; c += kLanes) {
        load(g, gr + c);
        if (w) load(wv, w + c), g *= wv;
        load(v, xr + c);
        sum_g += g;
        sum_gx += g * ((v - m) * s);
      }
      for (int64_t c = full; c < D; ++c) {
        const double gc = w ? static_cast<double>(gr[c]) * w[c] : gr[c];
        sum_g[c - full] += gc;
        sum_gx[c - full] += gc * ((xr[c] - m) * s);
      }
      const double a = total(sum_g) / static_cast<double>(D), b = total(sum_gx) / static_cast<double>(D);
      T* dr = dx + r * D;
      for (int64_t c = 0; c < D; ++c) {
        const double gc = w ? static_cast<double>(gr[c]) * w[c] : gr[c];
        dr[c] = static_cast<T>(s * (gc - a - (xr[c] - m) * s * b));
      }
    }
    if (pw)
      for (int64_t c = 0; c < D; ++c) pw[c] += gr[c] * ((xr[c] - m) * s);
    if (pb)
      for (int64_t c = 0; c < D; ++c) pb[c] += gr[c];
  }
}

template <class T>
void forward_rows_baseline(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd, int64_t r0,
                           int64_t r1, int64_t D, double eps) {
  forward_rows(x, w, b, y, mean, rstd, r0, r1, D, eps);
}
template <class T>
void backward_rows_baseline(const T* dy, const T* x, const double* mean, const double* rstd, const T* w, T* dx,
                            double* pw, double* pb, int64_t r0, int64_t r1, int64_t D) {
  backward_rows(dy, x, mean, rstd, w, dx, pw, pb, r0, r1, D);
}
#if TP_CPU_DISPATCH
template <class T>
TP_TARGET_AVX2 void forward_rows_avx2(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd,
                                      int64_t r0, int64_t r1, int64_t D, double eps) {
  forward_rows(x, w, b, y, mean, rstd, r0, r1, D, eps);
}
template <class T>
TP_TARGET_AVX2 void backward_rows_avx2(const T* dy, const T* x, const double* mean, const double* rstd, const T* w,
                                       T* dx, double* pw, double* pb, int64_t r0, int64_t r1, int64_t D) {
  backward_rows(dy, x, mean, rstd, w, dx, pw, pb, r0, r1, D);
}
template <class T>
TP_TARGET_AVX512 void forward_rows_avx512(const T* x, const T* w, const T* b, T* y, double* mean, double* rstd,
                                          int64_t r0, int64_t r1, int64_t D, double eps) {
  forward_rows(x, w, b, y, mean, rstd, r0, r1, D, eps);
}
template <class T>
TP_TARGET_AVX512 void backward_rows_avx512(const T* dy, const T* x, const double* mean, const double* rstd,
                                           const T* w, T* dx, double* pw, double* pb, int64_t r0, int64_t r1,
                                           int64_t D) {
  backward_rows(dy, x, mean, rstd, w, dx, pw, pb, r0, r1, D);
}
#endif

template <class T>
struct RowKernels {
  decltype(&forward_rows_baseline<T>) forward;
  decltype(&backward_rows_baseline<T>) backward;
};

// The widest capability in use, for float32 and float64 alike (the same bits on each).
template <class T>
RowKernels<T> row_kernels() {
#if TP_CPU_DISPATCH
  switch (cpu_capability()) {
    case CpuCapability::Avx512: return {forward_rows_avx512<T>, backward_rows_avx512<T>};
    case CpuCapability::Avx2: return {forward_rows_avx2<T>, backward_rows_avx2<T>};
    case CpuCapability::Baseline: break;
  }
#endif
  return {forward_rows_baseline<T>, backward_rows_baseline<T>};
}

Forward layer_norm_forward(const Tensor& x, const Rows& rows, const Tensor& weight, const Tensor& bias, double eps) {
  const Tensor xc = contiguous(x.detach());
  const Tensor wc = weight.defined() ? contiguous(weight.detach()) : Tensor();
  const Tensor bc = bias.defined() ? contiguous(bias.detach()) : Tensor();
  Forward out{empty(x.shape(), x.options()), empty({rows.R}, {DType::Float64, x.device()}),
              empty({rows.R}, {DType::Float64, x.device()})};
  const int64_t R = rows.R, D = rows.D;
  if (on_cuda("layer_norm", x, [&] { cuda::layer_norm_forward(xc, wc, bc, eps, R, D, out.y, out.mean, out.rstd); }))
    return out;
  visit_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = row_kernels<T>().forward;
    const T* w = wc.defined() ? wc.data<T>() : nullptr;
    const T* b = bc.defined() ? bc.data<T>() : nullptr;
    const int64_t chunks = (R + kRowChunk - 1) / kRowChunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && R * D > kParallelWork)
    for (int64_t k = 0; k < chunks; ++k)
      kernel(xc.data<T>(), w, b, out.y.data<T>(), out.mean.data<double>(), out.rstd.data<double>(), k * kRowChunk,
             std::min(R, (k + 1) * kRowChunk), D, eps);
  });
  return out;
}

// One pass over the rows, in chunks of kRowChunk, for dx and each chunk's part of dweight and dbias;
// the parts are then added in chunk order (deterministic: no atomics, the same sums for any number
// of threads).
Backward layer_norm_backward(const Tensor& dy_in, const Tensor& x, const Tensor& mean_t, const Tensor& rstd_t,
                             const Tensor& weight, const Rows& rows, Wanted want) {
  const Tensor dy = contiguous(dy_in);
  const int64_t R = rows.R, D = rows.D;
  Backward out;
  if (want.dx) out.dx = empty(x.shape(), x.options());
  if (want.dweight) out.dweight = empty(rows.normalized, x.options());
  if (want.dbias) out.dbias = empty(rows.normalized, x.options());
  if (on_cuda("layer_norm", dy_in, [&] {
        cuda::layer_norm_backward(dy, x, mean_t, rstd_t, weight, R, D, out.dx, out.dweight, out.dbias);
      }))
    return out;
  visit_floating(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = row_kernels<T>().backward;
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    T* dx = want.dx ? out.dx.data<T>() : nullptr;
    const int64_t chunks = (R + kRowChunk - 1) / kRowChunk;
    std::vector<double> pw(want.dweight ? chunks * D : 0), pb(want.dbias ? chunks * D : 0);
#pragma omp parallel for schedule(static) if (chunks > 1 && R * D > kParallelWork)
    for (int64_t k = 0; k < chunks; ++k)
      kernel(dy.data<T>(), x.data<T>(), mean_t.data<double>(), rstd_t.data<double>(), w, dx,
             pw.empty() ? nullptr : pw.data() + k * D, pb.empty() ? nullptr : pb.data() + k * D, k * kRowChunk,
             std::min(R, (k + 1) * kRowChunk), D);
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

void check_parameter(const char* what, const Tensor& p, const Tensor& x, const Shape& normalized_shape) {
  if (!p.defined()) return;
  check_same_device("layer_norm", {&x, &p});
  TP_CHECK(p.dtype() == x.dtype(), "layer_norm", what, " has dtype ", p.dtype(), " but x has ", x.dtype(),
           " (shape ", to_string(x.shape()), ")");
  TP_CHECK(p.shape() == normalized_shape, "layer_norm", what, " has shape ", to_string(p.shape()),
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
  check_parameter("weight", weight, x, normalized_shape);
  check_parameter("bias", bias, x, normalized_shape);

  const Rows rows{numel(Shape(x.shape().begin(), x.shape().end() - k)), numel(normalized_shape), normalized_shape};
  const Tensor xc = contiguous(x.detach());
  Forward f = layer_norm_forward(xc, rows, weight, bias, eps);

  std::vector<Tensor> inputs{x};
  const size_t wi = weight.defined() ? inputs.size() : 0;  // 0: absent (input 0 is x)
  if (weight.defined()) inputs.push_back(weight);
  const size_t bi = bias.defined() ? inputs.size() : 0;
  if (bias.defined()) inputs.push_back(bias);
  // x̂ = (x − μ) · rstd, g = dy ⊙ w:  dx = rstd · (g − mean_c g − x̂ ⊙ mean_c(g ⊙ x̂))
  // dweight = Σ_rows dy ⊙ x̂,  dbias = Σ_rows dy
  record("layer_norm", inputs, {f.y},
         [rows, wi, bi, xs = Saved(xc),
          ws = weight.defined() ? Saved(contiguous(weight.detach())) : Saved(), means = Saved(f.mean),
          rstds = Saved(f.rstd)](const std::vector<Tensor>& dy, Gradients& g) {
           const Wanted want{g.needs(0), wi && g.needs(wi), bi && g.needs(bi)};
           const Backward b = layer_norm_backward(dy[0], xs.get(), means.get(), rstds.get(),
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

}  // namespace tapestry
