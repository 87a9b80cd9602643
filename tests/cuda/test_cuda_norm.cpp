// Layer norm on the GPU against the CPU, forward and backward (x, weight, bias): every parity size
// along the normalized dim and along the rows, with and without weight and bias, several trailing
// dims, non-contiguous inputs and parameters, rows far from zero, more rows than one grid (and
// enough for the weight / bias gradients to be reduced in many chunks), and gradients that have the
// same bits on every run; under autocast, x̂ kept in bfloat16.
#include <string>

#include "ops/autocast.h"
#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Statistics and gradients are sums in double on both devices, in different orders; the results
// round to x's dtype at the end.
Tolerance norm_tol(DType dtype) { return dtype == DType::Float32 ? Tolerance{1e-6, 1e-5} : Tolerance{1e-12, 1e-10}; }

enum class Affine { None, Weight, Bias, Both };

const char* affine_name(Affine a) {
  switch (a) {
    case Affine::None: return "no weight, no bias";
    case Affine::Weight: return "weight";
    case Affine::Bias: return "bias";
    case Affine::Both: return "weight and bias";
  }
  return "?";
}

// layer_norm(x, normalized, w, b) with in = {x, w, b}, the parameters left out as `a` says.
Tensor run(const std::vector<Tensor>& in, const Shape& normalized, Affine a, double eps = 1e-5) {
  const bool w = a == Affine::Weight || a == Affine::Both, b = a == Affine::Bias || a == Affine::Both;
  return layer_norm(in[0], normalized, w ? in[1] : Tensor(), b ? in[2] : Tensor(), eps);
}

void check_layer_norm(const Shape& x_shape, const Shape& normalized, DType dtype, uint64_t seed, Affine a,
                      double eps = 1e-5, double lo = -2, double hi = 2) {
  INFO("x " << to_string(x_shape) << " normalized " << to_string(normalized) << " " << dtype << " "
            << affine_name(a) << " eps " << eps);
  check_parity([&](const std::vector<Tensor>& in) { return run(in, normalized, a, eps); },
               {input(x_shape, seed, dtype, lo, hi), input(normalized, seed + 1, dtype, 0.5, 1.5),
                input(normalized, seed + 2, dtype)},
               norm_tol(dtype));
}

}  // namespace

TEST_CASE("layer_norm: every size along the normalized dim and along the rows") {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : parity_sizes()) {
      check_layer_norm({33, n}, {n}, dtype, seed += 3, Affine::Both);  // n normalized elements
      check_layer_norm({n, 33}, {33}, dtype, seed += 3, Affine::Both);  // n rows
    }
}

TEST_CASE("layer_norm with and without weight and bias, several trailing dims, another eps") {
  uint64_t seed = 100;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (Affine a : {Affine::None, Affine::Weight, Affine::Bias, Affine::Both}) {
      check_layer_norm({31, 1000}, {1000}, dtype, seed += 3, a);
      check_layer_norm({2, 3, 4, 5}, {4, 5}, dtype, seed += 3, a);
      check_layer_norm({7, 33}, {7, 33}, dtype, seed += 3, a, 0.1);
    }
}

TEST_CASE("layer_norm of non-contiguous inputs and parameters") {
  uint64_t seed = 200;
  for (Layout layout : all_layouts()) {
    INFO(layout_name(layout));
    // x seen through a view; weight a strided slice, bias an expanded scalar.
    check_parity(
        [&](const std::vector<Tensor>& in) {
          return layer_norm(view_as(layout, in[0], 37, 45), slice(in[1], 0, 0, 90, 2), expand(in[2], {45}));
        },
        {input(base_shape(layout, 37, 45), ++seed, DType::Float32, -2, 2), input({90}, ++seed, DType::Float32, 0.5, 1.5),
         input({1}, ++seed, DType::Float32)},
        norm_tol(DType::Float32));
  }
}

TEST_CASE("layer_norm of rows far from zero, in float32") {
  // A common offset of 1e4: the statistics in double keep every digit on both devices.
  check_layer_norm({64, 32}, {32}, DType::Float32, 300, Affine::Both, 1e-5, 1e4 - 1, 1e4 + 1);
  check_layer_norm({64, 4097}, {4097}, DType::Float32, 310, Affine::None, 1e-5, -1e4, -1e4 + 3);
}

