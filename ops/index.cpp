#include "ops/index.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/index.h"
#include "ops/dispatch.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

// Below this many elements a loop runs on one thread.
constexpr int64_t kParallelWork = 32768;
// Columns of the inner dims that one task of an accumulating kernel owns.
constexpr int64_t kColumns = 64;

// A shape seen as (outer, size, inner) around `dim`.
struct Fibers {
  int64_t outer = 1, size = 1, inner = 1;
};

Fibers fibers_of(const Shape& shape, int64_t dim) {
  Fibers f;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim) f.outer *= shape[d];
    else if (d == dim) f.size = shape[d];
    else f.inner *= shape[d];
  }
  return f;
}

// The offset, under `strides`, of every coordinate combination of shape[begin:end), in row-major
// order. gather / scatter_add walk index's shape and reach x through these tables.
std::vector<int64_t> offset_table(const Shape& shape, const Strides& strides, int64_t begin, int64_t end) {
  std::vector<int64_t> table{0};
  for (int64_t d = begin; d < end; ++d) {
    std::vector<int64_t> next;
    next.reserve(table.size() * static_cast<size_t>(shape[d]));
    for (int64_t base : table)
      for (int64_t i = 0; i < shape[d]; ++i) next.push_back(base + i * strides[d]);
    table = std::move(next);
  }
  return table;
}

void check_index_dtype(const char* op, const Tensor& index) {
  TP_CHECK(index.defined(), op, "got an undefined index tensor");
  TP_CHECK(is_integer(index.dtype()), op, "index must be int32 or int64, got ", index.dtype(),
           " of shape ", to_string(index.shape()));
}

// The first element of `index` (contiguous) outside [0, size), in row-major order, and its value;
// (numel, 0) when there is none. On a GPU the search runs on the device and only its answer is read.
std::pair<int64_t, int64_t> first_out_of_range(const char* op, const Tensor& index, int64_t size) {
  cuda::OutOfRange bad{};
  if (on_cuda(op, index, [&] { bad = cuda::first_out_of_range(op, index, 0, size); })) return {bad.position, bad.value};
  const int64_t n = index.numel();
  return visit_index(index.dtype(), op, [&](auto tag) {
    using I = decltype(tag);
    const I* idx = static_cast<const I*>(index.raw_data());
    int64_t bad = n;
#pragma omp parallel for reduction(min : bad) if (n > kParallelWork)
    for (int64_t k = 0; k < n; ++k)
      if (idx[k] < 0 || idx[k] >= size) bad = std::min(bad, k);
    return std::pair<int64_t, int64_t>{bad, bad < n ? static_cast<int64_t>(idx[bad]) : 0};
  });
}

// Every element of `index` (contiguous) lies in [0, size); otherwise an Error naming the first
// offender. `what` says what the indices address, e.g. "dim 1 of x (2, 5)".
void check_in_range(const char* op, const Tensor& index, int64_t size, const std::string& what) {
  const auto [first, value] = first_out_of_range(op, index, size);
  TP_CHECK(first == index.numel(), op, "index ", value, " at ", index_string(first, index.shape()),
           " of index ", to_string(index.shape()), " is out of range [0, ", size, ") for ", what,
           " (negative indices are not wrapped)");
}

std::string dim_of(int64_t d, const char* name, const Tensor& t) {
  return detail::concat("dim ", d, " of ", name, " ", to_string(t.shape()));
}

// index has x's number of dims and is no larger than x outside dim d.
void check_fits(const char* op, const Tensor& index, const Tensor& x, int64_t d) {
  bool fits = index.dim() == x.dim();
  for (int64_t k = 0; fits && k < x.dim(); ++k) fits = k == d || index.shape()[k] <= x.shape()[k];
  TP_CHECK(fits, op, "index of shape ", to_string(index.shape()), " must have the ", x.dim(),
           " dims of x ", to_string(x.shape()), " and be no larger outside dim ", d);
}

void check_vector_index(const char* op, const Tensor& index) {
  TP_CHECK(index.dim() == 1, op, "index must be 1-d, got shape ", to_string(index.shape()));
}

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launcher of ops/cuda/index.h) ----
// Index tensors reaching a kernel are contiguous and in range.

