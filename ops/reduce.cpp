#include "ops/reduce.h"

#include <omp.h>

#include "core/tape_graph.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cpu_capability.h"
#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/reduce.h"
#include "ops/cuda/reducers.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/elementwise_math.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

// Which dims a reduction removes, and the shapes around it.
struct Plan {
  std::vector<bool> reduced;  // per dim of x
  std::vector<int64_t> dims;  // the reduced dims, ascending
  Shape kept_shape;           // x's shape with reduced dims set to 1
  Shape out_shape;            // kept_shape, or without the reduced dims
  int64_t rows = 1;           // number of outputs
  int64_t length = 1;         // elements reduced into each
};

Plan make_plan(const char* op, const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim) {
  TP_CHECK(x.defined(), op, "got an undefined tensor");
  Plan p;
  p.reduced.assign(x.dim(), false);
  for (int64_t d : dims) {
    const int64_t k = normalize_dim(d, x.dim(), op);
    TP_CHECK(!p.reduced[k], op, "dim ", k, " appears twice in ", to_string(dims));
    p.reduced[k] = true;
  }
  for (int64_t d = 0; d < x.dim(); ++d) {
    p.kept_shape.push_back(p.reduced[d] ? 1 : x.shape()[d]);
    if (p.reduced[d]) p.length *= x.shape()[d], p.dims.push_back(d);
    else p.rows *= x.shape()[d];
    if (!p.reduced[d] || keepdim == KeepDim::Yes) p.out_shape.push_back(p.kept_shape.back());
  }
  return p;
}

std::vector<int64_t> all_dims(const Tensor& x) {
  std::vector<int64_t> dims(x.dim());
  for (int64_t d = 0; d < x.dim(); ++d) dims[d] = d;
  return dims;
}

// x laid out as a contiguous (rows, length) matrix: kept dims first, then reduced dims.
Tensor as_rows(const Tensor& x, const Plan& p) {
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (!p.reduced[d]) order.push_back(d);
  for (int64_t d = 0; d < x.dim(); ++d)
    if (p.reduced[d]) order.push_back(d);
  NoGradGuard no_grad;
  return contiguous(permute(x.detach(), order));
}

// out[r] = fold(row r) for each of p.rows rows; fold(const T* row, int64_t n) -> Out.
template <class T, class Out, class Fold>
Tensor reduce_rows(const Tensor& x, const Plan& p, DType out_dtype, Fold fold) {
  const Tensor rows = as_rows(x, p);
  Tensor out = empty(p.out_shape, {out_dtype, x.device()});
  const T* src = static_cast<const T*>(rows.raw_data());
  Out* dst = static_cast<Out*>(out.raw_data());
  const int64_t length = p.length;
#pragma omp parallel for schedule(static) if (p.rows > 1 && p.rows * length > 32768)
  for (int64_t r = 0; r < p.rows; ++r) dst[r] = fold(src + r * length, length);
  return out;
}

// The CUDA kernel (ops/cuda/reduce.h) over the same (rows, length) layout. Inline: only on_cuda's
// lambdas call it (ops/dispatch.h).
inline Tensor reduce_on_cuda(const char* op, cuda::Reduction kind, const Tensor& x, const Plan& p, DType out_dtype) {
  Tensor out = empty(p.out_shape, {out_dtype, x.device()});
  cuda::reduce_rows(op, kind, as_rows(x, p), p.rows, p.length, out);
  return out;
}

// Accumulates float32 and bfloat16 in double, integers in int64 (wrapping on overflow, ops/elementwise.h).
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, int64_t>;

// dy of a reduction, shaped to broadcast against x.
Tensor kept(const Tensor& dy, const Plan& p) { return reshape(dy, p.kept_shape); }

enum class Extreme { Max, Min };

// A row folded left with reducer R (ops/cuda/reducers.h), as each GPU thread folds its part.
template <class R, class T>
typename R::Out fold_row(const T* row, int64_t n) {
  const R r;
  auto acc = r.start(r.load(row[0], 0));
  for (int64_t i = 1; i < n; ++i) acc = r.combine(acc, r.load(row[i], i));
  return r.finish(acc);
}

// max / min propagate NaN, argmax / argmin point at the first NaN (ops/cuda/reducers.h).
Tensor extreme_forward(const char* op, const Tensor& x, const Plan& p, Extreme which) {
  const cuda::Reduction kind = which == Extreme::Max ? cuda::Reduction::Max : cuda::Reduction::Min;
  Tensor out;
  if (on_cuda(op, x, [&] { out = reduce_on_cuda(op, kind, x, p, x.dtype()); })) return out;
  return visit_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    return reduce_rows<T, T>(x, p, x.dtype(), [which](const T* row, int64_t n) {
      return which == Extreme::Max ? fold_row<cuda::MaxReducer<T>>(row, n) : fold_row<cuda::MinReducer<T>>(row, n);
    });
  });
}

