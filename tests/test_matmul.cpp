// matmul and batched_gemm (ops/matmul.h) against naive loops written here, in float32 and float64:
// transposed and otherwise strided operands, broadcast batch dims, 1-d operands, k = 0 and empty
// sizes; gradients by gradcheck; bad input; float32 through either library (OpenBLAS, oneDNN).
#include <omp.h>

#include <array>
#include <cmath>
#include <limits>

#include "core/cpu_capability.h"
#include "ops/autocast.h"
#include "ops/onednn_gemm.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

using Inputs = std::vector<Tensor>;

Tensor f64(const std::vector<double>& values, const Shape& shape) { return from_vector<double>(values, shape); }

// The reference product of a (..., n, k) and b (..., k, m), both at least 2-d, with numpy batch
// broadcasting, by three loops per batch element.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  const int64_t n = a.size(-2), k = a.size(-1), m = b.size(-1);
  REQUIRE(b.size(-2) == k);
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2), b_batch(b.shape().begin(), b.shape().end() - 2);
  const size_t nb = std::max(a_batch.size(), b_batch.size());
  Shape batch(nb);
  for (size_t d = 0; d < nb; ++d) {
    const int64_t sa = d < nb - a_batch.size() ? 1 : a_batch[d - (nb - a_batch.size())];
    const int64_t sb = d < nb - b_batch.size() ? 1 : b_batch[d - (nb - b_batch.size())];
    REQUIRE((sa == sb || sa == 1 || sb == 1));
    batch[d] = sa == 1 ? sb : sa;
  }
  // The flat batch offset (in matrices) of batch index `i` in an operand with batch shape `own`.
  auto matrix_of = [&batch, nb](int64_t i, const Shape& own) {
    int64_t offset = 0, scale = 1;
    for (size_t d = nb; d-- > 0;) {
      const int64_t index = i % batch[d];
      i /= batch[d];
      if (d >= nb - own.size()) {
        const int64_t size = own[d - (nb - own.size())];
        offset += (size == 1 ? 0 : index) * scale;
        scale *= size;
      }
    }
    return offset;
  };
  Shape shape = batch;
  shape.push_back(n);
  shape.push_back(m);
  std::vector<double> out(numel(shape), 0.0);
  for (int64_t i = 0; i < numel(batch); ++i) {
    const double* pa = av.data() + matrix_of(i, a_batch) * n * k;
    const double* pb = bv.data() + matrix_of(i, b_batch) * k * m;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < m; ++c) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += pa[r * k + p] * pb[p * m + c];
        out[(i * n + r) * m + c] = acc;
      }
  }
  return f64(out, shape);
}

void check_matmul(const Tensor& a, const Tensor& b) {
  INFO("shapes " << to_string(a.shape()) << " @ " << to_string(b.shape()) << " in " << a.dtype());
  const Tensor y = matmul(a, b);
  CHECK(y.dtype() == a.dtype());
  const double tol = a.dtype() == DType::Float64 ? 1e-13 : 1e-5;
  check_close(y, naive_matmul(a, b), tol, tol);
}

}  // namespace

TEST_CASE("matmul matches naive loops in float32 and float64") {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    auto input = [dtype](const Shape& shape, uint64_t seed) { return to(uniform(shape, seed), dtype); };
    check_matmul(input({5, 7}, 1), input({7, 3}, 2));
    check_matmul(input({1, 4}, 3), input({4, 1}, 4));
    check_matmul(input({3, 1}, 5), input({1, 6}, 6));
    check_matmul(input({2, 3, 4}, 7), input({2, 4, 5}, 8));
    // Broadcast batch dims.
    check_matmul(input({2, 1, 3, 4}, 9), input({5, 4, 2}, 10));
    check_matmul(input({3, 4}, 11), input({2, 3, 4, 2}, 12));
    check_matmul(input({1, 3, 4}, 13), input({4, 4, 2}, 14));
    check_matmul(input({2, 1, 2, 3}, 15), input({1, 3, 3, 2}, 16));
    // Sizes past a few blocks of the BLAS kernels.
    check_matmul(input({67, 45}, 17), input({45, 33}, 18));
  }
}

