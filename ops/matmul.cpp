#include "ops/matmul.h"

#include <omp.h>

#include <algorithm>
#include <array>

#include "core/cpu_capability.h"
#include "core/profiler.h"

#include "ops/autocast.h"
#include "ops/blas.h"
#include "ops/common.h"
#include "ops/cuda/matmul.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/loops.h"
#include "ops/onednn_gemm.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

// How BLAS sees the last two dims (rows × cols) of an operand.
struct Layout {
  bool usable = false;
  bool column_major = false;  // element (i, j) at j·ld + i
  int64_t ld = 1;
};

Layout layout_of(const Tensor& t) {
  const int64_t n = t.dim();
  const int64_t rows = t.shape()[n - 2], cols = t.shape()[n - 1];
  const int64_t sr = t.strides()[n - 2], sc = t.strides()[n - 1];
  const int64_t min_rows = std::max<int64_t>(rows, 1), min_cols = std::max<int64_t>(cols, 1);
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= min_cols)) return {true, false, rows == 1 ? min_cols : sr};
  if ((rows == 1 || sr == 1) && (cols == 1 || sc >= min_rows)) return {true, true, cols == 1 ? min_rows : sc};
  return {};
}

// Below this many FLOPs a product runs on the calling thread: starting OpenMP's threads would cost
// more than they save.
constexpr double kParallelFlops = 1 << 20;

// c[i · ldc + j] += bias[j] for rows [r0, r1) and columns [c0, c1): a product's bias, added to its
// rows while they are in the core's cache. Compiled for each CPU capability: for the baseline alone,
// the loop ran in SSE2's four lanes and took 14 % of a linear layer 64 → 256 on 1950 rows
// (docs/PERFORMANCE.md). Each element is one rounded sum at any width: the same bits.
template <class T>
[[gnu::always_inline]] inline void add_bias(T* c, int64_t ldc, const T* bias, int64_t r0, int64_t r1, int64_t c0,
                                            int64_t c1) {
  for (int64_t i = r0; i < r1; ++i) {
    T* row = c + i * ldc;
#pragma omp simd
    for (int64_t j = c0; j < c1; ++j) row[j] += bias[j];
  }
}
template <class T>
void add_bias_baseline(T* c, int64_t ldc, const T* bias, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  add_bias(c, ldc, bias, r0, r1, c0, c1);
}
#if TP_CPU_DISPATCH
template <class T>
TP_TARGET_AVX2 void add_bias_avx2(T* c, int64_t ldc, const T* bias, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  add_bias(c, ldc, bias, r0, r1, c0, c1);
}
template <class T>
TP_TARGET_AVX512 void add_bias_avx512(T* c, int64_t ldc, const T* bias, int64_t r0, int64_t r1, int64_t c0,
                                      int64_t c1) {
  add_bias(c, ldc, bias, r0, r1, c0, c1);
}
#endif

// add_bias as the widest capability in use compiled it.
template <class T>
decltype(&add_bias_baseline<T>) add_bias_kernel() {
#if TP_CPU_DISPATCH
  switch (cpu_capability()) {
    case CpuCapability::Avx512: return add_bias_avx512<T>;
    case CpuCapability::Avx2: return add_bias_avx2<T>;
    case CpuCapability::Baseline: break;
  }
#endif
  return add_bias_baseline<T>;
}

// Whether the batch dims merge into one for every operand (a dim's stride is the next one's stride
// times the next one's size; dims of size 1 aside): cuBLAS then takes the batch in one call.
bool batch_merges(const Shape& batch, std::initializer_list<const Strides*> strides) {
  int64_t inner = -1;  // the previous dim of size > 1, from the innermost
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    if (inner >= 0)
      for (const Strides* s : strides)
        if ((*s)[d] != (*s)[inner] * batch[inner]) return false;
    inner = d;
  }
  return true;
}

// The batch part of an operand's strides, broadcast to `batch`.
Strides batch_strides(const Tensor& t, const Shape& batch) {
  const Tensor head = make_view(t, Shape(t.shape().begin(), t.shape().end() - 2),
                                Strides(t.strides().begin(), t.strides().end() - 2), 0);
  return broadcast_strides(head, batch);
}

// bfloat16 on the CPU, computed in float32: the operands converted, the float32 product rounded back
// into out (what a GPU's bfloat16 GEMM with float32 accumulation gives, up to the order of the sums).
void gemm_in_float32(const Shape& batch, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb,
                     const Tensor& out, double beta) {
  NoGradGuard no_grad;
  const Tensor out32 = beta == 0.0 ? empty(out.shape(), {DType::Float32, out.device()}) : to(out, DType::Float32);
  batched_gemm(batch, to(a, DType::Float32), ta, to(b, DType::Float32), tb, out32, beta);
  copy_(out, out32);
}

