// matmul on the GPU (cuBLAS) against the CPU (OpenBLAS), forward and backward: matrices of the
// parity sizes, vectors, batches, broadcast batches (whose backward accumulates with beta = 1),
// transposed and sliced operands (transpose flags, or a copy for a layout BLAS cannot read), empty
// products, linear (x Wᵀ + b, and x's gradient added in place), squared_row_norms_of_product, and
// TF32 on request.
#include <algorithm>
#include <string>

#include "core/cuda.h"
#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Sums of products of values in [-1, 1), added in different orders on the two devices: the error
// grows with the number of terms, which in backward can be any dim of the product (up to `size`).
Tolerance matmul_tol(DType dtype, int64_t size = 64) {
  const double terms = static_cast<double>(std::max<int64_t>(size, 64));
  return dtype == DType::Float32 ? Tolerance{2e-6 * terms, 1e-4} : Tolerance{1e-14 * terms, 1e-11};
}

Tensor mm(const std::vector<Tensor>& in) { return matmul(in[0], in[1]); }

}  // namespace

TEST_CASE("matmul of matrices at every parity size, forward and backward") {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : parity_sizes()) {
      INFO(dtype << " size " << n);
      // n as each of the three dims in turn, the others small and odd
      check_parity(mm, {input({n, 7}, ++seed, dtype), input({7, 5}, ++seed, dtype)}, matmul_tol(dtype, n));
      check_parity(mm, {input({3, n}, ++seed, dtype), input({n, 5}, ++seed, dtype)}, matmul_tol(dtype, n));
      check_parity(mm, {input({3, 7}, ++seed, dtype), input({7, n}, ++seed, dtype)}, matmul_tol(dtype, n));
    }
  check_parity(mm, {input({1000, 64}, 90), input({64, 33}, 91)}, matmul_tol(DType::Float32, 1000));
}

TEST_CASE("matmul with vectors") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    check_parity(mm, {input({33}, 1, dtype), input({33}, 2, dtype)}, matmul_tol(dtype));          // dot
    check_parity(mm, {input({31, 33}, 3, dtype), input({33}, 4, dtype)}, matmul_tol(dtype));      // matrix · vector
    check_parity(mm, {input({33}, 5, dtype), input({33, 31}, 6, dtype)}, matmul_tol(dtype));      // vector · matrix
    check_parity(mm, {input({33}, 7, dtype), input({4, 33, 31}, 8, dtype)}, matmul_tol(dtype));   // vector · batch
  }
}

TEST_CASE("linear: x Wᵀ + b by one GEMM over the broadcast bias, forward and backward") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    auto lin = [](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); };
    check_parity(lin, {input({4, 31, 17}, 21, dtype), input({9, 17}, 22, dtype), input({9}, 23, dtype)},
                 matmul_tol(dtype, 124));
    check_parity([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); },
                 {input({33}, 24, dtype), input({5, 33}, 25, dtype)}, matmul_tol(dtype));
  }
}

TEST_CASE("linear: three projections of one x add their gradients into the one x holds (beta = 1)") {
  // As q, k and v's projections: from the second backward on, the product goes into x's gradient
  // in place (ops/matmul.cpp, Gradients::received).
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    auto three = [](const std::vector<Tensor>& in) {
      return linear(in[0], in[1], in[2]) * linear(in[0], in[3]) + linear(in[0], in[4], in[5]);
    };
    check_parity(three,
                 {input({4, 31, 17}, 30, dtype), input({9, 17}, 31, dtype), input({9}, 32, dtype),
                  input({9, 17}, 33, dtype), input({9, 17}, 34, dtype), input({9}, 35, dtype)},
                 matmul_tol(dtype, 124));
  }
}

TEST_CASE("squared_row_norms_of_product: ‖x_j W‖², x W formed again in the backward") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    auto norms = [](const std::vector<Tensor>& in) { return squared_row_norms_of_product(in[0], in[1]); };
    check_parity(norms, {input({4, 31, 17}, 26, dtype), input({17, 9}, 27, dtype)}, matmul_tol(dtype, 124));
    check_parity(norms, {input({33}, 28, dtype), input({33, 5}, 29, dtype)}, matmul_tol(dtype));
  }
}

TEST_CASE("batched and broadcast matmul") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    check_parity(mm, {input({4, 31, 17}, 11, dtype), input({4, 17, 9}, 12, dtype)}, matmul_tol(dtype));
    // b broadcast over the batch: its gradient sums 4 products (an output of batch stride 0)
    check_parity(mm, {input({4, 31, 17}, 13, dtype), input({17, 9}, 14, dtype)}, matmul_tol(dtype));
    // a broadcast
    check_parity(mm, {input({31, 17}, 15, dtype), input({2, 3, 17, 9}, 16, dtype)}, matmul_tol(dtype));
    // both broadcast into a (3, 4) batch
    check_parity(mm, {input({3, 1, 5, 7}, 17, dtype), input({4, 7, 6}, 18, dtype)}, matmul_tol(dtype));
    // batch dims of size 1 and 0
    check_parity(mm, {input({1, 1, 5, 7}, 19, dtype), input({1, 7, 6}, 20, dtype)}, matmul_tol(dtype));
    check_parity(mm, {input({0, 5, 7}, 21, dtype), input({7, 6}, 22, dtype)}, matmul_tol(dtype));
  }
}