TEST_CASE("matmul takes transposed, permuted, sliced and expanded operands") {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    auto input = [dtype](const Shape& shape, uint64_t seed) { return to(uniform(shape, seed), dtype); };
    const Tensor at = transpose(input({7, 5}, 20), 0, 1);  // (5, 7), column-major
    const Tensor bt = transpose(input({3, 7}, 21), 0, 1);  // (7, 3), column-major
    REQUIRE_FALSE(at.is_contiguous());
    check_matmul(at, input({7, 3}, 22));
    check_matmul(input({5, 7}, 23), bt);
    check_matmul(at, bt);
    // Batched, transposed in the last two dims.
    check_matmul(transpose(input({2, 4, 3}, 24), -1, -2), transpose(input({2, 5, 4}, 25), 1, 2));
    // A batch dim that is not outermost in memory: (n, B, k) viewed as (B, n, k).
    check_matmul(permute(input({3, 2, 4}, 26), {1, 0, 2}), input({2, 4, 5}, 27));
    // Rows with a stride (every other row) and columns with a stride (not usable by BLAS as is).
    check_matmul(slice(input({10, 4}, 28), 0, 0, 10, 2), input({4, 3}, 29));
    check_matmul(input({3, 4}, 30), slice(input({4, 9}, 31), 1, 1, 9, 3));
    check_matmul(slice(slice(input({6, 8}, 32), 0, 1, 6, 2), 1, 0, 8, 2), transpose(input({5, 4}, 33), 0, 1));
    // One matrix expanded along the batch (batch stride 0), and expanded rows (row stride 0).
    check_matmul(expand(input({1, 3, 4}, 34), {3, 3, 4}), input({3, 4, 2}, 35));
    check_matmul(expand(input({1, 4}, 36), {3, 4}), input({4, 2}, 37));
    check_matmul(input({2, 4}, 38), expand(input({4, 1}, 39), {4, 3}));
    // The same tensor on both sides.
    const Tensor s = input({4, 4}, 40);
    check_matmul(s, s);
    check_matmul(s, transpose(s, 0, 1));
  }
}

TEST_CASE("matmul with 1-d operands removes the vector dim, as numpy does") {
  const Tensor v = uniform({4}, 50), w = uniform({4}, 51);
  const Tensor m = uniform({4, 3}, 52), n = uniform({3, 4}, 53), batch = uniform({2, 4, 3}, 54);
  const Tensor vv = matmul(v, w);
  CHECK(vv.shape() == Shape{});
  check_close(vv, reshape(naive_matmul(reshape(v, {1, 4}), reshape(w, {4, 1})), {}), 1e-14, 1e-14);
  const Tensor vm = matmul(v, m);
  CHECK(vm.shape() == Shape{3});
  check_close(vm, reshape(naive_matmul(reshape(v, {1, 4}), m), {3}), 1e-14, 1e-14);
  const Tensor nv = matmul(n, w);
  CHECK(nv.shape() == Shape{3});
  check_close(nv, reshape(naive_matmul(n, reshape(w, {4, 1})), {3}), 1e-14, 1e-14);
  const Tensor vb = matmul(v, batch);
  CHECK(vb.shape() == Shape{2, 3});
  check_close(vb, reshape(naive_matmul(reshape(v, {1, 4}), batch), {2, 3}), 1e-14, 1e-14);
  // A transposed batch times a strided vector (every other element of 8).
  const Tensor strided = slice(uniform({8}, 55), 0, 0, 8, 2);
  const Tensor bw = matmul(transpose(batch, 1, 2), strided);
  CHECK(bw.shape() == Shape{2, 3});
  check_close(bw, reshape(naive_matmul(transpose(batch, 1, 2), reshape(strided, {4, 1})), {2, 3}), 1e-14, 1e-14);
}