TEST_CASE("layer_norm over many rows: beyond one grid, weight and bias gradients in many chunks") {
  check_layer_norm({100000, 3}, {3}, DType::Float32, 400, Affine::Both);
  check_layer_norm({5000, 77}, {77}, DType::Float64, 410, Affine::Both);
  check_layer_norm({2, 2500, 33}, {33}, DType::Float32, 420, Affine::Weight);
}

TEST_CASE("layer_norm under autocast: x̂ kept in bfloat16 for the backward, as on the CPU") {
  // Both devices round the same float32 x̂ to bfloat16 (ops/norm.cpp); rows near 1000 (x̂ rather than x
  // is kept), a row tail, one row, both affine settings.
  uint64_t seed = 600;
  for (Affine a : {Affine::None, Affine::Both})
    for (const Shape& shape : {Shape{300, 77}, Shape{1, 8}, Shape{65, 64}}) {
      const Shape normalized{shape[1]};
      INFO("x " << to_string(shape) << " " << affine_name(a) << ", autocast");
      check_parity(
          [&](const std::vector<Tensor>& in) {
            const AutocastScope autocast;
            return run(in, normalized, a);
          },
          {input(shape, seed += 3, DType::Float32, 997, 1003), input(normalized, seed + 1, DType::Float32, 0.5, 1.5),
           input(normalized, seed + 2, DType::Float32)},
          norm_tol(DType::Float32));
    }
}

TEST_CASE("layer_norm gradients have the same bits on every run") {
  const Tensor x = to(input({3000, 65}, 500), dut()), w = to(input({65}, 501, DType::Float32, 0.5, 1.5), dut());
  const Tensor b = to(input({65}, 502), dut()), dy = to(input({3000, 65}, 503), dut());
  std::vector<Tensor> first;
  for (int run = 0; run < 2; ++run) {
    std::vector<Tensor> leaves{clone(x), clone(w), clone(b)};
    for (Tensor& t : leaves) t.set_requires_grad(true);
    layer_norm(leaves[0], leaves[1], leaves[2]).backward(dy);
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (run == 0) {
        first.push_back(leaves[i].grad());
      } else {
        INFO("gradient of input " << i);
        expect_bitwise(leaves[i].grad(), first[i]);
      }
    }
  }
}

TEST_CASE("layer_norm on the device refuses what the CPU refuses") {
  const Tensor x = to(input({2, 4}, 1), dut());
  check_error([&] { layer_norm(x, to(ones({3}, {DType::Float32}), dut())); }, {"layer_norm", "weight", "(3,)"});
  check_error([&] { layer_norm(x, to(ones({4}, {DType::Float64}), dut())); }, {"layer_norm", "weight", "float64"});
  check_error([&] { layer_norm(x, {3}); }, {"layer_norm", "(3,)", "trailing dims"});
  if (on_gpu()) check_error([&] { layer_norm(x, ones({4}, {DType::Float32})); }, {"layer_norm", "one device"});
}

TEST_CASE("dropout_add_layer_norm: the device's three ops against the CPU's fused pass") {
  // On a GPU the op runs dropout, add and layer_norm (ops/norm.h); the CPU fuses them. The mask is
  // the same bit for bit; the sums are layer_norm's, in a different order.
  uint64_t seed = 600;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : {int64_t{1}, int64_t{65}, int64_t{203}}) {
      INFO(dtype << " rows of " << n);
      const uint64_t key = ++seed;
      check_parity(
          [&](const std::vector<Tensor>& in) {
            Generator gen(key);
            gen.reserve(99);
            return dropout_add_layer_norm(in[0], in[1], 0.2, gen, Mode::Train, in[2], in[3]);
          },
          {input({150, n}, ++seed, dtype), input({150, n}, ++seed, dtype), input({n}, ++seed, dtype, 0.5, 1.5),
           input({n}, ++seed, dtype)},
          norm_tol(dtype));
    }
}