// op(t) with its batch dims as cpu_bf16_gemm takes it: a dim t is broadcast along has size 1.
Bf16Matrix bf16_matrix(const Tensor& t, Transpose transpose, const Shape& batch) {
  Bf16Matrix m{const_cast<void*>(t.raw_data()), {}, batch_strides(t, batch)};
  for (size_t d = 0; d < batch.size(); ++d) m.dims.push_back(m.strides[d] == 0 ? 1 : batch[d]);
  const int64_t n = t.dim(), swap = transpose == Transpose::Yes ? 1 : 0;
  m.dims.insert(m.dims.end(), {t.shape()[n - 2 + swap], t.shape()[n - 1 - swap]});
  m.strides.insert(m.strides.end(), {t.strides()[n - 2 + swap], t.strides()[n - 1 - swap]});
  return m;
}

// bfloat16 on the CPU: oneDNN's bfloat16 GEMM (ops/onednn_gemm.h: AMX or AVX-512 BF16) at the AVX-512
// capability (core/cpu_capability.h), where this build and CPU have it and it takes these layouts;
// else in float32. Both sum the products in float32 and round once. An `out` that accumulates over a
// broadcast batch dim (stride 0) has no oneDNN form.
void gemm_bf16_on_cpu(const Shape& batch, const Tensor& a, Transpose ta, const Tensor& b, Transpose tb,
                      const Tensor& out, double beta) {
  const Strides sc = batch_strides(out, batch);
  const int64_t m = out.shape()[out.dim() - 2], n = out.shape()[out.dim() - 1];
  const int64_t k = a.shape()[a.dim() - (ta == Transpose::Yes ? 2 : 1)];
  const bool use_onednn = a.dtype() == DType::BFloat16 && b.dtype() == DType::BFloat16 &&
                          cpu_capability() == CpuCapability::Avx512 && cpu_bf16_gemm_available() &&
                          std::find(sc.begin(), sc.end(), 0) == sc.end() && numel(batch) * m * n * k > 0;
  if (use_onednn && cpu_bf16_gemm(bf16_matrix(a, ta, batch), bf16_matrix(b, tb, batch),
                                  bf16_matrix(out, Transpose::No, batch), static_cast<float>(beta))) {
    profile_flops(2.0 * static_cast<double>(numel(batch)) * static_cast<double>(m) * static_cast<double>(n) *
                  static_cast<double>(k));
    return;
  }
  gemm_in_float32(batch, a, ta, b, tb, out, beta);  // (the float32 product counts the FLOPs)
}

}  // namespace

