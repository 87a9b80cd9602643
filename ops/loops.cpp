#include "ops/loops.h"

namespace tapestry {

Strides broadcast_strides(const Tensor& t, const Shape& shape) {
  Strides out(shape.size(), 0);
  const size_t lead = shape.size() - t.shape().size();
  for (size_t d = 0; d < t.shape().size(); ++d) {
    if (t.shape()[d] != 1) out[lead + d] = t.strides()[d];
  }
  return out;
}

}  // namespace tapestry