TEST_CASE("matmul with k = 0 gives zeros; empty n, m or batch give empty results") {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    INFO(dtype);
    {
      // Leave NaNs in freed memory that the output may be allocated over.
      const Tensor junk = full({2, 3, 4}, std::numeric_limits<double>::quiet_NaN(), {dtype});
    }
    const Tensor y = matmul(zeros({3, 0}, {dtype}), zeros({0, 4}, {dtype}));
    CHECK(y.shape() == Shape{3, 4});
    check_close(y, zeros({3, 4}, {DType::Float64}), 0, 0);
    {
      const Tensor junk = full({2, 3, 4}, std::numeric_limits<double>::quiet_NaN(), {dtype});
    }
    const Tensor yb = matmul(zeros({2, 3, 0}, {dtype}), zeros({0, 4}, {dtype}));
    CHECK(yb.shape() == Shape{2, 3, 4});
    check_close(yb, zeros({2, 3, 4}, {DType::Float64}), 0, 0);
    CHECK(matmul(zeros({0}, {dtype}), zeros({0}, {dtype})).item<double>() == 0.0);
    CHECK(matmul(zeros({0, 3}, {dtype}), zeros({3, 4}, {dtype})).shape() == Shape{0, 4});
    CHECK(matmul(zeros({2, 3}, {dtype}), zeros({3, 0}, {dtype})).shape() == Shape{2, 0});
    CHECK(matmul(zeros({0, 2, 3}, {dtype}), zeros({3, 4}, {dtype})).shape() == Shape{0, 2, 4});
    CHECK(matmul(zeros({2, 1, 2, 3}, {dtype}), zeros({0, 3, 4}, {dtype})).shape() == Shape{2, 0, 2, 4});
  }
}

TEST_CASE("matmul: gradients, through broadcast batch dims, 1-d and strided operands") {
  auto mm = [](const Inputs& in) { return matmul(in[0], in[1]); };
  check_gradients(mm, {uniform({3, 4}, 60), uniform({4, 2}, 61)});
  check_gradients(mm, {uniform({2, 3, 4}, 62), uniform({2, 4, 2}, 63)});
  // Broadcast batch: dA and dB are summed over the batch dims they were broadcast along.
  check_gradients(mm, {uniform({2, 1, 2, 3}, 64), uniform({3, 3, 2}, 65)});
  check_gradients(mm, {uniform({2, 3}, 66), uniform({2, 3, 2}, 67)});
  check_gradients(mm, {uniform({1, 2, 3}, 68), uniform({2, 1, 3, 2}, 69)});
  // 1-d operands.
  check_gradients(mm, {uniform({4}, 70), uniform({4}, 71)});
  check_gradients(mm, {uniform({4}, 72), uniform({4, 3}, 73)});
  check_gradients(mm, {uniform({3, 4}, 74), uniform({4}, 75)});
  check_gradients(mm, {uniform({4}, 76), uniform({2, 4, 3}, 77)});
  check_gradients(mm, {uniform({2, 3, 4}, 78), uniform({4}, 79)});
  // Non-contiguous operands built from the leaves.
  check_gradients([](const Inputs& in) { return matmul(transpose(in[0], 0, 1), transpose(in[1], 0, 1)); },
                  {uniform({4, 3}, 80), uniform({2, 4}, 81)});
  check_gradients([](const Inputs& in) { return matmul(slice(in[0], 2, 0, 8, 2), expand(in[1], {2, 4, 3})); },
                  {uniform({2, 3, 8}, 82), uniform({1, 4, 3}, 83)});
  check_gradients([](const Inputs& in) { return matmul(permute(in[0], {1, 0, 2}), in[1]); },
                  {uniform({3, 2, 4}, 84), uniform({4, 2}, 85)});
  // One tensor on both sides: the two gradients add up in one buffer.
  check_gradients([](const Inputs& in) { return matmul(in[0], in[0]); }, {uniform({3, 3}, 86)});
  check_gradients([](const Inputs& in) { return matmul(in[0], transpose(in[0], 0, 1)); }, {uniform({3, 2}, 87)});
  // Size-1 and empty sizes.
  check_gradients(mm, {uniform({1, 1}, 88), uniform({1, 1}, 89)});
  check_gradients(mm, {uniform({3, 0}, 90), uniform({0, 2}, 91)});
  check_gradients(mm, {uniform({0, 3}, 92), uniform({3, 2}, 93)});  // dB = Aᵀ dY with k = 0: zeros
  check_gradients(mm, {uniform({2, 3}, 94), uniform({0, 3, 2}, 95)});
}

