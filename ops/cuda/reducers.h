// The reductions as the CUDA kernels evaluate them (ops/cuda/reduce.cu). Plain C++, evaluated on
// both sides: the CPU suite checks on the host that any split of a row among threads gives the CPU
// op's result, ties and NaN included (tests/test_cuda_host.cpp).
//
// A reducer has an accumulator type Acc and four functions. A block reduces a row (or one chunk of
// it): every thread starts from start(load(row[0], 0)), folds its elements in index order with
// acc = combine(acc, load(x_i, i)), and the threads' accumulators are combined pairwise in a fixed
// tree, the lower thread on the left; finish(acc) is the result. The order never depends on timing,
// so results are deterministic (no atomics).
//
// NaN propagates (docs/PORTING.md, "NaN"): max / min of a row holding a NaN are NaN, and argmax /
// argmin point at its first NaN, wherever it sits, as in NumPy and PyTorch. Every combine below is
// associative and independent of how a row is split among threads, so the CPU ops, which fold a
// row with the same reducers (ops/reduce.cpp), and the kernels agree. argmax / argmin break ties
// towards the lower index.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/bfloat16.h"
#include "core/macros.h"
#include "ops/elementwise_math.h"

namespace tapestry::cuda {

using math::is_nan;

// The CPU's accumulator: floating types (bfloat16 too) sum in double, integers in int64.
template <class T>
using SumAcc = std::conditional_t<std::is_floating_point_v<compute_t<T>>, double, int64_t>;

template <class T>
struct SumReducer {
  using Acc = SumAcc<T>;
  using Out = T;
  TP_HOST_DEVICE Acc load(T x, int64_t) const { return static_cast<Acc>(x); }
  TP_HOST_DEVICE Acc start(Acc) const { return Acc(0); }
  TP_HOST_DEVICE Acc combine(Acc a, Acc b) const { return a + b; }
  TP_HOST_DEVICE T finish(Acc a) const { return static_cast<T>(a); }
};

// The running sums of a row, y[i] = Σ_{j ≤ i} x[j], accumulated left to right in SumAcc<T> (integers
// wrapping, ops/elementwise.h): cumsum's kernel, run by a CPU thread or a GPU thread per row, so
// both devices add in the same order and agree exactly.
template <class T>
TP_HOST_DEVICE void cumsum_row(const T* x, T* y, int64_t n) {
  SumAcc<T> acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc = math::wrapping_add(acc, static_cast<SumAcc<T>>(x[i]));
    y[i] = static_cast<T>(acc);
  }
}

// Σ x² in double (clip_grad_norm's global norm; float32 and float64 gradients alike).
template <class T>
struct SumOfSquaresReducer {
  using Acc = double;
  using Out = double;
  TP_HOST_DEVICE double load(T x, int64_t) const {
    const double v = static_cast<double>(x);
    return v * v;
  }
  TP_HOST_DEVICE double start(double) const { return 0.0; }
  TP_HOST_DEVICE double combine(double a, double b) const { return a + b; }
  TP_HOST_DEVICE double finish(double a) const { return a; }
};

template <class T>
struct MaxReducer {
  using Acc = T;
  using Out = T;
  TP_HOST_DEVICE T load(T x, int64_t) const { return x; }
  TP_HOST_DEVICE T start(T first) const { return first; }
  TP_HOST_DEVICE T combine(T a, T b) const { return is_nan(a) || b <= a ? a : b; }  // b when b is NaN
  TP_HOST_DEVICE T finish(T a) const { return a; }
};

template <class T>
struct MinReducer {
  using Acc = T;
  using Out = T;
  TP_HOST_DEVICE T load(T x, int64_t) const { return x; }
  TP_HOST_DEVICE T start(T first) const { return first; }
  TP_HOST_DEVICE T combine(T a, T b) const { return is_nan(a) || b >= a ? a : b; }  // b when b is NaN
  TP_HOST_DEVICE T finish(T a) const { return a; }
};

template <class T>
struct ValueIndex {
  T value;
  int64_t index;
};

// The first NaN of a and b when either is NaN (`found`), for argmax / argmin.
template <class T>
TP_HOST_DEVICE bool first_nan(const ValueIndex<T>& a, const ValueIndex<T>& b, ValueIndex<T>& out) {
  const bool an = is_nan(a.value), bn = is_nan(b.value);
  if (!an && !bn) return false;
  out = an && (!bn || a.index < b.index) ? a : b;
  return true;
}

template <class T>
struct ArgMaxReducer {
  using Acc = ValueIndex<T>;
  using Out = int64_t;
  TP_HOST_DEVICE Acc load(T x, int64_t i) const { return {x, i}; }
  TP_HOST_DEVICE Acc start(Acc first) const { return first; }
  TP_HOST_DEVICE Acc combine(Acc a, Acc b) const {
    Acc nan;
    if (first_nan(a, b, nan)) return nan;
    return b.value > a.value || (b.value == a.value && b.index < a.index) ? b : a;
  }
  TP_HOST_DEVICE int64_t finish(Acc a) const { return a.index; }
};

template <class T>
struct ArgMinReducer {
  using Acc = ValueIndex<T>;
  using Out = int64_t;
  TP_HOST_DEVICE Acc load(T x, int64_t i) const { return {x, i}; }
  TP_HOST_DEVICE Acc start(Acc first) const { return first; }
  TP_HOST_DEVICE Acc combine(Acc a, Acc b) const {
    Acc nan;
    if (first_nan(a, b, nan)) return nan;
    return b.value < a.value || (b.value == a.value && b.index < a.index) ? b : a;
  }
  TP_HOST_DEVICE int64_t finish(Acc a) const { return a.index; }
};

}  // namespace tapestry::cuda
