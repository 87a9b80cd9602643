#include "nn/attention/common.h"

#include <limits>

#include "ops/common.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry::attention {

void check_lengths(const Tensor& lengths, int64_t batch, int64_t length, const char* op) {
  // Lengths are index tensors: int32 or int64, as the index ops take (ops/index.h).
  TP_CHECK(is_integer(lengths.dtype()) && lengths.shape() == Shape{batch}, op,
           "lengths must be int64 or int32 of shape (", batch, ",), got ", lengths.dtype(), " ",
           to_string(lengths.shape()));
  for (int64_t n : lengths.to_vector<int64_t>())
    TP_CHECK(n >= 0 && n <= length, op, "a length of ", n, " is outside [0, ", length, "]");
}

Tensor valid_positions(const Tensor& lengths, int64_t batch, int64_t length, Device device, const char* op) {
  if (!lengths.defined()) return full({batch, length}, 1.0, {DType::Bool, device});
  check_lengths(lengths, batch, length, op);
  const Tensor positions = reshape(arange(length, {DType::Int64, device}), {1, length});
  return lt(positions, reshape(to(to(lengths, device), DType::Int64), {batch, 1}));
}

Tensor unit_rows(const Tensor& t) {
  // t_j / max(‖t_j‖, 1e-12): the floor keeps a zero row at zero, with a zero gradient.
  const double no_limit = std::numeric_limits<double>::infinity();
  return t * rsqrt(clamp(sum(t * t, {-1}, KeepDim::Yes), 1e-24, no_limit));
}

}  // namespace tapestry::attention