TEST_CASE("batched_gemm: transpose flags, beta, and accumulation into a broadcast output") {
  const Tensor a = uniform({3, 2, 4}, 100), b = uniform({3, 4, 5}, 101);
  // out (2, 5) serves all three batch elements with beta = 1: out = 1 + Σ_i a_i b_i.
  const Tensor out = ones({2, 5}, {DType::Float64});
  batched_gemm({3}, a, Transpose::No, b, Transpose::No, out, 1.0);
  check_close(out, sum(naive_matmul(a, b), {0}) + 1.0, 1e-13, 1e-13);
  // op(a) = aᵀ from a stored (4, 2); beta = 0.5 scales what was there.
  const Tensor c = full({3, 2, 5}, 2.0, {DType::Float64});
  const Tensor stored = uniform({3, 4, 2}, 102);
  batched_gemm({3}, stored, Transpose::Yes, b, Transpose::No, c, 0.5);
  check_close(c, naive_matmul(transpose(stored, 1, 2), b) + 1.0, 1e-13, 1e-13);
  // beta = 0 overwrites out without reading it (it may be uninitialised), also when k = 0.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor fresh = full({2, 5}, nan, {DType::Float64});
  batched_gemm({}, select(a, 0, 0), Transpose::No, select(b, 0, 0), Transpose::No, fresh, 0.0);
  check_close(fresh, naive_matmul(select(a, 0, 0), select(b, 0, 0)), 1e-13, 1e-13);
  const Tensor empty_sum = full({2, 3, 4}, nan, {DType::Float64});
  batched_gemm({2}, zeros({2, 3, 0}, {DType::Float64}), Transpose::No, zeros({2, 0, 4}, {DType::Float64}), Transpose::No,
               empty_sum, 0.0);
  check_close(empty_sum, zeros({2, 3, 4}, {DType::Float64}), 0, 0);
  const Tensor scaled = full({3, 4}, 2.0, {DType::Float64});
  batched_gemm({}, zeros({3, 0}, {DType::Float64}), Transpose::No, zeros({0, 4}, {DType::Float64}), Transpose::No, scaled, 0.5);
  check_close(scaled, ones({3, 4}, {DType::Float64}), 0, 0);
  // op(b) = bᵀ from a transposed view: two transpositions, which BLAS sees as none.
  const Tensor d = zeros({3, 2, 5}, {DType::Float64});
  batched_gemm({3}, a, Transpose::No, transpose(b, 1, 2), Transpose::Yes, d, 0.0);
  check_close(d, naive_matmul(a, b), 1e-13, 1e-13);
}

TEST_CASE("matmul rejects bad shapes and dtypes with the op's name") {
  const Tensor a = zeros({2, 3}, {DType::Float64});
  check_error([&] { matmul(a, zeros({4, 5}, {DType::Float64})); }, {"matmul", "(2, 3)", "(4, 5)", "cannot be multiplied", "3 != 4"});
  check_error([&] { matmul(zeros({3}, {DType::Float64}), zeros({4}, {DType::Float64})); }, {"matmul", "cannot be multiplied"});
  check_error([&] { matmul(a, zeros({2}, {DType::Float64})); }, {"matmul", "cannot be multiplied"});
  check_error([&] { matmul(zeros({2, 2, 3}, {DType::Float64}), zeros({3, 3, 4}, {DType::Float64})); },
              {"matmul", "cannot be broadcast"});
  check_error([&] { matmul(a, zeros({3, 2})); }, {"matmul", "dtype mismatch", "float64", "float32"});
  check_error([&] { matmul(zeros({2, 3}, {DType::Int64}), zeros({3, 2}, {DType::Int64})); }, {"matmul", "floating", "int64"});
  check_error([&] { matmul(scalar(1.0, {DType::Float64}), a); }, {"matmul", "at least 1 dim"});
  check_error([&] { matmul(a, Tensor()); }, {"matmul", "undefined"});
}