// y[o, j, i] = x[o, index[o, j, i], i] over index's (outer, n, inner); x may be strided.
Tensor gather_kernel(const char* op, const Tensor& x, int64_t d, const Tensor& index) {
  Tensor y = empty(index.shape(), x.options());
  if (on_cuda(op, x, [&] { cuda::gather(op, y, x, d, index); })) return y;
  const Fibers f = fibers_of(index.shape(), d);
  const std::vector<int64_t> outer = offset_table(index.shape(), x.strides(), 0, d);
  const std::vector<int64_t> inner = offset_table(index.shape(), x.strides(), d + 1, x.dim());
  const int64_t step = x.strides()[d];
  visit_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      const T* src = static_cast<const T*>(x.raw_data());
      const I* idx = static_cast<const I*>(index.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
#pragma omp parallel for collapse(2) schedule(static) if (y.numel() > kParallelWork)
      for (int64_t o = 0; o < f.outer; ++o)
        for (int64_t j = 0; j < f.size; ++j) {
          const int64_t row = (o * f.size + j) * f.inner;
          for (int64_t i = 0; i < f.inner; ++i)
            dst[row + i] = src[outer[o] + inner[i] + static_cast<int64_t>(idx[row + i]) * step];
        }
    });
  });
  return y;
}

// y[o, index[o, j, i], i] += src[o, j, i] over index's (outer, n, inner); y is contiguous and owned.
// One task owns an (o, block of i) pair, which no other task's elements reach, and adds over j in
// order: deterministic.
void scatter_add_kernel(const char* op, const Tensor& y, int64_t d, const Tensor& index, const Tensor& src_in) {
  const auto in_float32 = [&](const Tensor& y32, const Tensor& src32) { scatter_add_kernel(op, y32, d, index, src32); };
  if (add_in_float32(y, src_in, in_float32)) return;  // a bfloat16 y (ops/autocast.h)
  const Tensor src = contiguous(src_in.detach());
  if (on_cuda(op, y, [&] { cuda::scatter_add(op, y, d, index, src); })) return;
  const Fibers f = fibers_of(index.shape(), d);
  const std::vector<int64_t> outer = offset_table(index.shape(), y.strides(), 0, d);
  const std::vector<int64_t> inner = offset_table(index.shape(), y.strides(), d + 1, y.dim());
  const int64_t step = y.strides()[d];
  const int64_t blocks = (f.inner + kColumns - 1) / kColumns;
  visit_numeric(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      const T* add = static_cast<const T*>(src.raw_data());
      const I* idx = static_cast<const I*>(index.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
#pragma omp parallel for collapse(2) schedule(static) if (src.numel() > kParallelWork)
      for (int64_t o = 0; o < f.outer; ++o)
        for (int64_t b = 0; b < blocks; ++b) {
          const int64_t begin = b * kColumns, end = std::min(f.inner, begin + kColumns);
          for (int64_t j = 0; j < f.size; ++j) {
            const int64_t row = (o * f.size + j) * f.inner;
            for (int64_t i = begin; i < end; ++i)
              dst[outer[o] + inner[i] + static_cast<int64_t>(idx[row + i]) * step] += add[row + i];
          }
        }
    });
  });
}

// y[o, j, :] = x[o, index[j], :]
Tensor index_select_kernel(const char* op, const Tensor& x_in, int64_t d, const Tensor& index) {
  const Tensor x = contiguous(x_in.detach());
  Shape shape = x.shape();
  shape[d] = index.numel();
  Tensor y = empty(shape, x.options());
  if (on_cuda(op, x, [&] { cuda::index_select(op, y, x, d, index); })) return y;
  const Fibers f = fibers_of(x.shape(), d);
  const int64_t m = index.numel();
  visit_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      const T* src = static_cast<const T*>(x.raw_data());
      const I* idx = static_cast<const I*>(index.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
#pragma omp parallel for collapse(2) schedule(static) if (y.numel() > kParallelWork)
      for (int64_t o = 0; o < f.outer; ++o)
        for (int64_t j = 0; j < m; ++j)
          std::copy_n(src + (o * f.size + static_cast<int64_t>(idx[j])) * f.inner, f.inner,
                      dst + (o * m + j) * f.inner);
    });
  });
  return y;
}