void batched_gemm(const Shape& batch, const Tensor& a_in, Transpose ta, const Tensor& b_in, Transpose tb,
                  const Tensor& out, double beta, const Tensor& bias) {
  check_same_device("matmul", {&a_in, &b_in, &out});
  if (bias.defined()) {
    TP_CHECK(batch.empty() && beta == 0.0 && bias.dim() == 1 && bias.size(0) == out.shape().back() &&
                 bias.dtype() == out.dtype(),
             "matmul", "internal error: a bias needs no batch, beta = 0 and a vector of out's dtype and last dim");
    // Added by each CPU thread below; elsewhere out starts as the bias and the product adds to it.
    if (!out.device().is_cpu() || out.dtype() == DType::BFloat16) {
      copy_(out, bias);
      batched_gemm(batch, a_in, ta, b_in, tb, out, 1.0);
      return;
    }
  }
  const Tensor bias_rows = bias.defined() ? contiguous(bias) : Tensor();
  if (out.dtype() == DType::BFloat16 && out.device().is_cpu()) {
    gemm_bf16_on_cpu(batch, a_in, ta, b_in, tb, out, beta);
    out.storage().bump_version();
    return;
  }
  Layout la = layout_of(a_in), lb = layout_of(b_in);
  Tensor a = la.usable ? a_in : contiguous(a_in.detach());
  Tensor b = lb.usable ? b_in : contiguous(b_in.detach());
  if (out.device().is_cuda()) {
    // cuBLAS takes a batch in one strided call only where its dims merge (batch_merges); else the
    // launcher makes one call per outer index, a launch each: q, k and v split into heads from
    // (B, N, H, E) are such operands, one call per sample. A copy in batch order is one kernel. An
    // operand broadcast along a batch dim (stride 0) is left as it is: a copy would materialise it.
    const Strides sa = batch_strides(a, batch), sb = batch_strides(b, batch), sc = batch_strides(out, batch);
    const auto broadcast = [](const Strides& s) { return std::find(s.begin(), s.end(), 0) != s.end(); };
    // (An `out` that accumulates over a broadcast batch dim stays looped: no copy can merge it.)
    if (!batch_merges(batch, {&sa, &sb, &sc}) && batch_merges(batch, {&sc})) {
      if (!batch_merges(batch, {&sa}) && !broadcast(sa)) a = contiguous(a.detach());
      if (!batch_merges(batch, {&sb}) && !broadcast(sb)) b = contiguous(b.detach());
    }
  }
  la = layout_of(a);
  lb = layout_of(b);
  const Layout lc = layout_of(out);
  TP_CHECK(lc.usable && !lc.column_major, "matmul", "internal error: output is not row-major");

  // op(X) as BLAS sees it: a column-major matrix is the transpose of a row-major one.
  const bool trans_a = (ta == Transpose::Yes) != la.column_major;
  const bool trans_b = (tb == Transpose::Yes) != lb.column_major;
  const int64_t m = out.shape()[out.dim() - 2], n = out.shape()[out.dim() - 1];
  const int64_t k = a.shape()[a.dim() - (ta == Transpose::Yes ? 2 : 1)];
  profile_flops(2.0 * static_cast<double>(numel(batch)) * static_cast<double>(m) * static_cast<double>(n) *
                static_cast<double>(k));

  const Strides sa = batch_strides(a, batch), sb = batch_strides(b, batch), sc = batch_strides(out, batch);
  const auto on_gpu = [&] {
    const Transpose flag_a = trans_a ? Transpose::Yes : Transpose::No, flag_b = trans_b ? Transpose::Yes : Transpose::No;
    cuda::batched_gemm({batch, a, b, out, flag_a, flag_b, m, n, k, la.ld, lb.ld, lc.ld, sa, sb, sc, beta});
  };
  if (!on_cuda("matmul", out, on_gpu)) {
    visit_floating(out.dtype(), "matmul", [&](auto tag) {
      using T = decltype(tag);
      const T* pa = static_cast<const T*>(a.raw_data());
      const T* pb = static_cast<const T*>(b.raw_data());
      T* pc = static_cast<T*>(out.raw_data());
      const T* pbias = bias_rows.defined() ? static_cast<const T*>(bias_rows.raw_data()) : nullptr;
      const int64_t count = numel(batch);
      if (count == 0 || m == 0 || n == 0) return;
      const auto offsets = [&](int64_t i) {  // of batch item i in a, b and out
        std::array<int64_t, 3> o{0, 0, 0};
        for (int64_t d = static_cast<int64_t>(batch.size()) - 1, rest = i; d >= 0; --d) {
          const int64_t index = rest % batch[d];
          rest /= batch[d];
          o[0] += index * sa[d], o[1] += index * sb[d], o[2] += index * sc[d];
        }
        return o;
      };
      if (k == 0) {  // an empty sum: out = beta · out, and beta = 0 never reads out (as in BLAS)
        for (int64_t i = 0; i < count; ++i)
          for (int64_t r = 0, oc = offsets(i)[2]; r < m; ++r)
            for (int64_t c = 0; c < n; ++c) {
              T& o = pc[oc + r * lc.ld + c];
              o = pbias ? pbias[c] : beta == 0 ? T(0) : o * static_cast<T>(beta);
            }
        return;
      }
      // OpenMP's threads share the work, BLAS on one thread in each (ops/blas.h): the batch's items,
      // or, with fewer items than threads, each product's rows of out (its columns where it has
      // fewer rows than columns), in a static schedule, so a thread count gives the same bits every
      // run (another count may round differently: BLAS's blocking follows the sizes it is given).
      // An `out` shared by several items (a broadcast batch dim: the backward summing over it) is
      // split by rows or columns alone, each thread adding the items in order.
      const bool shared_out = std::find(sc.begin(), sc.end(), 0) != sc.end();
      const int threads = omp_get_max_threads();
      const bool parallel = 2.0 * double(count) * double(m) * double(n) * double(k) >= kParallelFlops;
      const bool by_item = !shared_out && count >= threads;
      const bool by_rows = m >= n;
      const int64_t extent = by_rows ? m : n;
      const int64_t parts = by_item || !parallel ? 1 : std::min<int64_t>(threads, extent);
      const auto bias_kernel = add_bias_kernel<T>();
      // items [item_begin, item_end) of part `part`: out's rows (or columns) [first, last)
      const auto product = [&](int64_t item_begin, int64_t item_end, int64_t part) {
        const int64_t first = extent * part / parts, last = extent * (part + 1) / parts;
        for (int64_t i = item_begin; i < item_end && first < last; ++i) {
          const auto [oa, ob, oc] = offsets(i);
          if (by_rows)
            cpu_gemm<T>(trans_a, trans_b, last - first, n, k, T(1), pa + oa + (trans_a ? first : first * la.ld), la.ld,
                        pb + ob, lb.ld, static_cast<T>(beta), pc + oc + first * lc.ld, lc.ld);
          else
            cpu_gemm<T>(trans_a, trans_b, m, last - first, k, T(1), pa + oa, la.ld,
                        pb + ob + (trans_b ? first * lb.ld : first), lb.ld, static_cast<T>(beta), pc + oc + first,
                        lc.ld);
          if (pbias)  // the bias, over this part's rows (or columns) while they are in this core's cache
            bias_kernel(pc + oc, lc.ld, pbias, by_rows ? first : 0, by_rows ? last : m, by_rows ? 0 : first,
                        by_rows ? n : last);
        }
      };
      const SingleThreadedBlas one_thread;
      if (by_item) {
#pragma omp parallel for schedule(static) if (parallel)
        for (int64_t i = 0; i < count; ++i) product(i, i + 1, 0);
      } else {
#pragma omp parallel for schedule(static) if (parallel)
        for (int64_t part = 0; part < parts; ++part) product(0, count, part);
      }
    });
  }
  out.storage().bump_version();
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  const Tensor a = autocast_lower(a_in), b = autocast_lower(b_in);  // ops/autocast.h
  check_same_device("matmul", {&a, &b});
  check_same_dtype("matmul", a, b);
  check_floating("matmul", a);
  TP_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "needs tensors of at least 1 dim, got shapes ",
           to_string(a.shape()), " and ", to_string(b.shape()));
  // A vector on the left is a (1, k) row; its dim is -2 of the result, or -1 when b is a vector too.
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), b.dim() == 1 ? -1 : -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, -1)), -1);
  const int64_t n = a.shape()[a.dim() - 2], k = a.shape()[a.dim() - 1];
  const int64_t k2 = b.shape()[b.dim() - 2], m = b.shape()[b.dim() - 1];
  TP_CHECK(k == k2, "matmul", "shapes ", to_string(a.shape()), " and ", to_string(b.shape()),
           " cannot be multiplied (", k, " != ", k2, ")");
  // A contiguous batch of matrices times one matrix is one product of all their rows, as in linear:
  // one GEMM, and b's gradient one GEMM summing over every row, where a product per batch item would
  // run small GEMMs and add b's gradient up item by item.
  if (a.dim() > 2 && b.dim() == 2 && a.is_contiguous()) {
    Shape rows(a.shape().begin(), a.shape().end() - 1);
    const Tensor y = matmul(reshape(a, {numel(rows), k}), b);
    rows.push_back(m);
    return reshape(y, rows);
  }
  Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                 Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  Shape shape = batch;
  shape.push_back(n);
  shape.push_back(m);
  Tensor y = empty(shape, a.options());
  batched_gemm(batch, a, Transpose::No, b, Transpose::No, y, 0.0);
  // dA = dY · Bᵀ,  dB = Aᵀ · dY. An operand broadcast over batch dims gets the sum over them: the
  // products go into its gradient buffer, batch after batch, with beta = 1. Any other gets a fresh
  // product (beta = 0), which saves zero-filling a buffer first.
  record("matmul", {a, b}, {y}, [batch, as = Saved(a), bs = Saved(b)](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor &a = as.get(), &b = bs.get();
    auto product = [&](size_t i, const Tensor& x, const Tensor& l, Transpose tl, const Tensor& r, Transpose tr) {
      if (Shape(x.shape().begin(), x.shape().end() - 2) != batch) {
        batched_gemm(batch, l, tl, r, tr, g.buffer(i), 1.0);
        return;
      }
      Tensor grad = empty(x.shape(), x.options());
      batched_gemm(batch, l, tl, r, tr, grad, 0.0);
      g.accumulate(i, std::move(grad));
    };
    if (g.needs(0)) product(0, a, dy[0], Transpose::No, b, Transpose::Yes);
    if (g.needs(1)) product(1, b, a, Transpose::Yes, dy[0], Transpose::No);
  });
  return y;
}

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  const char* op = "linear";
  // ops/autocast.h: in bfloat16 under autocast, the float32 weights converted (gradients go back to them)
  const Tensor x = autocast_lower(x_in), weight = autocast_lower(weight_in), bias = autocast_lower(bias_in);
  check_same_device(op, {&x, &weight});
  check_floating(op, x);
  check_same_dtype(op, x, weight);
  TP_CHECK(weight.dim() == 2 && x.dim() >= 1 && x.shape().back() == weight.size(1), op,
           "expected x (..., in) and weight (out, in), got x ", to_string(x.shape()), " and weight ",
           to_string(weight.shape()));
  if (bias.defined()) {
    check_same_device(op, {&x, &bias});
    check_same_dtype(op, x, bias);
    TP_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, "expected bias (out) = (",
             weight.size(0), ") for weight ", to_string(weight.shape()), ", got ", to_string(bias.shape()));
  }
  const int64_t in = weight.size(1), out = weight.size(0);
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  const int64_t rows = numel(out_shape);
  out_shape.push_back(out);

  const Tensor x2 = reshape(x.detach(), {rows, in});
  Tensor y = empty({rows, out}, x.options());
  batched_gemm({}, x2, Transpose::No, weight.detach(), Transpose::Yes, y, 0.0,
               bias.defined() ? bias.detach() : Tensor());  // + bias
  Tensor result = reshape(y, out_shape);

  std::vector<Tensor> inputs = {x, weight};
  if (bias.defined()) inputs.push_back(bias);
  // dx = dy · W,  dW = dyᵀ · x,  db = Σ_rows dy
  record(op, inputs, {result},
         [rows, out, xs = Saved(x2), ws = Saved(weight.detach()), x_shape = x.shape()](
             const std::vector<Tensor>& dy, Gradients& g) {
           const Tensor dy2 = reshape(dy[0], {rows, out});
           if (g.needs(0)) {
             // x's gradient from another op already (q, k and v's projections share x): the product
             // is added into it (beta = 1), where a product of its own and accumulate's add each
             // made a pass over it.
             const bool into = g.received(0) && g.buffer(0).is_contiguous();
             Tensor dx = into ? g.buffer(0) : empty(x_shape, dy2.options());
             batched_gemm({}, dy2, Transpose::No, ws.get(), Transpose::No, reshape(dx, {rows, ws.get().size(1)}),
                          into ? 1.0 : 0.0);
             if (!into) g.accumulate(0, std::move(dx));
           }
           if (g.needs(1)) {
             Tensor dw = empty(ws.get().shape(), dy2.options());
             batched_gemm({}, dy2, Transpose::Yes, xs.get(), Transpose::No, dw, 0.0);
             g.accumulate(1, std::move(dw));
           }
           if (g.needs(2)) g.accumulate(2, sum(dy2, {0}));
         });
  return result;
}