Tensor extreme(const char* op, const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim, Extreme which) {
  if (autocast_widens({&x})) return extreme(op, autocast_float32(x), dims, keepdim, which);  // ops/autocast.h
  const Plan p = make_plan(op, x, dims, keepdim);
  TP_CHECK(p.length > 0, op, "cannot reduce over an empty dim of shape ", to_string(x.shape()));
  Tensor y = extreme_forward(op, x, p, which);
  // dx = dy ⊙ [x = y] / (number of elements equal to y in the reduced group)
  record(op, {x}, {y}, [p, xs = Saved(x), ys = Saved(y)](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor& x = xs.get();
    const Tensor hit = eq(x, reshape(ys.get(), p.kept_shape));
    const Tensor ties = sum(to(hit, x.dtype()), p.dims, KeepDim::Yes);
    g.accumulate(0, where(hit, kept(dy[0], p) / ties, zeros({}, x.options())));
  });
  return y;
}

Tensor arg_extreme(const char* op, const Tensor& x, int64_t dim, KeepDim keepdim, Extreme which) {
  if (autocast_widens({&x})) return arg_extreme(op, autocast_float32(x), dim, keepdim, which);  // ops/autocast.h
  const Plan p = make_plan(op, x, {dim}, keepdim);
  TP_CHECK(p.length > 0, op, "cannot reduce over an empty dim of shape ", to_string(x.shape()));
  const cuda::Reduction kind = which == Extreme::Max ? cuda::Reduction::ArgMax : cuda::Reduction::ArgMin;
  Tensor out;
  if (!on_cuda(op, x, [&] { out = reduce_on_cuda(op, kind, x, p, DType::Int64); })) {
    out = visit_numeric(x.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      return reduce_rows<T, int64_t>(x, p, DType::Int64, [which](const T* row, int64_t n) {
        return which == Extreme::Max ? fold_row<cuda::ArgMaxReducer<T>>(row, n) : fold_row<cuda::ArgMinReducer<T>>(row, n);
      });
    });
  }
  record_cut(op, {x}, {out});  // an index has no gradient
  return out;
}

// Whether x is contiguous and only its leading dims are reduced: a bias gradient, Σ over the rows
// of (rows, features). Such a sum adds whole rows into the outputs instead of transposing x first.
bool sums_leading_dims(const Tensor& x, const Plan& p) {
  if (p.rows == 1 || !x.is_contiguous()) return false;
  bool kept_seen = false;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!p.reduced[d]) kept_seen = true;
    else if (kept_seen) return false;
  }
  return true;
}

// Columns [c0, c0 + width) of an (n, cols) row-major matrix summed over its rows, from row 0 up in
// Acc<T>: the order and precision of reduce_rows. Compiled once per CPU capability below: the same
// additions in wider registers, so the same bits on each.
template <class T>
[[gnu::always_inline]] inline void column_block_sums(const T* src, int64_t cols, int64_t n, int64_t c0, int64_t width,
                                                     T* dst) {
  constexpr int64_t kColumns = 512;  // a block's accumulators stay in L1
  Acc<T> acc[kColumns] = {};
  for (int64_t i = 0; i < n; ++i) {
    const T* row = src + i * cols + c0;
    for (int64_t j = 0; j < width; ++j) acc[j] = math::wrapping_add(acc[j], static_cast<Acc<T>>(row[j]));
  }
  for (int64_t j = 0; j < width; ++j) dst[c0 + j] = static_cast<T>(acc[j]);
}
template <class T>
void column_block_sums_baseline(const T* src, int64_t cols, int64_t n, int64_t c0, int64_t width, T* dst) {
  column_block_sums(src, cols, n, c0, width, dst);
}
#if TP_CPU_DISPATCH
template <class T>
TP_TARGET_AVX2 void column_block_sums_avx2(const T* src, int64_t cols, int64_t n, int64_t c0, int64_t width, T* dst) {
  column_block_sums(src, cols, n, c0, width, dst);
}
template <class T>
TP_TARGET_AVX512 void column_block_sums_avx512(const T* src, int64_t cols, int64_t n, int64_t c0, int64_t width,
                                               T* dst) {
  column_block_sums(src, cols, n, c0, width, dst);
}
#endif

