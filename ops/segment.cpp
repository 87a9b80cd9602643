#include "ops/segment.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <type_traits>
#include <vector>

#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/index.h"
#include "ops/cuda/segment.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

// Below this many elements a loop runs on one thread.
constexpr int64_t kParallelWork = 32768;
// Columns (of the flattened trailing dims) that one task of a segment reduction owns.
constexpr int64_t kColumns = 256;

// Accumulates float32 in double, integers in int64.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// The offsets as a host vector, after checking that they describe segments of `rows` rows (when
// given): 1-d, integer, offsets[0] = 0, non-decreasing, offsets[S] = rows.
std::vector<int64_t> read_offsets(const char* op, const Tensor& offsets, std::optional<int64_t> rows,
                                  const Tensor& x) {
  TP_CHECK(offsets.defined(), op, "got undefined offsets");
  TP_CHECK(is_integer(offsets.dtype()) && offsets.dim() == 1 && offsets.numel() >= 1, op,
           "offsets must be a 1-d int64 (or int32) tensor of S + 1 >= 1 entries, got ",
           offsets.dtype(), " of shape ", to_string(offsets.shape()));
  const std::vector<int64_t> off = offsets.to_vector<int64_t>();
  TP_CHECK(off[0] == 0, op, "offsets must start at 0, got offsets[0] = ", off[0]);
  for (size_t s = 1; s < off.size(); ++s)
    TP_CHECK(off[s] >= off[s - 1], op, "offsets must be non-decreasing, got offsets[", s, "] = ", off[s],
             " after offsets[", s - 1, "] = ", off[s - 1]);
  if (rows) {
    TP_CHECK(off.back() == *rows, op, "offsets must end at the number of rows N = ", *rows, " of x ",
             to_string(x.shape()), ", got offsets[", off.size() - 1, "] = ", off.back());
  }
  return off;
}

// Validated offsets: the host copy that the checks and the CPU loops read, and for data on a GPU the
// same values as a contiguous int64 tensor there, for its kernels. A fresh copy, uploaded from the
// host: the caller may change its offsets tensor before backward runs.
struct Segments {
  std::vector<int64_t> host;
  Tensor device;  // (S + 1,) int64 on the data's GPU; undefined for data on the CPU
};

Segments segments_of(const char* op, const Tensor& offsets, std::optional<int64_t> rows, const Tensor& x) {
  Segments seg{read_offsets(op, offsets, rows, x), Tensor()};
  if (x.device().is_cuda())
    seg.device = from_vector<int64_t>(seg.host, {static_cast<int64_t>(seg.host.size())}, x.device());
  return seg;
}

// x is (N, ...): it has a leading dim of rows.
void check_rows(const char* op, const Tensor& x, const char* name) {
  TP_CHECK(x.defined(), op, "got an undefined tensor");
  TP_CHECK(x.dim() >= 1, op, name, " must have a leading dim of rows, got a 0-d tensor");
}

// D, the number of elements in one row of (N, ...).
int64_t row_width(const Shape& shape) { return numel(Shape(shape.begin() + 1, shape.end())); }

Shape with_rows(const Shape& shape, int64_t rows) {
  Shape out = shape;
  out[0] = rows;
  return out;
}

// The segment of every row (rows of empty segments do not exist).
std::vector<int64_t> segment_of_rows(const std::vector<int64_t>& off) {
  std::vector<int64_t> seg(static_cast<size_t>(off.back()));
  for (size_t s = 0; s + 1 < off.size(); ++s) std::fill(seg.begin() + off[s], seg.begin() + off[s + 1], static_cast<int64_t>(s));
  return seg;
}

// ids (N,) is 1-d and integer, and count is non-negative.
void check_ids_form(const char* op, const Tensor& ids, int64_t count, const char* what) {
  TP_CHECK(ids.defined(), op, "got undefined ids");
  TP_CHECK(is_integer(ids.dtype()) && ids.dim() == 1, op, "ids must be a 1-d int32 or int64 tensor, got ",
           ids.dtype(), " of shape ", to_string(ids.shape()));
  TP_CHECK(count >= 0, op, "the number of ", what, " must be non-negative, got ", count);
}

[[noreturn]] void fail_id_range(const char* op, int64_t n, int64_t id, int64_t count, const char* what) {
  fail(op, "ids[", n, "] = ", id, " is out of range [0, ", count, ") of ", count, " ", what);
}