TEST_CASE("linear equals matmul(x, weightᵀ) + bias, in values and gradients") {
  for (DType dtype : {DType::Float64, DType::Float32}) {
    INFO(dtype);
    const double tol = dtype == DType::Float64 ? 1e-13 : 1e-5;
    const Tensor w = to(uniform({5, 4}, 100), dtype), b = to(uniform({5}, 101), dtype);
    for (const Shape& shape : std::vector<Shape>{{2, 3, 4}, {4}, {7, 4}, {0, 4}}) {
      INFO(to_string(shape));
      const Tensor x = to(uniform(shape, 102), dtype);
      check_close(linear(x, w, b), matmul(x, transpose(w, 0, 1)) + b, tol, tol);
      check_close(linear(x, w), matmul(x, transpose(w, 0, 1)), tol, tol);
    }
    // Products large enough to split among the threads, by rows (301 × 129) and by columns (5 × 900):
    // each thread adds the bias to its own part (ops/matmul.cpp); and in = 0, where y is the bias.
    for (const auto& [rows, in, out] : std::vector<std::array<int64_t, 3>>{{301, 67, 129}, {5, 40, 900}, {3, 0, 6}}) {
      INFO(rows << " × " << in << " → " << out);
      const Tensor x = to(uniform({rows, in}, 118), dtype);
      const Tensor wide = to(uniform({out, in}, 119), dtype), bias = to(uniform({out}, 120), dtype);
      check_close(linear(x, wide, bias), matmul(x, transpose(wide, 0, 1)) + bias, tol, tol);
    }
  }
  // The bias, added where each thread's part of the product lies, in each capability's lanes
  // (ops/matmul.cpp): the same bits as the product and the bias added apart.
  for (const CpuCapability capability : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
    if (capability > cpu_capability_supported()) continue;
    CpuCapabilityScope scope(capability);
    INFO(to_string(capability));
    const Tensor x = to(uniform({301, 67}, 121), DType::Float32), bias = to(uniform({129}, 122), DType::Float32);
    const Tensor weight = to(uniform({129, 67}, 123), DType::Float32);
    CHECK(max(abs(linear(x, weight, bias) - (matmul(x, transpose(weight, 0, 1)) + bias))).item<double>() == 0.0);
  }
  // Gradients of all three inputs, also for a non-contiguous x and without a bias; and against
  // the same computation from primitives.
  auto lin = [](const Inputs& in) { return linear(in[0], in[1], in[2]); };
  check_gradients(lin, {uniform({2, 3, 4}, 103), uniform({5, 4}, 104), uniform({5}, 105)});
  check_gradients([](const Inputs& in) { return linear(transpose(in[0], 0, 1), in[1], in[2]); },
                  {uniform({4, 3}, 106), uniform({2, 4}, 107), uniform({2}, 108)});
  check_gradients([](const Inputs& in) { return linear(in[0], in[1]); }, {uniform({3}, 109), uniform({2, 3}, 110)});
  check_gradients(lin, {uniform({0, 4}, 111), uniform({5, 4}, 112), uniform({5}, 113)});  // no rows: db = dW = 0
  const Inputs leaves = {uniform({2, 3, 4}, 114), uniform({5, 4}, 115), uniform({5}, 116)};
  const Tensor seed = uniform({2, 3, 5}, 117);
  std::vector<Tensor> fused = leaves, composed = leaves;
  for (Tensor& t : fused) t = t.detach(), t.set_requires_grad(true);
  for (Tensor& t : composed) t = t.detach(), t.set_requires_grad(true);
  linear(fused[0], fused[1], fused[2]).backward(seed);
  (matmul(composed[0], transpose(composed[1], 0, 1)) + composed[2]).backward(seed);
  for (size_t i = 0; i < 3; ++i) check_close(fused[i].grad(), composed[i].grad(), 1e-13, 1e-13);
}

