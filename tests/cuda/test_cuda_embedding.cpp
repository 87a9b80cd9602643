// Embedding on the GPU against the CPU: lookups and the index-add of the backward, bit for bit (the
// GPU adds each row's contributions in position order, as the CPU does), at every parity size of the
// embedding dim and of the number of indices, int32 and int64 indices of any shape, many duplicates,
// one index repeated everywhere, a padding row, a large vocabulary, non-contiguous tables and
// indices, a table used twice (the gradient accumulates), and out-of-range indices refused before
// anything is computed, naming the first of them.
#include <cstdint>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

Tensor indices(const Shape& shape, int64_t V, uint64_t seed, DType dtype) { return small_integers(shape, seed, dtype, 0, V); }

void check_embedding(int64_t V, int64_t D, const Shape& index_shape, DType dtype, DType index_dtype, int64_t padding_idx,
                     uint64_t seed) {
  INFO("V " << V << " D " << D << " indices " << to_string(index_shape) << " " << index_dtype << " table " << dtype
            << " padding_idx " << padding_idx);
  check_parity([padding_idx](const std::vector<Tensor>& in) { return embedding(in[0], in[1], padding_idx); },
               {input({V, D}, seed, dtype), indices(index_shape, V, seed + 1, index_dtype)}, kExact);
}

}  // namespace

TEST_CASE("embedding: every embedding dim and every number of indices, forward and backward, exactly") {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (DType index_dtype : {DType::Int64, DType::Int32})
      for (int64_t padding_idx : {int64_t{-1}, int64_t{3}})
        for (int64_t n : parity_sizes()) {
          check_embedding(7, n, {300}, dtype, index_dtype, padding_idx, seed += 2);  // many duplicates
          check_embedding(50, 33, {n}, dtype, index_dtype, padding_idx, seed += 2);
        }
}

TEST_CASE("embedding: indices of any shape, a large vocabulary, one index everywhere") {
  check_embedding(11, 31, {4, 33}, DType::Float32, DType::Int64, 0, 100);
  check_embedding(11, 31, {2, 3, 5}, DType::Float64, DType::Int32, -1, 102);
  check_embedding(100000, 31, {4097}, DType::Float32, DType::Int64, 99999, 104);
  check_embedding(70000, 5, {2, 33}, DType::Float32, DType::Int32, -1, 106);
  // 0-d indices
  check_parity([](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); },
               {input({5, 33}, 108), scalar(3, {DType::Int64})}, kExact);
  // every position names row 2: one run of 4097 additions per column
  check_parity([](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); },
               {input({5, 1000}, 110), full({4097}, 2, {DType::Int64})}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return embedding(in[0], in[1], 2); },
               {input({5, 33}, 112), full({4097}, 2, {DType::Int32})}, kExact);
}

TEST_CASE("embedding: non-contiguous tables and indices; a table used twice accumulates its gradient") {
  // The table a transposed view, the indices a transposed (S, B) view.
  check_parity([](const std::vector<Tensor>& in) { return embedding(transpose(in[0], 0, 1), transpose(in[1], 0, 1), 4); },
               {input({33, 9}, 200), indices({31, 4}, 9, 201, DType::Int64)}, kExact);
  // Two lookups into one table (tied embeddings): the second index-add starts from the first's sums.
  check_parity(
      [](const std::vector<Tensor>& in) { return embedding(in[0], in[1], 1) + embedding(in[0], in[2]) * 0.5; },
      {input({13, 33}, 202), indices({1000}, 13, 203, DType::Int64), indices({1000}, 13, 204, DType::Int32)}, kExact);
}

TEST_CASE("embedding on the device refuses out-of-range indices before computing anything") {
  Tensor table = to(input({5, 3}, 300, DType::Float64), dut());
  table.set_requires_grad(true);
  embedding(table, to(from_vector<int64_t>({1}, {1}), dut())).backward(ones({1, 3}, {DType::Float64, dut()}));
  const std::vector<double> values = table.to_vector<double>(), grad = table.grad().to_vector<double>();
  Tape::current().clear();

  check_error([&] { embedding(table, to(from_vector<int64_t>({0, 5, 1}, {3}), dut())); },
              {"embedding", "index 5", "position (1,)", "5 rows", "(5, 3)"});
  check_error([&] { embedding(table, to(from_vector<int32_t>({0, 1, 2, -1}, {2, 2}), dut())); },
              {"embedding", "index -1", "position (1, 1)", "out of range"});
  check_error([&] { embedding(table, to(from_vector<int64_t>({1LL << 40}, {1}), dut())); }, {"embedding", "out of range"});
  // Several bad indices: the first in row-major order is named, as on the CPU, however many blocks
  // the check runs in.
  std::vector<int64_t> many(100000, 2);
  many[70001] = 9, many[65537] = -3, many[99999] = 5;
  check_error([&] { embedding(table, to(from_vector<int64_t>(many, {100, 1000}), dut())); },
              {"embedding", "index -3", "position (65, 537)"});
  // Indices on the device, transposed: positions are those of the view.
  check_error([&] { embedding(table, transpose(to(from_vector<int64_t>({0, 1, 2, 7, 1, 0}, {2, 3}), dut()), 0, 1)); },
              {"embedding", "index 7", "position (0, 1)"});
  CHECK(Tape::current().size() == 0);
  CHECK(table.to_vector<double>() == values);
  CHECK(table.grad().to_vector<double>() == grad);
  check_error([&] { embedding(table, to(from_vector<int64_t>({0, 1}, {2}), dut()), 5); }, {"embedding", "padding_idx"});
  if (on_gpu()) check_error([&] { embedding(table, from_vector<int64_t>({0, 1}, {2})); }, {"embedding", "one device"});
}