[[noreturn]] void fail_unsorted(const char* op, int64_t n, int64_t id, int64_t previous) {
  fail(op, "ids must be sorted (non-decreasing), got ids[", n, "] = ", id, " after ids[", n - 1, "] = ",
       previous, "; use cluster_layout for unsorted ids");
}

// Reads ids (N,) after checking them: 1-d, integer, every id in [0, count).
std::vector<int64_t> read_ids(const char* op, const Tensor& ids, int64_t count, const char* what) {
  check_ids_form(op, ids, count, what);
  const std::vector<int64_t> v = ids.to_vector<int64_t>();
  for (size_t n = 0; n < v.size(); ++n)
    if (v[n] < 0 || v[n] >= count) fail_id_range(op, static_cast<int64_t>(n), v[n], count, what);
  return v;
}

// ids on a GPU, checked there as read_ids checks them on the host: a contiguous int64 copy. Inline:
// only on_cuda's lambdas call it (ops/dispatch.h).
inline Tensor device_ids(const char* op, const Tensor& ids, int64_t count, const char* what) {
  check_ids_form(op, ids, count, what);
  Tensor v = contiguous(to(ids.detach(), DType::Int64));
  const cuda::OutOfRange bad = cuda::first_out_of_range(op, v, 0, count);
  if (bad.position < v.numel()) fail_id_range(op, bad.position, bad.value, count, what);
  return v;
}

// offsets (S + 1,) from per-segment counts.
std::vector<int64_t> exclusive_scan(const std::vector<int64_t>& counts) {
  std::vector<int64_t> off(counts.size() + 1, 0);
  for (size_t s = 0; s < counts.size(); ++s) off[s + 1] = off[s] + counts[s];
  return off;
}

Tensor int64_vector(const std::vector<int64_t>& v) {
  return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())});
}

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launcher of ops/cuda/segment.h) ----
// Segment reductions run one task per (segment, block of columns): the task owns those outputs
// and folds its rows in order.

// y (S, D) = Σ over each segment's rows of x (N, D).
Tensor segment_sum_kernel(const char* op, const Tensor& x_in, const Segments& seg) {
  const std::vector<int64_t>& off = seg.host;
  const Tensor x = contiguous(x_in.detach());
  const int64_t segments = static_cast<int64_t>(off.size()) - 1, width = row_width(x.shape());
  const int64_t blocks = (width + kColumns - 1) / kColumns;
  Tensor y = empty(with_rows(x.shape(), segments), x.options());
  if (on_cuda(op, x, [&] { cuda::segment_sum(y, x, seg.device); })) return y;
  visit_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.raw_data());
    T* dst = static_cast<T*>(y.raw_data());
#pragma omp parallel for collapse(2) schedule(static) if (x.numel() + y.numel() > kParallelWork)
    for (int64_t s = 0; s < segments; ++s)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t begin = b * kColumns, count = std::min(width - begin, kColumns);
        Acc<T> acc[kColumns] = {};
        for (int64_t n = off[s]; n < off[s + 1]; ++n)
          for (int64_t i = 0; i < count; ++i) acc[i] += src[n * width + begin + i];
        for (int64_t i = 0; i < count; ++i) dst[s * width + begin + i] = static_cast<T>(acc[i]);
      }
  });
  return y;
}

// y (N, D): row n = values[segment of n] (S, D).
Tensor segment_broadcast_kernel(const char* op, const Tensor& values_in, const Segments& segments) {
  const std::vector<int64_t>& off = segments.host;
  const Tensor values = contiguous(values_in.detach());
  const int64_t rows = off.back(), width = row_width(values.shape());
  Tensor y = empty(with_rows(values.shape(), rows), values.options());
  if (on_cuda(op, values, [&] { cuda::segment_broadcast(y, values, segments.device); })) return y;
  const std::vector<int64_t> seg = segment_of_rows(off);
  visit_all(values.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(values.raw_data());
    T* dst = static_cast<T*>(y.raw_data());
#pragma omp parallel for schedule(static) if (y.numel() > kParallelWork)
    for (int64_t n = 0; n < rows; ++n) std::copy_n(src + seg[n] * width, width, dst + n * width);
  });
  return y;
}

struct Maxima {
  Tensor values;  // (S, D): 0 for an empty segment
  Tensor rows;    // (S, D) int64: the row of x each maximum came from, −1 for an empty segment
};