TEST_CASE("linear adds x's gradient into one another op sent it already, as the composition sums them") {
  // q, k and v's projections of one x, beside a product with x and one with its transpose (whose
  // gradient arrives as a view): from the second projection on, each product goes into the gradient
  // x holds already, with beta = 1 (ops/matmul.cpp). With beta = 0 there, the gradcheck fails.
  const auto model = [](const Inputs& in, bool fused) {
    const Tensor& x = in[0];
    Tensor y = sum(x * 0.5) + sum(transpose(x, 1, 2) * transpose(in[4], 1, 2));
    for (int64_t p = 1; p <= 3; ++p)
      y = y + sum((fused ? linear(x, in[p]) : matmul(x, transpose(in[p], 0, 1))) * in[4 + p]);
    return y;
  };
  const Inputs inputs = {uniform({2, 3, 4}, 130), uniform({4, 4}, 131),    uniform({4, 4}, 132),
                         uniform({4, 4}, 133),    uniform({2, 3, 4}, 134), uniform({2, 3, 4}, 135),
                         uniform({2, 3, 4}, 136), uniform({2, 3, 4}, 137)};
  check_gradients([&](const Inputs& in) { return model(in, true); }, inputs);
  std::vector<Tensor> fused = inputs, composed = inputs;
  for (Tensor& t : fused) t = t.detach(), t.set_requires_grad(true);
  for (Tensor& t : composed) t = t.detach(), t.set_requires_grad(true);
  model(fused, true).backward();
  model(composed, false).backward();
  for (size_t i = 0; i < 4; ++i) check_close(fused[i].grad(), composed[i].grad(), 1e-13, 1e-13);
}

TEST_CASE("linear rejects bad shapes and dtypes with the op's name") {
  const Tensor x = zeros({2, 3}, {DType::Float64}), w = zeros({4, 3}, {DType::Float64});
  check_error([&] { linear(x, zeros({4, 2}, {DType::Float64})); }, {"linear", "x (..., in) and weight (out, in)", "(2, 3)", "(4, 2)"});
  check_error([&] { linear(x, zeros({4, 3, 1}, {DType::Float64})); }, {"linear", "(4, 3, 1)"});
  check_error([&] { linear(scalar(1.0, {DType::Float64}), w); }, {"linear", "x (..., in)"});
  check_error([&] { linear(x, w, zeros({3}, {DType::Float64})); }, {"linear", "bias (out) = (4)", "got (3,)"});
  check_error([&] { linear(x, w, zeros({1, 4}, {DType::Float64})); }, {"linear", "bias", "(1, 4)"});
  check_error([&] { linear(x, zeros({4, 3})); }, {"linear", "dtype mismatch", "float64", "float32"});
  check_error([&] { linear(x, w, zeros({4})); }, {"linear", "dtype mismatch"});
  check_error([&] { linear(zeros({2, 3}, {DType::Int64}), zeros({4, 3}, {DType::Int64})); }, {"linear", "floating", "int64"});
  check_error([&] { linear(x, Tensor()); }, {"linear", "undefined"});
}

