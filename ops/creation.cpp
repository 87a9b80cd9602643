#include "ops/creation.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/dispatch.h"
#include "ops/cuda/creation.h"
#include "ops/cuda/elementwise.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

// A contiguous tensor of `shape` on options.device. On a GPU `launch(out)`, a launcher of
// ops/cuda/creation.h, fills it; on the CPU element i is fn(i, T{}), the expression the launcher
// computes too, so that both devices give the same values.
template <class Launch, class Fn>
Tensor make(const char* op, const Shape& shape, Options options, Launch&& launch, Fn&& fn) {
  check_shape(shape, op, static_cast<int64_t>(element_size(options.dtype)));
  Tensor out = empty(shape, options);
  if (on_cuda(op, out, [&] { launch(out); })) return out;
  const int64_t n = out.numel();
  visit_all(options.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* data = static_cast<T*>(out.raw_data());
#pragma omp parallel for if (n > 32768)
    for (int64_t i = 0; i < n; ++i) data[i] = fn(i, tag);
  });
  return out;
}

}  // namespace

Tensor full(const Shape& shape, double value, Options options) {
  // Converting a double outside an integer type's range (or NaN) is undefined: refused instead.
  if (options.dtype == DType::Int64 || options.dtype == DType::Int32) {
    const double limit = options.dtype == DType::Int64 ? 0x1p63 : 0x1p31;
    TP_CHECK(value >= -limit && value < limit, "full", "value ", value, " does not fit in ",
             dtype_name(options.dtype), " (shape ", to_string(shape), ")");
  }
  const auto on_gpu = [&](const Tensor& out) { cuda::fill_(out, value); };
  return make("full", shape, options, on_gpu, [value](int64_t, auto tag) {
    return static_cast<decltype(tag)>(value);
  });
}

Tensor zeros(const Shape& shape, Options options) { return full(shape, 0.0, options); }
Tensor ones(const Shape& shape, Options options) { return full(shape, 1.0, options); }
Tensor zeros_like(const Tensor& like) { return zeros(like.shape(), like.options()); }
Tensor ones_like(const Tensor& like) { return ones(like.shape(), like.options()); }
Tensor full_like(const Tensor& like, double value) { return full(like.shape(), value, like.options()); }
Tensor scalar(double value, Options options) { return full({}, value, options); }

Tensor arange(double start, double end, double step, Options options) {
  TP_CHECK(step != 0 && std::isfinite(start) && std::isfinite(end) && std::isfinite(step), "arange",
           "needs finite bounds and a non-zero step, got start=", start, " end=", end, " step=", step);
  const double count = std::ceil((end - start) / step);
  // Converting a double beyond int64 is undefined; such a count is refused before the cast.
  TP_CHECK(count < 0x1p62, "arange", "[", start, ", ", end, ") in steps of ", step, " has ", count,
           " elements, too many for a tensor");
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  TP_CHECK(options.dtype != DType::Bool, "arange", "cannot count in bool (start=", start, " end=", end,
           " step=", step, ")");
  if (is_integer(options.dtype) && n > 0) {
    // Integer ranges are exact: a whole start and step, and every element within the dtype (int32)
    // or within ±2^53, beyond which a double (the computation's type) skips integers (int64).
    const double last = start + step * static_cast<double>(n - 1);
    const double lo = options.dtype == DType::Int32 ? -0x1p31 : -0x1p53;
    const double hi = options.dtype == DType::Int32 ? 0x1p31 - 1 : 0x1p53;
    TP_CHECK(start == std::floor(start) && step == std::floor(step), "arange", "an ", options.dtype,
             " range needs a whole start and step, got start=", start, " step=", step);
    TP_CHECK(std::min(start, last) >= lo && std::max(start, last) <= hi, "arange", "[", start, ", ", end,
             ") in steps of ", step, " does not fit in ", options.dtype, ": its elements must lie in [", lo,
             ", ", hi, "]");
  }
  const auto on_gpu = [&](const Tensor& out) { cuda::arange(out, start, step); };
  return make("arange", {n}, options, on_gpu, [=](int64_t i, auto tag) {
    return static_cast<decltype(tag)>(start + step * static_cast<double>(i));
  });
}

Tensor rand(const Shape& shape, Generator& gen, Options options) {
  if (options.dtype == DType::BFloat16) {
    NoGradGuard no_grad;
    const Tensor draws = to(rand(shape, gen, {DType::Float32, options.device}), DType::BFloat16);
    return minimum(draws, full({}, 1.0 - std::ldexp(1.0, -8), options));  // [0, 1) still
  }
  visit_floating(options.dtype, "rand", [](auto) {});
  check_shape(shape, "rand", static_cast<int64_t>(element_size(options.dtype)));
  const uint64_t first = gen.reserve(static_cast<uint64_t>(numel(shape))), seed = gen.seed();
  const auto on_gpu = [&](const Tensor& out) { cuda::rand(out, first, seed); };
  return make("rand", shape, options, on_gpu, [=](int64_t i, auto tag) {
    const PhiloxBlock b = philox_block(first + static_cast<uint64_t>(i), seed);
    if constexpr (std::is_same_v<decltype(tag), float>) return uniform_float(b);
    else return static_cast<decltype(tag)>(uniform_double(b));
  });
}

Tensor randn(const Shape& shape, Generator& gen, Options options) {
  if (options.dtype == DType::BFloat16) {
    NoGradGuard no_grad;
    return to(randn(shape, gen, {DType::Float32, options.device}), DType::BFloat16);
  }
  visit_floating(options.dtype, "randn", [](auto) {});
  check_shape(shape, "randn", static_cast<int64_t>(element_size(options.dtype)));
  const uint64_t first = gen.reserve(static_cast<uint64_t>(numel(shape))), seed = gen.seed();
  const auto on_gpu = [&](const Tensor& out) { cuda::randn(out, first, seed); };
  return make("randn", shape, options, on_gpu, [=](int64_t i, auto tag) {
    const PhiloxBlock b = philox_block(first + static_cast<uint64_t>(i), seed);
    if constexpr (std::is_same_v<decltype(tag), float>) return normal_float(b);
    else return static_cast<decltype(tag)>(normal_double(b));
  });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, Generator& gen, Options options) {
  TP_CHECK(low < high, "randint", "needs low < high, got [", low, ", ", high, ")");
  TP_CHECK(options.dtype != DType::Bool, "randint", "cannot draw integers into a bool tensor");
  check_shape(shape, "randint", static_cast<int64_t>(element_size(options.dtype)));
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const uint64_t first = gen.reserve(static_cast<uint64_t>(numel(shape))), seed = gen.seed();
  const auto on_gpu = [&](const Tensor& out) { cuda::randint(out, low, range, first, seed); };
  return make("randint", shape, options, on_gpu, [=](int64_t i, auto tag) {
    const PhiloxBlock b = philox_block(first + static_cast<uint64_t>(i), seed);
    return static_cast<decltype(tag)>(low + static_cast<int64_t>(uniform_below(b, range)));
  });
}

}  // namespace tapestry