// The maxima over each segment's rows of x (N, D): the first maximal row, or the first NaN.
Maxima segment_max_kernel(const char* op, const Tensor& x_in, const Segments& seg) {
  const std::vector<int64_t>& off = seg.host;
  const Tensor x = contiguous(x_in.detach());
  const int64_t segments = static_cast<int64_t>(off.size()) - 1, width = row_width(x.shape());
  const int64_t blocks = (width + kColumns - 1) / kColumns;
  Tensor y = empty(with_rows(x.shape(), segments), x.options());
  Tensor arg = empty(y.shape(), {DType::Int64, x.device()});
  if (on_cuda(op, x, [&] { cuda::segment_max(y, arg, x, seg.device); })) return {y, arg};
  int64_t* where = static_cast<int64_t*>(arg.raw_data());
  visit_numeric(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.raw_data());
    T* dst = static_cast<T*>(y.raw_data());
#pragma omp parallel for collapse(2) schedule(static) if (x.numel() + y.numel() > kParallelWork)
    for (int64_t s = 0; s < segments; ++s)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t begin = b * kColumns, count = std::min(width - begin, kColumns);
        for (int64_t i = begin; i < begin + count; ++i) {
          dst[s * width + i] = T(0);
          where[s * width + i] = -1;
        }
        if (off[s] == off[s + 1]) continue;
        for (int64_t i = begin; i < begin + count; ++i) {
          dst[s * width + i] = src[off[s] * width + i];
          where[s * width + i] = off[s];
        }
        for (int64_t n = off[s] + 1; n < off[s + 1]; ++n)
          for (int64_t i = begin; i < begin + count; ++i) {
            const T v = src[n * width + i], best = dst[s * width + i];
            if (!is_nan(best) && (v > best || is_nan(v))) {
              dst[s * width + i] = v;
              where[s * width + i] = n;
            }
          }
      }
  });
  return {y, arg};
}

// dx (N, D): dx[arg[s, i], i] = dy[s, i]. Distinct (s, i) reach distinct elements of dx.
Tensor segment_max_backward_kernel(const Tensor& dy_in, const Tensor& arg, const Shape& x_shape) {
  const Tensor dy = contiguous(dy_in);
  Tensor dx = zeros(x_shape, dy.options());
  if (on_cuda("segment_max", dy, [&] { cuda::segment_max_backward(dx, dy, arg); })) return dx;
  const int64_t width = row_width(x_shape), count = dy.numel();
  const int64_t* where = static_cast<const int64_t*>(arg.raw_data());
  visit_floating(dy.dtype(), "segment_max", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(dy.raw_data());
    T* dst = static_cast<T*>(dx.raw_data());
#pragma omp parallel for schedule(static) if (count > kParallelWork)
    for (int64_t k = 0; k < count; ++k)
      if (where[k] >= 0) dst[where[k] * width + k % width] = src[k];
  });
  return dx;
}

}  // namespace

Tensor segment_offsets(const Tensor& ids, int64_t num_segments) {
  const char* op = "segment_offsets";
  Tensor offsets;
  const auto on_gpu = [&] {
    const Tensor v = device_ids(op, ids, num_segments, "segments");
    const int64_t n = cuda::first_descent(v);
    if (n < v.numel()) {
      const std::vector<int64_t> pair = slice(v, 0, n - 1, n + 1).to_vector<int64_t>();
      fail_unsorted(op, n, pair[1], pair[0]);
    }
    offsets = empty({num_segments + 1}, {DType::Int64, ids.device()});
    cuda::segment_offsets(offsets, v, num_segments);
  };
  if (ids.defined() && on_cuda(op, ids, on_gpu)) return offsets;
  const std::vector<int64_t> v = read_ids(op, ids, num_segments, "segments");
  std::vector<int64_t> counts(static_cast<size_t>(num_segments), 0);
  for (size_t n = 0; n < v.size(); ++n) {
    if (n > 0 && v[n] < v[n - 1]) fail_unsorted(op, static_cast<int64_t>(n), v[n], v[n - 1]);
    ++counts[v[n]];
  }
  return int64_vector(exclusive_scan(counts));
}