TEST_CASE("squared_row_norms_of_product equals sum((x W)²) in values and gradients, and keeps no x W") {
  const auto composed = [](const Tensor& x, const Tensor& w) {
    const Tensor xw = matmul(x, w);
    return sum(xw * xw, {-1});
  };
  for (const Shape& shape : std::vector<Shape>{{2, 3, 4}, {4}, {7, 4}, {0, 4}}) {
    INFO(to_string(shape));
    const Tensor x = uniform(shape, 130), w = uniform({4, 5}, 131);
    check_close(squared_row_norms_of_product(x, w), composed(x, w), 1e-13, 1e-13);
  }
  const auto norms = [](const Inputs& in) { return squared_row_norms_of_product(in[0], in[1]); };
  check_gradients(norms, {uniform({2, 3, 4}, 132), uniform({4, 5}, 133)});
  check_gradients(norms, {uniform({4}, 134), uniform({4, 2}, 135)});
  check_gradients([](const Inputs& in) { return squared_row_norms_of_product(transpose(in[0], 0, 1), in[1]); },
                  {uniform({4, 3}, 136), uniform({4, 3}, 137)});
  // Against the composition's gradients, and what the forward keeps: the composition keeps x W
  // (rows × out), this op nothing of that size (x and W are the caller's).
  const Tensor x = to(uniform({256, 64}, 138), DType::Float32), w = to(uniform({64, 64}, 139), DType::Float32);
  const Tensor seed = to(uniform({256}, 140), DType::Float32);
  Allocator& alloc = context(Device::cpu()).allocator();
  std::vector<Tensor> grads;
  std::vector<int64_t> kept;
  for (const bool fused : {true, false}) {
    const Tensor xl = x.detach().set_requires_grad(true), wl = w.detach().set_requires_grad(true);
    const int64_t before = alloc.stats().in_use;
    const Tensor n = fused ? squared_row_norms_of_product(xl, wl) : composed(xl, wl);
    kept.push_back(alloc.stats().in_use - before);
    n.backward(seed);
    grads.push_back(xl.grad());
    grads.push_back(wl.grad());
  }
  check_close(grads[0], grads[2], 1e-5, 1e-5);
  check_close(grads[1], grads[3], 1e-5, 1e-5);
  {
    INFO("kept: fused " << kept[0] << " bytes, composed " << kept[1]);
    CHECK(kept[1] >= 256 * 64 * 4);  // the composition keeps x W: the measure sees it
    CHECK(kept[0] < 256 * 64 * 4 / 4);
  }
  // Under autocast it still computes in x's dtype, forward and backward (a product under autocast
  // would run in bfloat16).
  {
    const Tensor xl = x.detach().set_requires_grad(true), wl = w.detach().set_requires_grad(true);
    Tensor n;
    {
      const AutocastScope autocast;
      n = squared_row_norms_of_product(xl, wl);
    }
    CHECK(n.dtype() == DType::Float32);
    check_close(n, squared_row_norms_of_product(x, w), 0, 0);
    n.backward(seed);
    check_close(xl.grad(), grads[0], 0, 0);
    check_close(wl.grad(), grads[1], 0, 0);
  }
  // Bad input
  const Tensor xd = zeros({2, 3}, {DType::Float64}), wd = zeros({3, 4}, {DType::Float64});
  check_error([&] { squared_row_norms_of_product(xd, zeros({4, 3}, {DType::Float64})); },
              {"squared_row_norms_of_product", "x (..., in) and w (in, out)", "(2, 3)", "(4, 3)"});
  check_error([&] { squared_row_norms_of_product(xd, zeros({3, 4})); }, {"squared_row_norms_of_product", "dtype"});
  check_error([&] { squared_row_norms_of_product(zeros({2, 3}, {DType::Int64}), zeros({3, 4}, {DType::Int64})); },
              {"squared_row_norms_of_product", "floating"});
  check_error([&] { squared_row_norms_of_product(xd, Tensor()); }, {"squared_row_norms_of_product", "undefined"});
  check_error([&] { squared_row_norms_of_product(scalar(1.0, {DType::Float64}), wd); },
              {"squared_row_norms_of_product", "x (..., in)"});
}

TEST_CASE("matmul rejects operands on different devices") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: matmul device-mismatch checks need a GPU (" << cuda::unavailable_reason() << ")");
    return;
  }
  const Tensor cpu = zeros({2, 3});
  const Tensor gpu = zeros({3, 4}, {DType::Float32, Device::cuda()});
  check_error([&] { matmul(cpu, gpu); }, {"matmul", "one device", "cpu", "cuda:0"});
  check_error([&] { matmul(to(cpu, Device::cuda()), to(gpu, Device::cpu())); }, {"matmul", "one device"});
}