// y[o, index[j], :] += src[o, j, :]; y is contiguous and owned. Tasks own (o, block of columns)
// pairs and add over j in order: deterministic.
void index_add_kernel(const char* op, const Tensor& y, int64_t d, const Tensor& index, const Tensor& src_in) {
  const auto in_float32 = [&](const Tensor& y32, const Tensor& src32) { index_add_kernel(op, y32, d, index, src32); };
  if (add_in_float32(y, src_in, in_float32)) return;  // a bfloat16 y (ops/autocast.h)
  const Tensor src = contiguous(src_in.detach());
  if (on_cuda(op, y, [&] { cuda::index_add(op, y, d, index, src); })) return;
  const Fibers f = fibers_of(y.shape(), d);
  const int64_t m = index.numel();
  const int64_t blocks = (f.inner + kColumns - 1) / kColumns;
  visit_numeric(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), op, [&](auto itag) {
      using I = decltype(itag);
      const T* add = static_cast<const T*>(src.raw_data());
      const I* idx = static_cast<const I*>(index.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
#pragma omp parallel for collapse(2) schedule(static) if (src.numel() > kParallelWork)
      for (int64_t o = 0; o < f.outer; ++o)
        for (int64_t b = 0; b < blocks; ++b) {
          const int64_t begin = b * kColumns, end = std::min(f.inner, begin + kColumns);
          for (int64_t j = 0; j < m; ++j) {
            T* to = dst + (o * f.size + static_cast<int64_t>(idx[j])) * f.inner;
            const T* from = add + (o * m + j) * f.inner;
            for (int64_t i = begin; i < end; ++i) to[i] += from[i];
          }
        }
    });
  });
}

