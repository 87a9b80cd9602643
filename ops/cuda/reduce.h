// CUDA launchers of the reductions (ops/cuda/reduce.cu). Plain C++: ops/reduce.cpp moves the reduced
// dims last and hands over the (rows, length) matrix.
#pragma once

#include "core/tensor.h"

namespace tapestry::cuda {

enum class Reduction { Sum, Max, Min, ArgMax, ArgMin, LogSumExp };

// out[r] = the reduction of x[r, 0:length] for r < rows: x is a contiguous (rows, length) tensor and
// out a contiguous tensor of `rows` elements (x's dtype; int64 for ArgMax / ArgMin). Deterministic:
// one block per row (or per chunk of a long row, then one per row over the chunks' partial
// results), combined in a fixed order. Sum of an empty row is 0; the others need length > 0.
// Dtypes as on the CPU: numeric for Sum / Max / Min / ArgMax / ArgMin, floating for LogSumExp.
void reduce_rows(const char* op, Reduction kind, const Tensor& x, int64_t rows, int64_t length,
                 const Tensor& out);

// out[r, i] = Σ_{j ≤ i} x[r, j] for the rows of a contiguous (rows, length) numeric x, into a
// contiguous out of the same shape (cumsum_row of ops/cuda/reducers.h, one thread per row).
void cumsum_rows(const Tensor& x, int64_t rows, int64_t length, const Tensor& out);

// out[0] = Σ x_i² in double, for a contiguous floating x (any shape; 0 when empty) and a float64
// `out` of one element on x's device (a view into a larger buffer is fine). Deterministic, as
// reduce_rows: fixed chunks combined in a fixed order.
void sum_of_squares(const Tensor& x, const Tensor& out);

}  // namespace tapestry::cuda