TEST_CASE("matmul splits its work among OpenMP's threads: one thread's result, the same bits run to run") {
  // ops/matmul.cpp: the batch's items, or each product's rows or columns, go to the threads; BLAS
  // runs on one thread in each. Shapes: a batch of fewer items than threads (split by rows), an out
  // shared by a broadcast batch dim (matmul's backward sums into it), a product wider than tall
  // (split by columns) and a batch of many items.
  // BLAS's blocking follows the sizes it is given, so a split can round differently from one thread
  // (measured: it does, at these shapes), never from the same split again.
  Generator gen(77);
  const Tensor a = randn({2, 301, 67}, gen).set_requires_grad(true), b = randn({67, 129}, gen).set_requires_grad(true);
  const Tensor skinny = randn({5, 40}, gen), wide = randn({40, 900}, gen);  // out 5 × 900: split by columns
  const Tensor many = randn({40, 9, 30}, gen), right = randn({40, 30, 11}, gen);
  auto run = [&](int threads) {
    const int previous = omp_get_max_threads();
    omp_set_num_threads(threads);
    a.zero_grad(), b.zero_grad();
    const Tensor y = matmul(a, b);
    sum(y * y).backward();  // b's gradient sums over the batch into one (67, 129) matrix
    std::vector<Tensor> out{y, a.grad(), b.grad(), matmul(skinny, wide), matmul(many, right)};
    omp_set_num_threads(previous);
    return out;
  };
  const std::vector<Tensor> one = run(1), three = run(3), again = run(3);
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("result " << i);
    check_close(three[i], one[i], 1e-3, 1e-5);
    CHECK(three[i].to_vector<float>() == again[i].to_vector<float>());
  }
}

TEST_CASE("float32 products through each CPU library match naive loops: OpenBLAS and, where built, oneDNN") {
  // ops/blas.h: oneDNN's GEMM computes float32 products where the build has it, OpenBLAS's otherwise or
  // when chosen. Transposed and strided operands, a split among threads (301 rows) and by columns,
  // beta = 0 over NaNs (never read), beta = 0.5, and a broadcast output summed into with beta = 1.
  std::vector<Float32Gemm> libraries{Float32Gemm::OpenBlas};
  if (cpu_onednn_available()) libraries.push_back(Float32Gemm::OneDnn);
  else check_error([] { Float32GemmScope scope(Float32Gemm::OneDnn); }, {"Float32GemmScope", "no oneDNN"});
  const auto input = [](const Shape& shape, uint64_t seed) { return to(uniform(shape, seed), DType::Float32); };
  for (const Float32Gemm library : libraries) {
    INFO(to_string(library));
    const Float32GemmScope scope(library);
    CHECK(cpu_float32_gemm() == library);
    check_matmul(input({5, 7}, 1), input({7, 3}, 2));
    check_matmul(input({301, 67}, 3), input({67, 129}, 4));
    check_matmul(input({5, 40}, 5), input({40, 900}, 6));
    check_matmul(transpose(input({7, 5}, 7), 0, 1), transpose(input({3, 7}, 8), 0, 1));
    check_matmul(slice(input({10, 4}, 9), 0, 0, 10, 2), input({4, 3}, 10));
    check_matmul(input({2, 1, 3, 4}, 11), input({5, 4, 2}, 12));
    const Tensor a = input({3, 2, 4}, 13), b = input({3, 4, 5}, 14);
    const Tensor fresh = full({2, 5}, std::numeric_limits<float>::quiet_NaN(), {DType::Float32});
    batched_gemm({}, select(a, 0, 0), Transpose::No, select(b, 0, 0), Transpose::No, fresh, 0.0);
    check_close(fresh, naive_matmul(select(a, 0, 0), select(b, 0, 0)), 1e-6, 1e-6);
    const Tensor half = full({3, 2, 5}, 2.0, {DType::Float32});
    batched_gemm({3}, contiguous(transpose(a, 1, 2)), Transpose::Yes, b, Transpose::No, half, 0.5);
    check_close(half, naive_matmul(a, b) + 1.0, 1e-6, 1e-6);
    const Tensor shared = ones({2, 5}, {DType::Float32});
    batched_gemm({3}, a, Transpose::No, b, Transpose::No, shared, 1.0);
    check_close(shared, sum(naive_matmul(a, b), {0}) + 1.0, 1e-6, 1e-6);
  }
}