// y[k, c] = (index[k] == c) for a contiguous index.
Tensor one_hot_kernel(const Tensor& index, int64_t num_classes, DType dtype) {
  Shape shape = index.shape();
  shape.push_back(num_classes);
  const Options options{dtype, index.device()};
  Tensor y;
  if (on_cuda("one_hot", index, [&] { y = empty(shape, options); cuda::one_hot(y, index, num_classes); })) return y;
  y = zeros(shape, options);
  const int64_t n = index.numel();
  visit_all(dtype, [&](auto tag) {
    using T = decltype(tag);
    visit_index(index.dtype(), "one_hot", [&](auto itag) {
      using I = decltype(itag);
      const I* idx = static_cast<const I*>(index.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
#pragma omp parallel for schedule(static) if (n > kParallelWork)
      for (int64_t k = 0; k < n; ++k) dst[k * num_classes + static_cast<int64_t>(idx[k])] = T(1);
    });
  });
  return y;
}

// A contiguous copy of x that the caller may write into.
Tensor owned_copy(const Tensor& x) {
  NoGradGuard no_grad;
  return clone(x.detach());
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const char* op = "gather";
  check_same_device(op, {&x, &index});
  check_index_dtype(op, index);
  const int64_t d = normalize_dim(dim, x.dim(), op);
  check_fits(op, index, x, d);
  const Tensor idx = contiguous(index);
  check_in_range(op, idx, x.shape()[d], dim_of(d, "x", x));
  Tensor y = gather_kernel(op, x, d, idx);
  // dx = scatter_add(0, dim, index, dy): each dy element returns to the x element it was read from
  record(op, {x, index}, {y}, [d, shape = x.shape(), is = Saved(idx)](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor dx = zeros(shape, dy[0].options());
    scatter_add_kernel("gather", dx, d, is.get(), dy[0]);
    g.accumulate(0, dx);
  });
  return y;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  if (autocast_widens({&x, &src}))  // ops/autocast.h
    return scatter_add(autocast_float32(x), dim, index, autocast_float32(src));
  const char* op = "scatter_add";
  check_same_device(op, {&x, &index, &src});
  check_index_dtype(op, index);
  check_same_dtype(op, x, src);
  const int64_t d = normalize_dim(dim, x.dim(), op);
  TP_CHECK(src.shape() == index.shape(), op, "src of shape ", to_string(src.shape()),
           " must have the shape of index ", to_string(index.shape()));
  check_fits(op, index, x, d);
  const Tensor idx = contiguous(index);
  check_in_range(op, idx, x.shape()[d], dim_of(d, "x", x));
  Tensor y = owned_copy(x);
  scatter_add_kernel(op, y, d, idx, src);
  // dx = dy;  dsrc = gather(dy, dim, index)
  record(op, {x, index, src}, {y}, [d, is = Saved(idx)](const std::vector<Tensor>& dy, Gradients& g) {
    if (g.needs(0)) g.accumulate(0, dy[0]);
    if (g.needs(2)) g.accumulate(2, gather_kernel("scatter_add", dy[0], d, is.get()));
  });
  return y;
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  const char* op = "index_select";
  check_same_device(op, {&x, &index});
  check_index_dtype(op, index);
  check_vector_index(op, index);
  const int64_t d = normalize_dim(dim, x.dim(), op);
  const Tensor idx = contiguous(index);
  check_in_range(op, idx, x.shape()[d], dim_of(d, "x", x));
  Tensor y = index_select_kernel(op, x, d, idx);
  // dx = index_add(0, dim, index, dy)
  record(op, {x, index}, {y}, [d, shape = x.shape(), is = Saved(idx)](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor dx = zeros(shape, dy[0].options());
    index_add_kernel("index_select", dx, d, is.get(), dy[0]);
    g.accumulate(0, dx);
  });
  return y;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  if (autocast_widens({&x, &src}))  // ops/autocast.h
    return index_add(autocast_float32(x), dim, index, autocast_float32(src));
  const char* op = "index_add";
  check_same_device(op, {&x, &index, &src});
  check_index_dtype(op, index);
  check_vector_index(op, index);
  check_same_dtype(op, x, src);
  const int64_t d = normalize_dim(dim, x.dim(), op);
  Shape expected = x.shape();
  expected[d] = index.numel();
  TP_CHECK(src.shape() == expected, op, "src of shape ", to_string(src.shape()), " must be ",
           to_string(expected), ": x ", to_string(x.shape()), " with the ", index.numel(),
           " indices along dim ", d);
  const Tensor idx = contiguous(index);
  check_in_range(op, idx, x.shape()[d], dim_of(d, "x", x));
  Tensor y = owned_copy(x);
  index_add_kernel(op, y, d, idx, src);
  // dx = dy;  dsrc = index_select(dy, dim, index)
  record(op, {x, index, src}, {y}, [d, is = Saved(idx)](const std::vector<Tensor>& dy, Gradients& g) {
    if (g.needs(0)) g.accumulate(0, dy[0]);
    if (g.needs(2)) g.accumulate(2, index_select_kernel("index_add", dy[0], d, is.get()));
  });
  return y;
}

Tensor one_hot(const Tensor& index, int64_t num_classes, DType dtype) {
  const char* op = "one_hot";
  check_index_dtype(op, index);
  TP_CHECK(num_classes >= 0, op, "num_classes must be non-negative, got ", num_classes);
  const Tensor idx = contiguous(index);
  check_in_range(op, idx, num_classes, detail::concat(num_classes, " classes"));
  return one_hot_kernel(idx, num_classes, dtype);
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  const char* op = "masked_select";
  check_same_device(op, {&x, &mask});
  TP_CHECK(mask.dtype() == DType::Bool, op, "the mask must be bool, got ", mask.dtype(), " of shape ",
           to_string(mask.shape()), " (x: ", x.dtype(), " of shape ", to_string(x.shape()), ")");
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), op);
  // The result's length depends on the mask's values, so the mask is read on the host (on a GPU
  // this waits for the device, as it must in any framework).
  const std::vector<bool> keep = contiguous(expand(mask, shape)).to_vector<bool>();
  std::vector<int64_t> positions;
  for (size_t i = 0; i < keep.size(); ++i)
    if (keep[i]) positions.push_back(static_cast<int64_t>(i));
  const Tensor index = to(from_vector<int64_t>(positions, {static_cast<int64_t>(positions.size())}), x.device());
  // Built from index_select, so dx = index_add of dy at the selected positions comes with it.
  return index_select(reshape(expand(x, shape), {-1}), 0, index);
}

}  // namespace tapestry