Tensor segment_sum(const Tensor& x, const Tensor& offsets) {
  if (autocast_widens({&x})) return segment_sum(autocast_float32(x), offsets);  // ops/autocast.h
  const char* op = "segment_sum";
  check_rows(op, x, "x");
  check_same_device(op, {&x, &offsets});
  const Segments seg = segments_of(op, offsets, x.shape()[0], x);
  Tensor y = segment_sum_kernel(op, x, seg);
  // dx = segment_broadcast(dy, offsets): every row gets its segment's gradient
  record(op, {x, offsets}, {y}, [seg](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, segment_broadcast_kernel("segment_sum", dy[0], seg));
  });
  return y;
}

Tensor segment_mean(const Tensor& x, const Tensor& offsets) {
  if (autocast_widens({&x})) return segment_mean(autocast_float32(x), offsets);  // ops/autocast.h
  const char* op = "segment_mean";
  check_rows(op, x, "x");
  check_floating(op, x);
  check_same_device(op, {&x, &offsets});
  const std::vector<int64_t> off = read_offsets(op, offsets, x.shape()[0], x);
  // y = segment_sum(x) ⊙ 1 / max(|segment|, 1); the gradient comes from sum's and mul's.
  std::vector<double> inverse(off.size() - 1);
  for (size_t s = 0; s + 1 < off.size(); ++s) inverse[s] = 1.0 / static_cast<double>(std::max<int64_t>(off[s + 1] - off[s], 1));
  Shape scale_shape(x.dim(), 1);
  scale_shape[0] = static_cast<int64_t>(inverse.size());
  const Tensor scale = to(from_vector<double>(inverse, scale_shape, x.device()), x.dtype());
  return segment_sum(x, offsets) * scale;
}

Tensor segment_max(const Tensor& x, const Tensor& offsets) {
  if (autocast_widens({&x})) return segment_max(autocast_float32(x), offsets);  // ops/autocast.h
  const char* op = "segment_max";
  check_rows(op, x, "x");
  check_same_device(op, {&x, &offsets});
  const Maxima m = segment_max_kernel(op, x, segments_of(op, offsets, x.shape()[0], x));
  // dx[n] = dy[s] ⊙ [n is the row segment s's maximum came from]
  record(op, {x, offsets}, {m.values}, [shape = x.shape(), rows = Saved(m.rows)](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, segment_max_backward_kernel(dy[0], rows.get(), shape));
  });
  return m.values;
}

Tensor segment_broadcast(const Tensor& values, const Tensor& offsets) {
  if (autocast_widens({&values})) return segment_broadcast(autocast_float32(values), offsets);  // ops/autocast.h
  const char* op = "segment_broadcast";
  check_rows(op, values, "values");
  check_same_device(op, {&values, &offsets});
  const Segments seg = segments_of(op, offsets, std::nullopt, values);
  TP_CHECK(values.shape()[0] == static_cast<int64_t>(seg.host.size()) - 1, op, "values of shape ",
           to_string(values.shape()), " must have one row per segment: ", seg.host.size() - 1,
           " segments from offsets ", to_string(offsets.shape()));
  Tensor y = segment_broadcast_kernel(op, values, seg);
  // dvalues = segment_sum(dy, offsets)
  record(op, {values, offsets}, {y}, [seg](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, segment_sum_kernel("segment_broadcast", dy[0], seg));
  });
  return y;
}

ClusterLayout cluster_layout(const Tensor& ids, int64_t num_clusters) {
  const char* op = "cluster_layout";
  ClusterLayout layout;
  const auto on_gpu = [&] {
    const Tensor v = device_ids(op, ids, num_clusters, "clusters");
    const Options options{DType::Int64, ids.device()};
    layout = {empty({v.numel()}, options), empty({num_clusters + 1}, options), empty({num_clusters}, options)};
    cuda::cluster_layout(v, num_clusters, layout.permutation, layout.offsets, layout.counts);
  };
  if (ids.defined() && on_cuda(op, ids, on_gpu)) return layout;
  const std::vector<int64_t> v = read_ids(op, ids, num_clusters, "clusters");
  // A counting sort: stable, O(N + C).
  std::vector<int64_t> counts(static_cast<size_t>(num_clusters), 0);
  for (int64_t c : v) ++counts[c];
  const std::vector<int64_t> off = exclusive_scan(counts);
  std::vector<int64_t> next(off.begin(), off.end() - 1), permutation(v.size());
  for (size_t n = 0; n < v.size(); ++n) permutation[next[v[n]]++] = static_cast<int64_t>(n);
  return {int64_vector(permutation), int64_vector(off), int64_vector(counts)};
}

}  // namespace tapestry
