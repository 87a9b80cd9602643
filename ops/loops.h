/// @file
/// CPU loops over strided tensors, parallelised with OpenMP.
#pragma once

#include <algorithm>
#include <array>
#include <tuple>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tapestry {

/// The strides that make `t` read as if it had `shape` (numpy broadcasting: 0 along new or size-1
/// dims). The caller has checked that t broadcasts to shape.
Strides broadcast_strides(const Tensor& t, const Shape& shape);

/// `shape` and the operands' `strides` with adjacent dims merged wherever every operand steps
/// through the two as through one dim (the outer one's stride the inner one's times its size), and
/// dims of size 1 dropped: the same elements at the same offsets, in fewer, longer rows. Where all
/// operands share one layout the dims are first ordered by it, largest stride first, so that heads
/// split from a projection by a permute, in both operands, are one row too. A contiguous
/// (30, 65, 64) tensor becomes one row of 124,800; a mask broadcast along the last dim keeps that
/// dim apart.
template <size_t N>
void coalesce_dims(Shape& shape, std::array<Strides, N>& strides) {
  bool one_layout = true;
  for (size_t k = 1; k < N; ++k) one_layout = one_layout && strides[k] == strides[0];
  if (one_layout) {  // elementwise loops visit their elements in any order
    std::vector<size_t> order(shape.size());
    for (size_t d = 0; d < order.size(); ++d) order[d] = d;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return strides[0][a] > strides[0][b]; });
    Shape sorted;
    std::array<Strides, N> sorted_strides;
    for (size_t d : order) {
      sorted.push_back(shape[d]);
      for (size_t k = 0; k < N; ++k) sorted_strides[k].push_back(strides[k][d]);
    }
    shape = std::move(sorted);
    strides = std::move(sorted_strides);
  }
  Shape merged;  // innermost first
  std::array<Strides, N> steps;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    if (shape[d] == 1) continue;
    bool joins = !merged.empty();
    for (size_t k = 0; k < N && joins; ++k) joins = strides[k][d] == steps[k].back() * merged.back();
    if (joins) {
      merged.back() *= shape[d];
      continue;
    }
    merged.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k) steps[k].push_back(strides[k][d]);
  }
  std::reverse(merged.begin(), merged.end());
  for (Strides& s : steps) std::reverse(s.begin(), s.end());
  shape = std::move(merged);
  strides = std::move(steps);
}

/// Visits every element of `shape` once, in runs along the last dim of the shape coalesce_dims
/// makes: body(base, count, step) is called with each operand's offset of a run's first element and
/// each operand's stride along the run. Runs are split across threads (a run never crosses a chunk
/// of `kGrain` elements). Runs used to end with each row of `shape` itself: on a (B, H, N, 16)
/// tensor, 16 elements, and an add of two (30, 65, 64) tensors took twice the time of the same
/// add on 124,800 elements (docs/PERFORMANCE.md).
template <size_t N, class Body>
void for_each_run(const Shape& shape_in, const std::array<Strides, N>& strides_in, Body&& body) {
  constexpr int64_t kGrain = 16384;
  const int64_t n = numel(shape_in);
  if (n == 0) return;
  Shape shape = shape_in;
  std::array<Strides, N> strides = strides_in;
  coalesce_dims(shape, strides);
  const int64_t ndim = static_cast<int64_t>(shape.size());
  if (ndim == 0) {
    body(std::array<int64_t, N>{}, int64_t{1}, std::array<int64_t, N>{});
    return;
  }
  const int64_t inner = shape[ndim - 1];
  std::array<int64_t, N> step;
  for (size_t k = 0; k < N; ++k) step[k] = strides[k][ndim - 1];
  const int64_t chunks = (n + kGrain - 1) / kGrain;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = std::min(n, (c + 1) * kGrain);
    for (int64_t i = c * kGrain; i < end;) {
      int64_t row = i / inner;
      const int64_t col = i % inner;
      std::array<int64_t, N> base{};
      for (int64_t d = ndim - 2; d >= 0; --d) {
        const int64_t index = row % shape[d];
        row /= shape[d];
        for (size_t k = 0; k < N; ++k) base[k] += index * strides[k][d];
      }
      for (size_t k = 0; k < N; ++k) base[k] += col * step[k];
      const int64_t count = std::min(inner - col, end - i);
      body(base, count, step);
      i += count;
    }
  }
}

namespace detail {
/// cpu_map's loop, with K = 0, 1, ... indexing the inputs: a run whose strides are all 1 is read and
/// written through plain pointers (a loop the compiler can vectorise), any other run stride by stride.
template <class Out, class... In, class F, size_t... K, class... Ts>
void cpu_map_impl(const Tensor& out, F f, std::index_sequence<K...>, const Ts&... in) {
  Out* o = static_cast<Out*>(out.raw_data());
  const std::tuple<const In*...> ptrs{static_cast<const In*>(in.raw_data())...};
  const std::array<Strides, 1 + sizeof...(In)> strides{out.strides(), broadcast_strides(in, out.shape())...};
  for_each_run(out.shape(), strides, [&](const auto& base, int64_t count, const auto& step) {
    bool unit = true;
    for (int64_t s : step) unit = unit && s == 1;
    if (unit) {
      Out* dst = o + base[0];
      const std::tuple<const In*...> src{std::get<K>(ptrs) + base[K + 1]...};
      for (int64_t j = 0; j < count; ++j) dst[j] = f(std::get<K>(src)[j]...);
    } else {
      for (int64_t j = 0; j < count; ++j)
        o[base[0] + j * step[0]] = f(std::get<K>(ptrs)[base[K + 1] + j * step[K + 1]]...);
    }
  });
}
}  // namespace detail

/// out[i] = f(in[i]...) over out's shape; the inputs broadcast to it. `out` may be strided (in-place
/// ops pass a view) but must not overlap itself. Element types are given explicitly:
/// `cpu_map<float, float, float>(out, f, a, b)`.
template <class Out, class... In, class F, class... Tensors>
void cpu_map(const Tensor& out, F f, const Tensors&... in) {
  static_assert(sizeof...(In) == sizeof...(Tensors), "one element type per input");
  detail::cpu_map_impl<Out, In...>(out, f, std::index_sequence_for<In...>{}, in...);
}

}  // namespace tapestry
