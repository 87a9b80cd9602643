#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

TEST_CASE("embedding looks up rows for int64 and int32 indices of any shape") {
  const Tensor table = reshape(arange(0.0, 15.0, 1.0, {DType::Float32}), {5, 3});
  const Tensor idx64 = from_vector<int64_t>({4, 0, 2, 2, 1, 3}, {2, 3});
  const Tensor out = embedding(table, idx64);
  CHECK(out.shape() == Shape{2, 3, 3});
  CHECK(out.to_vector<float>() == std::vector<float>{12, 13, 14, 0, 1, 2, 6, 7, 8, 6, 7, 8, 3, 4, 5, 9, 10, 11});
  const Tensor out32 = embedding(table, from_vector<int32_t>({4, 0, 2, 2, 1, 3}, {2, 3}));
  CHECK(out32.to_vector<float>() == out.to_vector<float>());
  CHECK(embedding(table, scalar(1, {DType::Int64})).shape() == Shape{3});  // a 0-d index gives one row
  CHECK(embedding(table, zeros({0}, {DType::Int64})).shape() == Shape{0, 3});
  // a padding row is still returned as it is
  CHECK(embedding(table, from_vector<int64_t>({1}, {1}), 1).to_vector<float>() == std::vector<float>{3, 4, 5});
}

TEST_CASE("embedding reads a strided table") {
  const Tensor base = uniform({3, 5}, 1);
  const Tensor table = transpose(base, 0, 1);  // (5, 3), not contiguous
  const Tensor idx = from_vector<int64_t>({3, 1}, {2});
  check_close(embedding(table, idx), stack({select(table, 0, 3), select(table, 0, 1)}, 0), 0, 0);
}

TEST_CASE("embedding: gradcheck with repeated indices and with a padding row") {
  const Tensor table = uniform({6, 4}, 2);
  const Tensor idx = from_vector<int64_t>({1, 3, 1, 5, 0, 1, 3, 2}, {2, 4});
  check_gradients([idx](const std::vector<Tensor>& in) { return embedding(in[0], idx); }, {table});
  // By design the padding row gets no gradient although lookups read it (so that it stays, say,
  // zero); finite differences see it unless the lookups of padding are cut from the output.
  const Tensor zero = zeros({}, {DType::Float64});
  const Tensor not_pad = unsqueeze(ne(idx, scalar(1, {DType::Int64})), -1);
  check_gradients([idx, not_pad, zero](const std::vector<Tensor>& in) { return where(not_pad, embedding(in[0], idx, 1), zero); },
                  {table});
  const Tensor idx32 = from_vector<int32_t>({5, 5, 5, 0}, {4});
  const Tensor not_pad32 = unsqueeze(ne(idx32, scalar(0, {DType::Int32})), -1);
  check_gradients([idx32, not_pad32, zero](const std::vector<Tensor>& in) { return where(not_pad32, embedding(in[0], idx32, 0), zero); },
                  {table});
}

TEST_CASE("the embedding gradient sums repeated rows and skips the padding row") {
  Tensor table = zeros({4, 2}, {DType::Float64});
  table.set_requires_grad(true);
  const Tensor idx = from_vector<int64_t>({2, 0, 2, 3, 0}, {5});
  const Tensor dy = from_vector<double>({1, 2, 10, 20, 100, 200, 1000, 2000, 5, 5}, {5, 2});
  embedding(table, idx, 0).backward(dy);
  // row 0 is padding; row 1 unused; row 2 = dy[0] + dy[2]; row 3 = dy[3]
  check_close(table.grad(), from_vector<double>({0, 0, 0, 0, 101, 202, 1000, 2000}, {4, 2}), 0, 0);
  // a second pass accumulates
  embedding(table, idx).backward(dy);
  check_close(table.grad(), from_vector<double>({15, 25, 0, 0, 202, 404, 2000, 4000}, {4, 2}), 0, 0);
}

TEST_CASE("embedding refuses out-of-range indices before computing or writing anything") {
  Tensor table = uniform({5, 3}, 3);
  table.set_requires_grad(true);
  embedding(table, from_vector<int64_t>({1}, {1})).backward(ones({1, 3}, {DType::Float64}));
  const std::vector<double> values = table.to_vector<double>(), grad = table.grad().to_vector<double>();
  Tape::current().clear();

  check_error([&] { embedding(table, from_vector<int64_t>({0, 5, 1}, {3})); },
              {"embedding", "index 5", "position (1,)", "5 rows", "(5, 3)"});
  check_error([&] { embedding(table, from_vector<int32_t>({0, 1, 2, -1}, {2, 2})); },
              {"embedding", "index -1", "position (1, 1)", "out of range"});
  check_error([&] { embedding(table, from_vector<int64_t>({1LL << 40}, {1})); }, {"embedding", "out of range"});
  CHECK(Tape::current().size() == 0);
  CHECK(table.to_vector<double>() == values);
  CHECK(table.grad().to_vector<double>() == grad);
}

TEST_CASE("embedding checks its arguments") {
  const Tensor table = uniform({5, 3}, 4);
  const Tensor idx = from_vector<int64_t>({0, 1}, {2});
  check_error([&] { embedding(table, ones({2}, {DType::Float32})); }, {"embedding", "indices", "int32 or int64", "float32"});
  check_error([&] { embedding(table, ones({2}, {DType::Bool})); }, {"embedding", "indices", "bool"});
  check_error([&] { embedding(ones({5, 3}, {DType::Int64}), idx); }, {"embedding", "floating", "int64"});
  check_error([&] { embedding(ones({15}, {DType::Float32}), idx); }, {"embedding", "2-d", "(15,)"});
  check_error([&] { embedding(table, idx, 5); }, {"embedding", "padding_idx", "got 5"});
  check_error([&] { embedding(table, idx, -2); }, {"embedding", "padding_idx", "got -2"});
  check_error([&] { embedding(table, Tensor()); }, {"embedding", "undefined"});
}

TEST_CASE("embedding on inputs large enough to run on several threads: lookups and index-add") {
  const int64_t V = 50, D = 130, N = 400;
  Generator gen(5);
  const Tensor idx = randint(0, V, {N}, gen);
  Tensor table = uniform({V, D}, 6);
  table.set_requires_grad(true);
  const Tensor dy = uniform({N, D}, 7);
  const Tensor out = embedding(table, idx, 3);
  out.backward(dy);
  // reference: the same sums, row by row, in index order
  const std::vector<int64_t> iv = idx.to_vector<int64_t>();
  const std::vector<double> tv = table.to_vector<double>(), dv = dy.to_vector<double>(), ov = out.to_vector<double>();
  std::vector<double> expected(static_cast<size_t>(V * D), 0.0);
  int64_t wrong_rows = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < D; ++c) {
      wrong_rows += ov[n * D + c] != tv[iv[n] * D + c];
      if (iv[n] != 3) expected[iv[n] * D + c] += dv[n * D + c];
    }
  }
  CHECK(wrong_rows == 0);
  CHECK(table.grad().to_vector<double>() == expected);  // same order of additions: bitwise equal
}
