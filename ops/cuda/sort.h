// CUDA launcher of sort / argsort / topk (ops/cuda/sort.cu), and the radix keys it sorts by. Plain
// C++: ops/sort.cpp moves the sorted dim last and hands over the (rows, length) matrix; the CPU suite
// checks on the host that the keys order every value exactly as the CPU does (tests/test_cuda_keys.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/macros.h"
#include "core/tensor.h"
#include "ops/sort.h"

namespace tapestry::cuda {

// The unsigned key a radix sort orders a value of type T by: uint32_t for float32 / int32,
// uint64_t for float64 / int64.
template <class T>
using RadixKey = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

// An unsigned key whose ascending order is the CPU's order of x (ops/sort.cpp, `before`):
// - integers: the sign bit flipped, so negatives come first;
// - floats: the bits of a positive number with the sign bit set, of a negative number inverted
//   (the usual radix-sort transform), after two normalisations: −0.0 becomes +0.0 (the CPU's `<`
//   sees them equal, so the stable order keeps them in place), and every NaN, whatever its sign and
//   payload, becomes the all-ones key, above +inf (the CPU puts NaN after every number, NaNs equal);
// - descending: the key inverted, so the largest comes first and NaN before everything.
// Equal values get equal keys, so a stable sort by key is the CPU's stable sort.
template <class T>
TP_HOST_DEVICE inline RadixKey<T> radix_key(T x, Descending descending) {
  using Key = RadixKey<T>;
  constexpr Key kSign = Key{1} << (8 * sizeof(Key) - 1);
  Key key;
  if constexpr (std::is_floating_point_v<T>) {
    if (x != x) {
      key = ~Key{0};  // every NaN
    } else if (x == T(0)) {
      key = kSign;  // −0.0 and +0.0: the key of +0.0
    } else {
      Key bits;
      std::memcpy(&bits, &x, sizeof bits);
      key = (bits & kSign) ? ~bits : (bits | kSign);
    }
  } else {
    key = static_cast<Key>(x) ^ kSign;
  }
  return descending == Descending::Yes ? ~key : key;
}

// For each row r of rows (R, L), contiguous and numeric: the first k entries of its stable order
// (NaN above every number; largest first when descending), values into values (R, k) and positions
// along the row into indices (R, k) int64. Two stable CUB radix sorts of all R·L elements: by key,
// then by row, which keeps the key order within each row.
void sort_rows(const char* op, const Tensor& rows, int64_t k, Descending descending, const Tensor& values,
               const Tensor& indices);

}  // namespace tapestry::cuda