// x as a (length, rows) matrix summed over its first dim, in the same order and precision as
// reduce_rows: out[j] = Σ_i x[i][j], accumulated from i = 0 up in Acc<T>. The threads take blocks
// of columns: as many blocks as threads where the columns are few (a bias gradient's 64 or 256),
// blocks of 512 where they are many.
template <class T>
Tensor column_sums(const Tensor& x, const Plan& p) {
  auto kernel = column_block_sums_baseline<T>;
#if TP_CPU_DISPATCH
  if (cpu_capability() == CpuCapability::Avx512) kernel = column_block_sums_avx512<T>;
  if (cpu_capability() == CpuCapability::Avx2) kernel = column_block_sums_avx2<T>;
#endif
  Tensor out = empty(p.out_shape, x.options());
  const T* src = static_cast<const T*>(x.raw_data());
  T* dst = static_cast<T*>(out.raw_data());
  const int64_t cols = p.rows, n = p.length;
  const bool parallel = cols * n > 32768;
  const int64_t parts = parallel ? std::max<int64_t>(omp_get_max_threads(), 1) : 1;
  const int64_t block = std::clamp<int64_t>(((cols + parts - 1) / parts + 15) / 16 * 16, 16, 512);
#pragma omp parallel for schedule(static) if (parallel && cols > block)
  for (int64_t c0 = 0; c0 < cols; c0 += block) kernel(src, cols, n, c0, std::min(block, cols - c0), dst);
  return out;
}

Tensor sum_forward(const Tensor& x, const Plan& p) {
  Tensor out;
  if (on_cuda("sum", x, [&] { out = reduce_on_cuda("sum", cuda::Reduction::Sum, x, p, x.dtype()); })) return out;
  return visit_numeric_or_bfloat16(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    if (sums_leading_dims(x, p)) return column_sums<T>(x, p);
    return reduce_rows<T, T>(x, p, x.dtype(), [](const T* row, int64_t n) {
      Acc<T> acc = 0;
      for (int64_t i = 0; i < n; ++i) acc = math::wrapping_add(acc, static_cast<Acc<T>>(row[i]));
      return static_cast<T>(acc);
    });
  });
}

Tensor logsumexp_forward(const Tensor& x, const Plan& p) {
  Tensor out;
  if (on_cuda("logsumexp", x, [&] { out = reduce_on_cuda("logsumexp", cuda::Reduction::LogSumExp, x, p, x.dtype()); }))
    return out;
  return visit_floating(x.dtype(), "logsumexp", [&](auto tag) {
    using T = decltype(tag);
    return reduce_rows<T, T>(x, p, x.dtype(), [](const T* row, int64_t n) {
      // log Σ e^x = m + log Σ e^(x − m), m = max x
      T m = -std::numeric_limits<T>::infinity();
      for (int64_t i = 0; i < n; ++i) m = row[i] > m ? row[i] : m;
      if (std::isinf(m)) return m;  // all −inf (or empty): −inf; any +inf: +inf
      Acc<T> acc = 0;
      for (int64_t i = 0; i < n; ++i) acc += std::exp(static_cast<Acc<T>>(row[i] - m));
      return static_cast<T>(m + std::log(acc));
    });
  });
}

// Running sums along the last dim of x laid out by as_rows (kept dims first, `dim` last), put back
// in x's dim order.
Tensor cumsum_forward(const Tensor& x, const Plan& p, int64_t dim) {
  const Tensor rows = as_rows(x, p);
  Tensor out = empty(rows.shape(), rows.options());
  if (!on_cuda("cumsum", x, [&] { cuda::cumsum_rows(rows, p.rows, p.length, out); })) {
    visit_numeric(x.dtype(), "cumsum", [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(rows.raw_data());
      T* dst = static_cast<T*>(out.raw_data());
      const int64_t length = p.length;
#pragma omp parallel for schedule(static) if (p.rows > 1 && p.rows * length > 32768)
      for (int64_t r = 0; r < p.rows; ++r) cuda::cumsum_row(src + r * length, dst + r * length, length);
    });
  }
  // as_rows moved `dim` last; move it back.
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d) order.push_back(d < dim ? d : (d == dim ? x.dim() - 1 : d - 1));
  return contiguous(permute(out, order));
}

// √s with a gradient of 0 where s = 0 (instead of dy / 0 = ∞, which the inner derivative, 0 there,
// turns into NaN): the L2 norm and std of a constant group get a zero gradient, as in PyTorch.
Tensor sqrt_zero_grad_at_zero(const char* op, const Tensor& s) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = sqrt(s);
  }
  // ds = dy / (2y), and 0 where y = 0
  record(op, {s}, {y}, [ys = Saved(y)](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor& y = ys.get();
    const Tensor zero = eq(y, zeros({}, y.options()));
    g.accumulate(0, where(zero, zeros({}, y.options()), dy[0] / (masked_fill(y, zero, 1.0) * 2.0)));
  });
  return y;
}

}  // namespace

Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim) {
  const Plan p = make_plan("sum", x, dims, keepdim);
  Tensor y = sum_forward(x, p);
  // dx = dy broadcast over the reduced dims
  record("sum", {x}, {y}, [p, shape = x.shape()](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, expand(kept(dy[0], p), shape));
  });
  return y;
}

