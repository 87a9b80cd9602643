// Dropout (Srivastava et al., 2014) with a counter-based mask that CPU and CUDA draw alike.
#pragma once

#include "core/random.h"
#include "core/tensor.h"

namespace tapestry {

// Training or inference behaviour of the layers that differ between the two.
enum class Mode { Train, Eval };

// Eval: returns x itself and draws nothing from `gen`.
// Train: y = x ⊙ keep / (1 − p). The draw reserves x.numel() counters of `gen` (whatever p is);
// with `first` the first of them, element i of x (row-major) is kept iff
//   uniform_float(philox_block(first + i, gen.seed())) ≥ p,
// (compared in double): where rand(x.shape(), gen, {DType::Float32}) ≥ p would be. The mask is the
// same for float32 and float64 x and on every device for the same generator state. The backward
// regenerates that mask from (first, seed) rather than storing it. x is floating; 0 ≤ p < 1.
Tensor dropout(const Tensor& x, double p, Generator& gen, Mode mode);

}  // namespace tapestry
