#include "ops/bits.h"

#include "core/tape_graph.h"

#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/bits.h"
#include "ops/dispatch.h"
#include "ops/loops.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

constexpr int64_t kMaxBits = 64;

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launcher of ops/cuda/bits.h) ----

// codes[m] = Σ_r [x[m, r] > 0] · 2^r over the rows of x (M, R).
Tensor pack_sign_bits_kernel(const Tensor& x_in) {
  const Tensor x = contiguous(x_in.detach());
  const int64_t bits = x.shape().back();
  Tensor codes = empty(Shape(x.shape().begin(), x.shape().end() - 1), {DType::Int64, x.device()});
  if (on_cuda("pack_sign_bits", x, [&] { cuda::pack_sign_bits(codes, x); })) return codes;
  const int64_t rows = codes.numel();
  visit_floating(x.dtype(), "pack_sign_bits", [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.raw_data());
    int64_t* dst = static_cast<int64_t*>(codes.raw_data());
#pragma omp parallel for schedule(static) if (rows * bits > 65536)
    for (int64_t m = 0; m < rows; ++m) {
      uint64_t code = 0;
      for (int64_t r = 0; r < bits; ++r) code |= static_cast<uint64_t>(src[m * bits + r] > T(0)) << r;
      dst[m] = static_cast<int64_t>(code);  // two's complement: bit 63 becomes the sign
    }
  });
  return codes;
}

Tensor hamming_kernel(const Tensor& a, const Tensor& b, const Shape& shape) {
  Tensor y = empty(shape, {DType::Int64, a.device()});
  if (on_cuda("hamming_distance", a, [&] { cuda::hamming_distance(y, a, b); })) return y;
  cpu_map<int64_t, int64_t, int64_t>(y, [](int64_t u, int64_t v) {
    return static_cast<int64_t>(__builtin_popcountll(static_cast<unsigned long long>(u ^ v)));
  }, a, b);
  return y;
}

}  // namespace

Tensor pack_sign_bits(const Tensor& x) {
  if (autocast_widens({&x})) return pack_sign_bits(autocast_float32(x));  // ops/autocast.h
  const char* op = "pack_sign_bits";
  check_floating(op, x);
  TP_CHECK(x.dim() >= 1, op, "needs x of shape (..., R), got a 0-d tensor");
  TP_CHECK(x.shape().back() <= kMaxBits, op, "R = ", x.shape().back(), " bits (the last dim of x ",
           to_string(x.shape()), ") do not fit an int64 code; at most ", kMaxBits);
  Tensor codes = pack_sign_bits_kernel(x);
  record_cut(op, {x}, {codes});  // a sign has no gradient
  return codes;
}

Tensor hamming_distance(const Tensor& a, const Tensor& b) {
  const char* op = "hamming_distance";
  check_same_device(op, {&a, &b});
  TP_CHECK(a.dtype() == DType::Int64 && b.dtype() == DType::Int64, op,
           "expected int64 codes (from pack_sign_bits), got ", a.dtype(), " ", to_string(a.shape()),
           " and ", b.dtype(), " ", to_string(b.shape()));
  Tensor distance = hamming_kernel(a, b, broadcast_shapes(a.shape(), b.shape(), op));
  record_cut(op, {a, b}, {distance});
  return distance;
}

}  // namespace tapestry