Tensor squared_row_norms_of_product(const Tensor& x, const Tensor& w) {
  const char* op = "squared_row_norms_of_product";
  check_same_device(op, {&x, &w});
  check_floating(op, x);
  check_same_dtype(op, x, w);
  TP_CHECK(w.dim() == 2 && x.dim() >= 1 && x.shape().back() == w.size(0), op,
           "expected x (..., in) and w (in, out), got x ", to_string(x.shape()), " and w ", to_string(w.shape()));
  Tensor norms;
  {
    const NoGradGuard no_grad;
    const AutocastScope in_dtype(false);  // x's dtype, autocast or not: here and in the backward
    const Tensor xw = matmul(x.detach(), w.detach());
    norms = sum(xw * xw, {-1});
  }
  // With a = x W: d x = (2 dn ⊙ a) Wᵀ, d W = xᵀ (2 dn ⊙ a), a formed again here.
  record(op, {x, w}, {norms}, [xs = Saved(x.detach()), ws = Saved(w.detach())](const std::vector<Tensor>& dn,
                                                                                Gradients& g) {
    const AutocastScope in_dtype(false);
    const Tensor& x = xs.get();
    const Tensor& w = ws.get();
    const Tensor da = matmul(x, w) * unsqueeze(dn[0] * 2.0, -1);  // (..., out)
    if (g.needs(0)) g.accumulate(0, matmul(da, transpose(w, 0, 1)));
    if (g.needs(1)) {
      const int64_t rows = x.numel() / std::max<int64_t>(1, x.shape().back());
      g.accumulate(1, matmul(transpose(reshape(x, {rows, w.size(0)}), 0, 1), reshape(da, {rows, w.size(1)})));
    }
  });
  return norms;
}

}  // namespace tapestry
