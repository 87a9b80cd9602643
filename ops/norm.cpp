// Layer norm. Shapes: x, y, dy (R, D) seen as R rows of the D normalized elements; weight, bias
// (D); the saved per-row statistics mean, rstd (R), float64 whatever x's dtype: x − μ in float32
// would round μ to x's precision, which costs digits when |μ| ≫ σ.
#include "ops/norm.h"

#include <algorithm>
#include <cmath>

#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/norm.h"
#include "ops/dispatch.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

constexpr int64_t kParallelWork = 32768;  // elements below which a loop stays on one thread
constexpr int64_t kColumnBlock = 64;      // columns per task when reducing dweight / dbias over rows

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

// μ = Σ x / D, σ² = Σ (x − μ)² / D (two passes, in double), rstd = 1 / √(σ² + eps),
// y = (x − μ) · rstd ⊙ w + b.
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
    const T* src = xc.data<T>();
    const T* w = wc.defined() ? wc.data<T>() : nullptr;
    const T* b = bc.defined() ? bc.data<T>() : nullptr;
    T* dst = out.y.data<T>();
    double* mean = out.mean.data<double>();
    double* rstd = out.rstd.data<double>();
#pragma omp parallel for schedule(static) if (R > 1 && R * D > kParallelWork)
    for (int64_t r = 0; r < R; ++r) {
      const T* xr = src + r * D;
      T* yr = dst + r * D;
      double sum = 0, sq = 0;
      for (int64_t c = 0; c < D; ++c) sum += xr[c];
      const double mu = D > 0 ? sum / static_cast<double>(D) : 0.0;
      for (int64_t c = 0; c < D; ++c) sq += (xr[c] - mu) * (xr[c] - mu);
      const double var = D > 0 ? sq / static_cast<double>(D) : 0.0;
      const double s = 1.0 / std::sqrt(var + eps);
      mean[r] = mu;
      rstd[r] = s;
      for (int64_t c = 0; c < D; ++c) {
        const T xhat = static_cast<T>((xr[c] - mu) * s);
        yr[c] = (w ? xhat * w[c] : xhat) + (b ? b[c] : T(0));
      }
    }
  });
  return out;
}

// One pass over rows for dx, one over column blocks for dweight / dbias (deterministic: no
// atomics, every sum runs in row order).
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
    const T* g = dy.data<T>();
    const T* src = x.data<T>();
    const double* mean = mean_t.data<double>();
    const double* rstd = rstd_t.data<double>();
    const T* w = weight.defined() ? weight.data<T>() : nullptr;
    if (want.dx) {
      T* dx = out.dx.data<T>();
#pragma omp parallel for schedule(static) if (R > 1 && R * D > kParallelWork)
      for (int64_t r = 0; r < R; ++r) {
        const T* gr = g + r * D;
        const T* xr = src + r * D;
        const double m = mean[r], s = rstd[r];
        double sum_g = 0, sum_gx = 0;
        for (int64_t c = 0; c < D; ++c) {
          const double gc = w ? gr[c] * w[c] : gr[c];
          sum_g += gc;
          sum_gx += gc * ((xr[c] - m) * s);
        }
        const double a = sum_g / static_cast<double>(D), b = sum_gx / static_cast<double>(D);
        T* dr = dx + r * D;
        for (int64_t c = 0; c < D; ++c) {
          const double gc = w ? gr[c] * w[c] : gr[c];
          dr[c] = static_cast<T>(s * (gc - a - (xr[c] - m) * s * b));
        }
      }
    }
    if (want.dweight || want.dbias) {
      T* dw = want.dweight ? out.dweight.data<T>() : nullptr;
      T* db = want.dbias ? out.dbias.data<T>() : nullptr;
      const int64_t blocks = (D + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (blocks > 1 && R * D > kParallelWork)
      for (int64_t k = 0; k < blocks; ++k) {
        const int64_t c0 = k * kColumnBlock, c1 = std::min(D, c0 + kColumnBlock);
        double acc_w[kColumnBlock] = {}, acc_b[kColumnBlock] = {};
        for (int64_t r = 0; r < R; ++r) {
          const T* gr = g + r * D;
          const T* xr = src + r * D;
          const double m = mean[r], s = rstd[r];
          for (int64_t c = c0; c < c1; ++c) {
            acc_w[c - c0] += gr[c] * ((xr[c] - m) * s);
            acc_b[c - c0] += gr[c];
          }
        }
        for (int64_t c = c0; c < c1; ++c) {
          if (dw) dw[c] = static_cast<T>(acc_w[c - c0]);
          if (db) db[c] = static_cast<T>(acc_b[c - c0]);
        }
      }
    }
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
