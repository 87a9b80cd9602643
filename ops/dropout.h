/// @file
/// Dropout (Srivastava et al., 2014) with a counter-based mask that CPU and CUDA draw alike.
#pragma once

#include "core/random.h"
#include "core/tensor.h"

namespace tapestry {

/// Training or inference behaviour of the layers that differ between the two.
enum class Mode { Train, Eval };

/// Eval: returns x itself and draws nothing from `gen`.
/// Train: y = x ⊙ keep / (1 − p). Each element is decided by a 16-bit draw, eight per Philox block:
/// the draw reserves ⌈x.numel() / 8⌉ counters of `gen` (whatever p is) and, with `first` the first
/// of them, element i of x (row-major) is kept iff
///   uniform_bits16(philox_block(first + i / 8, gen.seed()), i % 8) ≥ cut,   cut = round(p · 2^16)
/// (at most 2^16 − 1), so an element is dropped with p rounded to a multiple of 2^−16 (off by at
/// most 2^−17). The mask is the same for float32 and float64 x and on every device for the same
/// generator state. The backward regenerates that mask from (first, seed) rather than storing it.
/// With p = 0 every element is kept and scaled by 1: returns x itself (the counters are reserved all
/// the same). x is floating; 0 ≤ p < 1.
Tensor dropout(const Tensor& x, double p, Generator& gen, Mode mode);

/// dropout(relu(x), p, gen, mode) in one pass, with the same draws, values and gradients to the bit.
/// Its backward reads only y (dx = dy / (1 − p) where y > 0, else 0): no draws, and nothing held but
/// y, which the layer after it (a feed-forward's second linear) holds anyway; the composition holds
/// relu's output as well and draws the mask again. Eval mode, or p = 0: relu(x).
Tensor relu_dropout(const Tensor& x, double p, Generator& gen, Mode mode);

/// One dropout's draw, for an op that applies it inside loops of its own (dropout_add_layer_norm,
/// ops/norm.h): the counters and seed dropout(x, p, gen, Mode::Train) takes for an x of n elements.
struct DropoutDraw {
  uint64_t first = 0;  ///< the first Philox counter reserved
  uint64_t seed = 0;   ///< the generator's seed
  double p = 0;        ///< the drop probability
};

/// Reserves from `gen` what dropout reserves for n elements, whatever p is (0 ≤ p < 1).
DropoutDraw reserve_dropout(Generator& gen, int64_t n, double p);

/// out[i] = dropout's value of in[i] for elements [begin, end) of the draw's tensor (in and out point
/// at element begin; begin a multiple of 8, the elements of one Philox block): dropout's values on
/// the CPU to the bit, float32 or float64. Runs inside OpenMP regions, so it does not check its
/// range: the caller makes begin a multiple of 8 by construction.
template <class T>
void apply_dropout(const DropoutDraw& draw, const T* in, T* out, int64_t begin, int64_t end);

}  // namespace tapestry