TEST_CASE("matmul of transposed, sliced and permuted operands") {
  const DType f32 = DType::Float32;
  // transposed (column-major) operands: flags, no copies
  check_parity([](const std::vector<Tensor>& in) { return matmul(transpose(in[0], 0, 1), in[1]); },
               {input({33, 31}, 1), input({33, 17}, 2)}, matmul_tol(f32));
  check_parity([](const std::vector<Tensor>& in) { return matmul(in[0], transpose(in[1], 0, 1)); },
               {input({31, 33}, 3), input({17, 33}, 4)}, matmul_tol(f32));
  check_parity([](const std::vector<Tensor>& in) { return matmul(transpose(in[0], -1, -2), transpose(in[1], -1, -2)); },
               {input({3, 33, 31}, 5), input({3, 17, 33}, 6)}, matmul_tol(f32));
  // a row slice keeps a usable leading dimension; a column step does not (copied first)
  check_parity([](const std::vector<Tensor>& in) { return matmul(slice(in[0], 1, 2, 35), in[1]); },
               {input({31, 40}, 7), input({33, 17}, 8)}, matmul_tol(f32));
  check_parity([](const std::vector<Tensor>& in) { return matmul(slice(in[0], 1, 0, 66, 2), in[1]); },
               {input({31, 66}, 9), input({33, 17}, 10)}, matmul_tol(f32));
  // batch dims that cannot be merged: a permuted batch
  check_parity([](const std::vector<Tensor>& in) { return matmul(permute(in[0], {1, 0, 2, 3}), in[1]); },
               {input({3, 4, 5, 7}, 11), input({4, 3, 7, 6}, 12)}, matmul_tol(f32));
  // heads split from a sequence, as attention's q and kᵀ: (B, N, H, E) viewed as (B, H, N, E), whose
  // batch dims do not merge (copied in batch order first on the GPU, so that one cuBLAS call runs)
  check_parity(
      [](const std::vector<Tensor>& in) {
        const Tensor q = permute(in[0], {0, 2, 1, 3}), k = permute(in[1], {0, 2, 1, 3});
        return matmul(q, transpose(k, -1, -2));
      },
      {input({3, 9, 4, 8}, 15), input({3, 11, 4, 8}, 16)}, matmul_tol(f32));
  // an expanded batch on the left (stride 0)
  check_parity([](const std::vector<Tensor>& in) { return matmul(expand(in[0], {4, 5, 7}), in[1]); },
               {input({1, 5, 7}, 13), input({4, 7, 6}, 14)}, matmul_tol(f32));
}

TEST_CASE("empty products: k = 0 gives zeros, m = 0 or n = 0 nothing") {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    INFO(dtype);
    check_parity(mm, {input({3, 0}, 1, dtype), input({0, 4}, 2, dtype)}, kExact);
    check_parity(mm, {input({2, 3, 0}, 3, dtype), input({0, 4}, 4, dtype)}, kExact);
    check_parity(mm, {input({0, 3}, 5, dtype), input({3, 4}, 6, dtype)}, kExact);
    check_parity(mm, {input({3, 5}, 7, dtype), input({5, 0}, 8, dtype)}, kExact);
  }
}

TEST_CASE("matmul refuses operands on different devices and mixed dtypes") {
  if (!on_gpu()) {
    MESSAGE("skipped with --cpu-stand-in: needs two devices");
    return;
  }
  const Tensor cpu = input({3, 4}, 1), gpu = to(input({4, 5}, 2), dut());
  check_error([&] { matmul(cpu, gpu); }, {"matmul", "one device", "cpu", "cuda:0"});
  check_error([&] { matmul(to(to(cpu, DType::Float64), dut()), gpu); }, {"matmul", "dtype", "float64", "float32"});
  check_error([&] { matmul(to(small_integers({3, 4}, 3, DType::Int32), dut()), to(small_integers({4, 5}, 4, DType::Int32), dut())); },
              {"matmul", "floating", "int32"});
}

TEST_CASE("TF32 matmul on request, full float32 by default") {
  if (!on_gpu()) {
    MESSAGE("skipped with --cpu-stand-in: TF32 is a GPU setting");
    return;
  }
  CHECK(cuda::float32_matmul() == cuda::Float32Matmul::Full);
  const Tensor a = input({256, 512}, 1), b = input({512, 128}, 2);
  const Tensor expected = matmul(a, b);
  cuda::set_float32_matmul(cuda::Float32Matmul::TF32);
  CHECK(cuda::float32_matmul() == cuda::Float32Matmul::TF32);
  const Tensor fast = matmul(to(a, dut()), to(b, dut()));
  cuda::set_float32_matmul(cuda::Float32Matmul::Full);
  // TF32 rounds inputs to 10 mantissa bits: relative errors around 1e-3 per product.
  expect_close(fast, expected, {5e-2, 1e-2});
  // float64 is never affected
  const Tensor a64 = to(a, DType::Float64), b64 = to(b, DType::Float64);
  cuda::set_float32_matmul(cuda::Float32Matmul::TF32);
  const Tensor exact = matmul(to(a64, dut()), to(b64, dut()));
  cuda::set_float32_matmul(cuda::Float32Matmul::Full);
  expect_close(exact, matmul(a64, b64), matmul_tol(DType::Float64));
}
