#include "ops/sort.h"

#include "core/tape_graph.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/sort.h"
#include "ops/dispatch.h"
#include "ops/index.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

// x with dim d moved last (contiguous), and back.
std::vector<int64_t> dim_last_order(int64_t ndim, int64_t d) {
  std::vector<int64_t> order;
  for (int64_t k = 0; k < ndim; ++k)
    if (k != d) order.push_back(k);
  order.push_back(d);
  return order;
}

std::vector<int64_t> dim_back_order(int64_t ndim, int64_t d) {
  const std::vector<int64_t> to_last = dim_last_order(ndim, d);
  std::vector<int64_t> inverse(ndim);
  for (int64_t k = 0; k < ndim; ++k) inverse[to_last[k]] = k;
  return inverse;
}

Tensor permuted(const Tensor& x, const std::vector<int64_t>& order) {
  NoGradGuard no_grad;
  return contiguous(permute(x.detach(), order));
}

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// Whether key a comes before key b (NaN above every number); a strict weak order, NaNs all equal.
template <class T>
bool before(T a, T b, Descending descending) {
  if (descending == Descending::Yes) return a > b || (is_nan(a) && !is_nan(b));
  return a < b || (!is_nan(a) && is_nan(b));
}

// ---- kernel (the CPU loop; a tensor on a GPU takes the CUDA launcher of ops/cuda/sort.h) ----

// The first k entries of each row of `rows` (R, L) in stable order: values (R, k) and int64
// positions (R, k). Breaking ties by position makes the order total, so std::sort and
// std::partial_sort give exactly the stable order.
Sorted sort_rows(const char* op, const Tensor& rows, int64_t k, Descending descending) {
  const int64_t length = rows.shape().back();
  const int64_t count = length == 0 ? 0 : rows.numel() / length;
  Shape shape = rows.shape();
  shape.back() = k;
  Sorted out{empty(shape, rows.options()), empty(shape, {DType::Int64, rows.device()})};
  if (on_cuda(op, rows, [&] { cuda::sort_rows(op, rows, k, descending, out.values, out.indices); })) return out;
  visit_numeric(rows.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(rows.raw_data());
    T* values = static_cast<T*>(out.values.raw_data());
    int64_t* indices = static_cast<int64_t*>(out.indices.raw_data());
    const auto first = [descending](const std::pair<T, int64_t>& a, const std::pair<T, int64_t>& b) {
      if (before(a.first, b.first, descending)) return true;
      if (before(b.first, a.first, descending)) return false;
      return a.second < b.second;
    };
#pragma omp parallel if (count > 1 && count * length > 16384)
    {
      std::vector<std::pair<T, int64_t>> row(length);  // (key, position)
#pragma omp for schedule(static)
      for (int64_t r = 0; r < count; ++r) {
        for (int64_t i = 0; i < length; ++i) row[i] = {src[r * length + i], i};
        if (k == length) std::sort(row.begin(), row.end(), first);
        else std::partial_sort(row.begin(), row.begin() + k, row.end(), first);
        for (int64_t i = 0; i < k; ++i) {
          values[r * k + i] = row[i].first;
          indices[r * k + i] = row[i].second;
        }
      }
    }
  });
  return out;
}

// The shared body of sort / argsort / topk: the first k entries of each row's order (all when k is
// not given).
Sorted sorted_along(const char* op, const Tensor& x, int64_t dim, std::optional<int64_t> k_or_all,
                    Descending descending) {
  if (autocast_widens({&x})) return sorted_along(op, autocast_float32(x), dim, k_or_all, descending);  // ops/autocast.h
  TP_CHECK(x.defined(), op, "got an undefined tensor");
  TP_CHECK(x.dim() > 0, op, "needs a tensor of at least 1 dim, got a 0-d tensor");
  const int64_t d = normalize_dim(dim, x.dim(), op);
  const int64_t k = k_or_all.value_or(x.shape()[d]);
  TP_CHECK(k >= 0 && k <= x.shape()[d], op, "k = ", k, " is out of range [0, ", x.shape()[d],
           "] for dim ", d, " of shape ", to_string(x.shape()));
  const Sorted rows = sort_rows(op, permuted(x, dim_last_order(x.dim(), d)), k, descending);
  const std::vector<int64_t> back = dim_back_order(x.dim(), d);
  Sorted out{permuted(rows.values, back), permuted(rows.indices, back)};
  // dx = scatter_add(0, dim, indices, dy): each value's gradient returns to where it came from
  record(op, {x}, {out.values}, [d, shape = x.shape(), is = Saved(out.indices)](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, scatter_add(zeros(shape, dy[0].options()), d, is.get(), dy[0]));
  });
  record_cut(op, {x}, {out.indices});  // the order itself has no gradient
  return out;
}

}  // namespace

Sorted sort(const Tensor& x, int64_t dim, Descending descending) {
  return sorted_along("sort", x, dim, std::nullopt, descending);
}

Tensor argsort(const Tensor& x, int64_t dim, Descending descending) {
  NoGradGuard no_grad;
  return sorted_along("argsort", x, dim, std::nullopt, descending).indices;
}

Sorted topk(const Tensor& x, int64_t k, int64_t dim, TopK which) {
  return sorted_along("topk", x, dim, k, which == TopK::Largest ? Descending::Yes : Descending::No);
}

}  // namespace tapestry
