// The CUDA parity suite's helpers: run a function on the CPU and on the device under test with the
// same seeded inputs, back-propagate the same seed gradient on both, and compare values and
// gradients (STYLE §11: the CUDA result against the CPU result).
//
// Inputs are contiguous CPU tensors; moving one to the GPU copies it contiguously, so a test of a
// non-contiguous operand builds the view (transpose, slice, expand) inside the function, on each
// device, and the gradient flows back through the view to the contiguous leaf.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tests/oracle.h"
#include "tests/testing.h"

namespace tapestry::testing {

// The device the suite compares with the CPU: cuda:0, or the CPU itself in a dry run of the suite's
// own logic (tests/cuda/main.cpp, --cpu-stand-in).
inline Device& device_under_test() {
  static Device device = Device::cuda(0);
  return device;
}
inline Device dut() { return device_under_test(); }
inline bool on_gpu() { return dut().is_cuda(); }

// The sizes every family is tried at: empty, one, around a warp, beyond a block of 1024 / 4096.
inline const std::vector<int64_t>& parity_sizes() {
  static const std::vector<int64_t> sizes{0, 1, 31, 33, 1000, 4097};
  return sizes;
}

struct Tolerance {
  double atol, rtol;
};
// Elementwise math: CUDA's libm and the host's differ by an ulp or two, and backward compounds it.
inline Tolerance tol(DType dtype) { return dtype == DType::Float32 ? Tolerance{1e-6, 2e-6} : Tolerance{1e-14, 1e-13}; }
// Integers, bools, copies, and anything computed by exact arithmetic.
constexpr Tolerance kExact{0.0, 0.0};

// A contiguous CPU tensor of `shape` and `dtype`, values uniform in [lo, hi) from `seed`.
inline Tensor input(const Shape& shape, uint64_t seed, DType dtype = DType::Float32, double lo = -1.0,
                    double hi = 1.0) {
  return to(uniform(shape, seed, lo, hi), dtype);
}

// Small integers in [lo, hi), as `dtype`: ties on purpose (comparisons, max gradients).
inline Tensor small_integers(const Shape& shape, uint64_t seed, DType dtype, int64_t lo = 0, int64_t hi = 4) {
  Generator gen(seed);
  return to(randint(lo, hi, shape, gen), dtype);
}

// Every element of `actual` (on the device under test) is within atol + rtol·|expected| of
// `expected` (on the CPU); NaN matches NaN and an infinity itself. Reports the first few misses.
inline void expect_close(const Tensor& actual, const Tensor& expected, Tolerance t) {
  REQUIRE(actual.defined());
  REQUIRE(expected.defined());
  CHECK(actual.device() == dut());
  REQUIRE(actual.shape() == expected.shape());
  REQUIRE(actual.dtype() == expected.dtype());
  const std::vector<double> a = actual.to_vector<double>(), e = expected.to_vector<double>();
  int misses = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool same = (std::isnan(a[i]) && std::isnan(e[i])) || a[i] == e[i] ||
                      std::abs(a[i] - e[i]) <= t.atol + t.rtol * std::abs(e[i]);
    if (same) continue;
    if (++misses <= 5) {
      INFO("element " << i << " of shape " << to_string(actual.shape()) << ": " << a[i] << " on "
                      << actual.device() << " vs " << e[i] << " on the CPU");
      CHECK(same);
    }
  }
  INFO(misses << " of " << a.size() << " elements differ");
  CHECK(misses == 0);
}

// Bit for bit equal (same dtype, same bytes in row-major order).
inline void expect_bitwise(const Tensor& actual, const Tensor& expected) {
  REQUIRE(actual.shape() == expected.shape());
  REQUIRE(actual.dtype() == expected.dtype());
  CHECK(actual.device() == dut());
  const Tensor a = host_contiguous(actual), e = host_contiguous(expected);
  const size_t bytes = static_cast<size_t>(a.numel()) * element_size(a.dtype());
  int64_t first_miss = -1;
  const auto* pa = static_cast<const unsigned char*>(a.raw_data());
  const auto* pe = static_cast<const unsigned char*>(e.raw_data());
  if (bytes && std::memcmp(pa, pe, bytes) != 0) {
    for (size_t i = 0; i < bytes; ++i)
      if (pa[i] != pe[i]) {
        first_miss = static_cast<int64_t>(i / element_size(a.dtype()));
        break;
      }
  }
  INFO("first differing element: " << first_miss << " of shape " << to_string(a.shape()));
  CHECK(first_miss == -1);
}

inline std::vector<Tensor> on_device(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> out;
  for (const Tensor& t : tensors) out.push_back(to(t, dut()));
  return out;
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// fn on the CPU and on the device under test, same inputs, no tape: values agree. For results
// that are not differentiable, and for in-place ops (fn writes into a buffer it made and returns it).
inline void check_values(const Fn& fn, const std::vector<Tensor>& inputs, Tolerance t) {
  NoGradGuard no_grad;
  const Tensor expected = fn(inputs);
  INFO("values");
  expect_close(fn(on_device(inputs)), expected, t);
}

// fn on the CPU and on the device under test, same inputs: values agree; and when fn is
// differentiable (a floating result, a floating input), the gradients of every floating input for
// one seeded output gradient agree too.
inline void check_parity(const Fn& fn, const std::vector<Tensor>& inputs, Tolerance t, uint64_t seed = 99) {
  Tensor probe;
  {
    NoGradGuard no_grad;
    probe = fn(inputs);
  }
  const bool differentiable = is_floating(probe.dtype());
  bool any_floating = false;
  for (const Tensor& x : inputs) any_floating = any_floating || is_floating(x.dtype());
  if (!differentiable || !any_floating) {
    check_values(fn, inputs, t);
    return;
  }
  const Tensor dy = to(uniform(probe.shape(), seed), probe.dtype());
  const ValueAndGradients cpu = run_backward(fn, inputs, dy);
  const ValueAndGradients gpu = run_backward(fn, on_device(inputs), to(dy, dut()));
  {
    INFO("values");
    expect_close(gpu.value, cpu.value, t);
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!cpu.grads[i].defined()) continue;
    INFO("gradient of input " << i);
    expect_close(gpu.grads[i], cpu.grads[i], t);
  }
}

// A 2-d operand of `shape` seen through a layout the kernels must handle: views built on each device
// from a contiguous leaf (base_shape gives the leaf's shape).
enum class Layout { Contiguous, Transposed, Sliced, Expanded };

inline const std::vector<Layout>& all_layouts() {
  static const std::vector<Layout> layouts{Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded};
  return layouts;
}

inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Sliced: return "sliced";
    case Layout::Expanded: return "expanded";
  }
  return "?";
}

// The leaf's shape for a (rows, cols) operand in layout l.
inline Shape base_shape(Layout l, int64_t rows, int64_t cols) {
  switch (l) {
    case Layout::Contiguous: return {rows, cols};
    case Layout::Transposed: return {cols, rows};
    case Layout::Sliced: return {rows, 2 * cols + 1};
    case Layout::Expanded: return {1, cols};
  }
  return {rows, cols};
}

// The (rows, cols) view of a leaf of base_shape(l, rows, cols).
inline Tensor view_as(Layout l, const Tensor& base, int64_t rows, int64_t cols) {
  switch (l) {
    case Layout::Contiguous: return base;
    case Layout::Transposed: return transpose(base, 0, 1);
    case Layout::Sliced: return slice(base, 1, 1, 2 * cols + 1, 2);
    case Layout::Expanded: return expand(base, {rows, cols});
  }
  return base;
}

}  // namespace tapestry::testing