Tensor sum(const Tensor& x) { return sum(x, all_dims(x)); }

Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim) {
  check_floating("mean", x);
  const Plan p = make_plan("mean", x, dims, keepdim);
  return sum(x, dims, keepdim) / static_cast<double>(p.length);
}

Tensor mean(const Tensor& x) { return mean(x, all_dims(x)); }

Tensor max(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim) { return extreme("max", x, dims, keepdim, Extreme::Max); }
Tensor max(const Tensor& x) { return max(x, all_dims(x)); }
Tensor min(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim) { return extreme("min", x, dims, keepdim, Extreme::Min); }
Tensor min(const Tensor& x) { return min(x, all_dims(x)); }

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim) {
  if (autocast_widens({&x})) return logsumexp(autocast_float32(x), dims, keepdim);  // ops/autocast.h
  check_floating("logsumexp", x);
  const Plan p = make_plan("logsumexp", x, dims, keepdim);
  Tensor y = logsumexp_forward(x, p);
  // dx = dy ⊙ exp(x − y); where a group is all −inf (y = −inf), 0 = exp(−inf − 0) rather than
  // exp(−inf + inf) = NaN, so that a fully masked row does not poison the gradient.
  record("logsumexp", {x}, {y}, [p, xs = Saved(x), ys = Saved(y)](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor y = reshape(ys.get(), p.kept_shape);
    const Tensor all_minus_inf = eq(y, full({}, -std::numeric_limits<double>::infinity(), y.options()));
    g.accumulate(0, kept(dy[0], p) * exp(xs.get() - masked_fill(y, all_minus_inf, 0.0)));
  });
  return y;
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim, int64_t correction) {
  check_floating("var", x);
  const Plan p = make_plan("var", x, dims, keepdim);
  TP_CHECK(correction >= 0, "var", "correction must be non-negative, got ", correction);
  // Σ (x − μ)² / (N − c): built from differentiable ops, so its gradient
  // dx = dy ⊙ 2 (x − μ) / (N − c) comes from theirs.
  const Tensor centered = x - mean(x, dims, KeepDim::Yes);
  return sum(centered * centered, dims, keepdim) / static_cast<double>(p.length - correction);
}

Tensor argmax(const Tensor& x, int64_t dim, KeepDim keepdim) { return arg_extreme("argmax", x, dim, keepdim, Extreme::Max); }
Tensor argmin(const Tensor& x, int64_t dim, KeepDim keepdim) { return arg_extreme("argmin", x, dim, keepdim, Extreme::Min); }

Tensor stddev(const Tensor& x, const std::vector<int64_t>& dims, KeepDim keepdim, int64_t correction) {
  check_floating("stddev", x);
  make_plan("stddev", x, dims, keepdim);  // refuses bad dims, naming stddev
  return sqrt_zero_grad_at_zero("stddev", var(x, dims, keepdim, correction));
}

Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, KeepDim keepdim) {
  check_floating("norm", x);
  const Plan plan = make_plan("norm", x, dims, keepdim);  // refuses bad dims, naming norm
  // Built from differentiable ops: the gradients are those of Σ|x| (sign x, 0 at 0), of the root
  // below (x / ‖x‖, 0 for a zero group) and of max (shared among tied largest |x|).
  if (p == 1) return sum(abs(x), dims, keepdim);
  if (p == 2) return sqrt_zero_grad_at_zero("norm", sum(x * x, dims, keepdim));
  TP_CHECK(std::isinf(p) && p > 0, "norm", "p must be 1, 2 or inf, got ", p, " (x: ", x.dtype(), " of shape ",
           to_string(x.shape()), ")");
  TP_CHECK(plan.length > 0, "norm", "the inf-norm over an empty dim of shape ", to_string(x.shape()),
           " is undefined");
  return max(abs(x), dims, keepdim);
}

Tensor norm(const Tensor& x, double p) { return norm(x, p, all_dims(x)); }

Tensor cumsum(const Tensor& x, int64_t dim) {
  if (autocast_widens({&x})) return cumsum(autocast_float32(x), dim);  // ops/autocast.h
  TP_CHECK(x.defined(), "cumsum", "got an undefined tensor");
  TP_CHECK(x.dim() > 0, "cumsum", "needs a tensor of at least 1 dim, got a 0-d ", x.dtype());
  const int64_t d = normalize_dim(dim, x.dim(), "cumsum");
  const Plan p = make_plan("cumsum", x, {d}, KeepDim::Yes);
  Tensor y = cumsum_forward(x, p, d);
  // dx_i = Σ_{j ≥ i} dy_j: the running sums of dy taken from the far end
  record("cumsum", {x}, {y}, [d](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, flip(cumsum(flip(dy[0], {d}), d), {d}));
  });
  return y;
}

}  // namespace tapestry
