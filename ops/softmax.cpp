// Softmax and log-softmax over the last dim. Shapes: x, y (R, C) seen as R rows of C classes
// (R = product of the leading dims); a mask broadcasts to x's full shape.
#include "ops/softmax.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/softmax.h"
#include "ops/dispatch.h"
#include "ops/fast_exp.h"
#include "ops/loops.h"
#include "ops/shape.h"

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

// Normalises each row of y in place; y holds z = x (+ bias), −inf where masked.
// The loops are `omp simd` reductions: lanes keep partial maxima and sums, so they vectorise
// (a single running double sum is a chain of dependent adds); float32 takes exp_nonpositive.
template <class T>
void normalize_row(Kind kind, T* y, int64_t C) {
  constexpr T inf = std::numeric_limits<T>::infinity();
  T m = -inf;
  int nan = 0;
#pragma omp simd reduction(max : m) reduction(| : nan)
  for (int64_t c = 0; c < C; ++c) {
    m = y[c] > m ? y[c] : m;
    nan |= y[c] != y[c];
  }
  if (nan) {  // a NaN makes the whole row NaN (docs/PORTING.md, "NaN"), never a masked row of zeros
    for (int64_t c = 0; c < C; ++c) y[c] = std::numeric_limits<T>::quiet_NaN();
    return;
  }
  if (m == -inf) {  // every entry masked: no distribution (documented in the header)
    for (int64_t c = 0; c < C; ++c) y[c] = kind == Kind::Softmax ? T(0) : -inf;
    return;
  }
  double s = 0;
  if (kind == Kind::Softmax) {
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; ++c) {
      y[c] = exp_nonpositive_of(y[c] - m);  // masked: e^−inf = 0 exactly
      s += y[c];
    }
    const T inv = static_cast<T>(1.0 / s);
    for (int64_t c = 0; c < C; ++c) y[c] *= inv;
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t c = 0; c < C; ++c) s += exp_nonpositive_of(y[c] - m);
    const T log_s = static_cast<T>(std::log(s));
    for (int64_t c = 0; c < C; ++c) y[c] = (y[c] - m) - log_s;  // −inf stays −inf
  }
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
      normalize_row(kind, yr, C);
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
    constexpr T inf = std::numeric_limits<T>::infinity();
    const T* g = dy.data<T>();
    const T* out = y.data<T>();
    T* dst = dx.data<T>();
#pragma omp parallel for schedule(static) if (R > 1 && R * C > kParallelWork)
    for (int64_t r = 0; r < R; ++r) {
      const T* gr = g + r * C;
      const T* yr = out + r * C;
      T* dr = dst + r * C;
      double acc = 0;
      if (kind == Kind::Softmax) {
#pragma omp simd reduction(+ : acc)
        for (int64_t c = 0; c < C; ++c) acc += static_cast<double>(gr[c]) * yr[c];
        const T dot = static_cast<T>(acc);
        for (int64_t c = 0; c < C; ++c) dr[c] = yr[c] * (gr[c] - dot);
      } else {
        for (int64_t c = 0; c < C; ++c)
          if (yr[c] != -inf) acc += gr[c];
        const T total = static_cast<T>(acc);
        for (int64_t c = 0; c < C; ++c) dr[c] = yr[c] == -inf ? T(0) : gr[c] - exp_nonpositive_of(yr[c]) * total;
      }
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
