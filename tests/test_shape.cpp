// Shape ops (ops/shape.h): values, which ops are views, gradients by gradcheck (non-contiguous,
// size-1 and empty inputs) and bad input.
#include <cmath>
#include <limits>
#include <string>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

using Inputs = std::vector<Tensor>;

Tensor f64(const std::vector<double>& values, const Shape& shape) { return from_vector<double>(values, shape); }

// 0, 1, 2, ... as float64 in `shape`: values that show where each element went.
Tensor iota(const Shape& shape) { return reshape(arange(0.0, static_cast<double>(numel(shape)), 1.0, {DType::Float64}), shape); }

bool shares_storage(const Tensor& a, const Tensor& b) { return &a.storage() == &b.storage(); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// view, reshape, flatten

TEST_CASE("view and reshape: values, -1 inference, and when they copy") {
  const Tensor x = iota({2, 3, 4});
  const Tensor v = view(x, {4, -1});
  CHECK(v.shape() == Shape{4, 6});
  CHECK(shares_storage(v, x));
  CHECK(v.to_vector<double>() == x.to_vector<double>());
  CHECK(reshape(x, {-1, 2, 2}).shape() == Shape{6, 2, 2});
  CHECK(shares_storage(reshape(x, {24}), x));  // contiguous: a view
  CHECK(flatten(x).shape() == Shape{24});
  CHECK(reshape(x, {2, 1, 3, 1, 4}).shape() == Shape{2, 1, 3, 1, 4});
  CHECK(reshape(scalar(5.0, {DType::Float64}), {1, 1}).shape() == Shape{1, 1});
  CHECK(reshape(f64({5}, {1, 1}), {}).shape() == Shape{});
  // A transposed tensor reshapes through a copy, in its logical (row-major) order.
  const Tensor t = transpose(iota({2, 3}), 0, 1);  // [[0, 3], [1, 4], [2, 5]]
  const Tensor r = reshape(t, {6});
  CHECK_FALSE(shares_storage(r, t));
  CHECK(r.to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  // Empty tensors reshape to any shape with no elements.
  CHECK(reshape(zeros({2, 0, 3}), {0, 6}).shape() == Shape{0, 6});
  CHECK(reshape(zeros({2, 0, 3}), {3, -1, 2}).shape() == Shape{3, 0, 2});
  CHECK(view(zeros({0, 4}), {2, 0}).shape() == Shape{2, 0});
  CHECK(flatten(zeros({3, 0})).shape() == Shape{0});
}

TEST_CASE("view, reshape, flatten: gradients") {
  check_gradients([](const Inputs& in) { return view(in[0], {3, 4}) * 2.0; }, {uniform({2, 6}, 1)});
  check_gradients([](const Inputs& in) { return exp(reshape(in[0], {-1})); }, {uniform({2, 3}, 2)});
  check_gradients([](const Inputs& in) { return exp(reshape(transpose(in[0], 0, 1), {2, 3})); }, {uniform({2, 3}, 3)});
  check_gradients([](const Inputs& in) { return flatten(slice(in[0], 1, 0, 4, 3)); }, {uniform({3, 4}, 4)});
  check_gradients([](const Inputs& in) { return reshape(in[0], {1, 3, 1}); }, {uniform({3, 1}, 5)});
  check_gradients([](const Inputs& in) { return reshape(in[0], {0, 6}); }, {uniform({2, 0, 3}, 6)});
  check_gradients([](const Inputs& in) { return reshape(transpose(in[0], 0, 2), {-1}); }, {uniform({2, 0, 3}, 7)});
}

// ---------------------------------------------------------------------------------------------
// permute, transpose

TEST_CASE("permute and transpose are views with permuted shapes and strides") {
  const Tensor x = iota({2, 3, 4});
  const Tensor p = permute(x, {2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.strides() == Strides{1, 12, 4});
  CHECK(shares_storage(p, x));
  CHECK(permute(x, {-1, 0, -2}).shape() == Shape{4, 2, 3});
  const Tensor t = transpose(iota({2, 3}), 0, -1);
  CHECK(t.shape() == Shape{3, 2});
  CHECK(t.to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(transpose(x, 1, 1).strides() == x.strides());
  CHECK(permute(scalar(1.0), {}).shape() == Shape{});
  CHECK(permute(zeros({2, 0, 3}), {2, 1, 0}).shape() == Shape{3, 0, 2});
}

TEST_CASE("permute and transpose: gradients") {
  check_gradients([](const Inputs& in) { return permute(in[0], {2, 0, 1}) * 2.0; }, {uniform({2, 3, 4}, 10)});
  check_gradients([](const Inputs& in) { return exp(permute(transpose(in[0], 0, 2), {1, -1, 0})); }, {uniform({2, 3, 2}, 11)});
  check_gradients([](const Inputs& in) { return transpose(slice(in[0], 0, 1, 5, 2), 0, 1); }, {uniform({5, 3}, 12)});
  check_gradients([](const Inputs& in) { return transpose(in[0], 0, 1); }, {uniform({1, 3}, 13)});
  check_gradients([](const Inputs& in) { return permute(in[0], {1, 2, 0}); }, {uniform({2, 0, 3}, 14)});
}

// ---------------------------------------------------------------------------------------------
// slice, select

TEST_CASE("slice follows Python's rules: negative bounds, clamping, steps, empty results") {
  const Tensor x = iota({10});
  auto values = [](const Tensor& t) { return t.to_vector<double>(); };
  CHECK(values(slice(x, 0, 2, 5)) == std::vector<double>{2, 3, 4});
  CHECK(values(slice(x, 0, 1, 10, 3)) == std::vector<double>{1, 4, 7});
  CHECK(values(slice(x, 0, 1, 9, 3)) == std::vector<double>{1, 4, 7});
  CHECK(values(slice(x, 0, 1, 8, 3)) == std::vector<double>{1, 4, 7});
  CHECK(values(slice(x, 0, 1, 7, 3)) == std::vector<double>{1, 4});
  CHECK(values(slice(x, 0, -3, 10)) == std::vector<double>{7, 8, 9});
  CHECK(values(slice(x, -1, -4, -1)) == std::vector<double>{6, 7, 8});
  CHECK(values(slice(x, 0, -100, 2)) == std::vector<double>{0, 1});   // start clamped to 0
  CHECK(values(slice(x, 0, 8, 100)) == std::vector<double>{8, 9});    // end clamped to the size
  CHECK(values(slice(x, 0, 0, 10, 100)) == std::vector<double>{0});   // step past the end
  CHECK(slice(x, 0, 5, 5).shape() == Shape{0});
  CHECK(slice(x, 0, 7, 3).shape() == Shape{0});                       // start > end: empty
  CHECK(slice(x, 0, 12, 20).shape() == Shape{0});
  CHECK(slice(x, 0, 0, 10, 4).shape() == Shape{3});
  // A view: shares storage, strided.
  const Tensor m = iota({4, 6});
  const Tensor s = slice(m, 1, 1, 6, 2);
  CHECK(s.shape() == Shape{4, 3});
  CHECK(s.strides() == Strides{6, 2});
  CHECK(shares_storage(s, m));
  CHECK(values(select(s, 0, 2)) == std::vector<double>{13, 15, 17});
  CHECK(slice(zeros({2, 0, 3}), 2, 1, 3).shape() == Shape{2, 0, 2});
}

TEST_CASE("select removes the dim and takes negative indices") {
  const Tensor x = iota({2, 3, 4});
  const Tensor s = select(x, 1, -1);
  CHECK(s.shape() == Shape{2, 4});
  CHECK(s.to_vector<double>() == std::vector<double>{8, 9, 10, 11, 20, 21, 22, 23});
  CHECK(shares_storage(s, x));
  CHECK(select(x, -1, 0).to_vector<double>() == std::vector<double>{0, 4, 8, 12, 16, 20});
  CHECK(select(f64({7}, {1}), 0, 0).shape() == Shape{});
  CHECK(select(zeros({2, 0}), 0, 1).shape() == Shape{0});
}

TEST_CASE("slice and select: gradients") {
  check_gradients([](const Inputs& in) { return slice(in[0], 1, 1, 6, 2) * 3.0; }, {uniform({3, 6}, 20)});
  check_gradients([](const Inputs& in) { return exp(slice(transpose(in[0], 0, 1), 0, -4, -1, 2)); }, {uniform({3, 6}, 21)});
  // Overlapping slices of one tensor: their gradients add up.
  check_gradients([](const Inputs& in) { return slice(in[0], 0, 0, 4) * slice(in[0], 0, 2, 6); }, {uniform({6}, 22)});
  check_gradients([](const Inputs& in) { return slice(slice(in[0], 0, 1, 5, 2), 0, 1, 2); }, {uniform({5, 2}, 23)});
  check_gradients([](const Inputs& in) { return slice(in[0], 0, 3, 3); }, {uniform({4, 2}, 24)});
  check_gradients([](const Inputs& in) { return slice(in[0], 0, 0, 1); }, {uniform({2, 0}, 25)});
  check_gradients([](const Inputs& in) { return select(in[0], 1, -1) * 2.0; }, {uniform({3, 4}, 26)});
  check_gradients([](const Inputs& in) { return select(transpose(in[0], 0, 2), 0, 1); }, {uniform({2, 3, 2}, 27)});
  check_gradients([](const Inputs& in) { return select(in[0], 0, 0) + select(in[0], 0, 0); }, {uniform({2, 3}, 28)});
  check_gradients([](const Inputs& in) { return select(in[0], 0, 1); }, {uniform({2, 0, 3}, 29)});
}

// ---------------------------------------------------------------------------------------------
// expand, squeeze, unsqueeze

TEST_CASE("expand broadcasts size-1 dims with stride 0 and adds leading dims") {
  const Tensor x = f64({1, 2, 3}, {3, 1});
  const Tensor e = expand(x, {2, 3, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.strides() == Strides{0, 1, 0});
  CHECK(shares_storage(e, x));
  CHECK(sum(e, {0, 2}).to_vector<double>() == std::vector<double>{8, 16, 24});
  CHECK(expand(x, {-1, 2}).to_vector<double>() == std::vector<double>{1, 1, 2, 2, 3, 3});
  CHECK(expand(x, {3, 0}).shape() == Shape{3, 0});
  CHECK(expand(scalar(2.0), {2, 2}).shape() == Shape{2, 2});
  CHECK(expand(zeros({0, 1}), {2, 0, 5}).shape() == Shape{2, 0, 5});
}

TEST_CASE("squeeze and unsqueeze") {
  const Tensor x = iota({2, 1, 3});
  CHECK(squeeze(x, 1).shape() == Shape{2, 3});
  CHECK(squeeze(x, -2).shape() == Shape{2, 3});
  CHECK(shares_storage(squeeze(x, 1), x));
  CHECK(unsqueeze(x, 0).shape() == Shape{1, 2, 1, 3});
  CHECK(unsqueeze(x, 3).shape() == Shape{2, 1, 3, 1});
  CHECK(unsqueeze(x, -1).shape() == Shape{2, 1, 3, 1});
  CHECK(unsqueeze(x, -4).shape() == Shape{1, 2, 1, 3});
  CHECK(unsqueeze(scalar(1.0), 0).shape() == Shape{1});
  CHECK(squeeze(f64({4}, {1}), 0).shape() == Shape{});
  CHECK(unsqueeze(zeros({2, 0}), 1).shape() == Shape{2, 1, 0});
  // An unsqueezed non-contiguous view still reads the right elements.
  const Tensor t = transpose(iota({2, 3}), 0, 1);
  CHECK(contiguous(unsqueeze(t, 1)).to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(unsqueeze(t, 2).to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("expand, squeeze, unsqueeze: gradients") {
  // dx sums over the expanded dims.
  check_gradients([](const Inputs& in) { return expand(in[0], {2, 3, 4}) * in[1]; }, {uniform({3, 1}, 30), uniform({2, 3, 4}, 31)});
  check_gradients([](const Inputs& in) { return expand(transpose(in[0], 0, 1), {2, -1, 3}); }, {uniform({1, 2}, 32)});
  check_gradients([](const Inputs& in) { return expand(in[0], {3, 0}); }, {uniform({3, 1}, 33)});
  check_gradients([](const Inputs& in) { return expand(in[0], {2, 0, 3}); }, {uniform({0, 1}, 34)});
  check_gradients([](const Inputs& in) { return squeeze(in[0], 1) * 2.0; }, {uniform({2, 1, 3}, 35)});
  check_gradients([](const Inputs& in) { return unsqueeze(transpose(in[0], 0, 1), 1); }, {uniform({2, 3}, 36)});
  check_gradients([](const Inputs& in) { return unsqueeze(in[0], -1); }, {uniform({0, 2}, 37)});
  check_gradients([](const Inputs& in) { return squeeze(in[0], 0); }, {uniform({1, 0}, 38)});
}

// ---------------------------------------------------------------------------------------------
// concat, stack, split

TEST_CASE("concat and stack join along a dim; empty pieces take no room") {
  const Tensor a = iota({2, 2}), b = iota({2, 3}) + 10.0;
  const Tensor c = concat({a, b}, 1);
  CHECK(c.shape() == Shape{2, 5});
  CHECK(c.to_vector<double>() == std::vector<double>{0, 1, 10, 11, 12, 2, 3, 13, 14, 15});
  CHECK(concat({a, zeros({2, 0}, {DType::Float64}), b}, -1).to_vector<double>() == c.to_vector<double>());
  CHECK(concat({a, transpose(a, 0, 1)}, 0).to_vector<double>() == std::vector<double>{0, 1, 2, 3, 0, 2, 1, 3});
  CHECK(concat({a}, 0).to_vector<double>() == a.to_vector<double>());
  CHECK(concat({zeros({0, 3}), zeros({0, 3})}, 0).shape() == Shape{0, 3});
  CHECK(concat({zeros({2, 0}), zeros({2, 0})}, 0).shape() == Shape{4, 0});
  const Tensor ints = concat({from_vector<int64_t>({1}, {1}), from_vector<int64_t>({2, 3}, {2})}, 0);
  CHECK(ints.dtype() == DType::Int64);
  CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});

  const Tensor s0 = stack({a, a * 2.0, a * 3.0}, 0);
  CHECK(s0.shape() == Shape{3, 2, 2});
  CHECK(s0.to_vector<double>() == std::vector<double>{0, 1, 2, 3, 0, 2, 4, 6, 0, 3, 6, 9});
  const Tensor s1 = stack({a, a * 2.0}, 1);
  CHECK(s1.shape() == Shape{2, 2, 2});
  CHECK(s1.to_vector<double>() == std::vector<double>{0, 1, 0, 2, 2, 3, 4, 6});
  const Tensor s2 = stack({a, a * 2.0}, -1);
  CHECK(s2.shape() == Shape{2, 2, 2});
  CHECK(s2.to_vector<double>() == std::vector<double>{0, 0, 1, 2, 2, 4, 3, 6});
  CHECK(stack({scalar(1.0), scalar(2.0)}, 0).to_vector<double>() == std::vector<double>{1, 2});
  CHECK(stack({zeros({0, 2}), zeros({0, 2})}, 1).shape() == Shape{0, 2, 2});
}

TEST_CASE("split cuts views of the given sizes; by size, the last piece may be smaller") {
  const Tensor x = iota({2, 5});
  const std::vector<Tensor> parts = split(x, {1, 0, 4}, 1);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].to_vector<double>() == std::vector<double>{0, 5});
  CHECK(parts[1].shape() == Shape{2, 0});
  CHECK(parts[2].to_vector<double>() == std::vector<double>{1, 2, 3, 4, 6, 7, 8, 9});
  CHECK(shares_storage(parts[2], x));
  const std::vector<Tensor> even = split(x, 2, -1);
  REQUIRE(even.size() == 3);
  CHECK(even[0].shape() == Shape{2, 2});
  CHECK(even[2].shape() == Shape{2, 1});
  CHECK(even[2].to_vector<double>() == std::vector<double>{4, 9});
  CHECK(split(x, 7, 1).size() == 1);
  CHECK(split(zeros({0, 3}), 2, 0).empty());
  // (A braced {0} would pick the by-size overload: spell the sizes list out.)
  CHECK(split(zeros({0, 3}), std::vector<int64_t>{0}, 0).size() == 1);
}

TEST_CASE("concat, stack, split: gradients") {
  check_gradients([](const Inputs& in) { return concat({in[0], in[1], in[2]}, 1); },
                  {uniform({2, 2}, 40), uniform({2, 3}, 41), uniform({2, 1}, 42)});
  check_gradients([](const Inputs& in) { return concat({transpose(in[0], 0, 1), slice(in[1], 0, 0, 6, 2)}, 0); },
                  {uniform({3, 2}, 43), uniform({6, 3}, 44)});
  check_gradients([](const Inputs& in) { return concat({in[0], exp(in[0])}, -1); }, {uniform({2, 2}, 45)});
  // A constant piece between two that need gradients.
  check_gradients([](const Inputs& in) { return concat({in[0], ones({1, 2}, {DType::Float64}), in[1]}, 0); },
                  {uniform({2, 2}, 55), uniform({1, 2}, 56)});
  check_gradients([](const Inputs& in) { return concat({in[0], in[1]}, 0); }, {uniform({0, 3}, 46), uniform({2, 3}, 47)});
  check_gradients([](const Inputs& in) { return concat({in[0], in[1]}, 1); }, {uniform({0, 3}, 48), uniform({0, 2}, 49)});
  check_gradients([](const Inputs& in) { return stack({in[0], transpose(in[1], 0, 1)}, 1); },
                  {uniform({2, 3}, 50), uniform({3, 2}, 51)});
  check_gradients([](const Inputs& in) { return stack({in[0], in[0] * 2.0}, -1); }, {uniform({2, 0}, 52)});
  check_gradients([](const Inputs& in) {
    const std::vector<Tensor> p = split(transpose(in[0], 0, 1), {2, 0, 1}, 0);
    return concat({p[2] * 3.0, p[1], exp(p[0])}, 0);
  }, {uniform({2, 3}, 53)});
  check_gradients([](const Inputs& in) { return split(in[0], 2, 1)[2] * 5.0; }, {uniform({2, 5}, 54)});
}

// ---------------------------------------------------------------------------------------------
// pad

TEST_CASE("pad adds constant borders, last dim first") {
  const Tensor x = iota({2, 2}) + 1.0;
  const Tensor p = pad(x, {1, 2});
  CHECK(p.shape() == Shape{2, 5});
  CHECK(p.to_vector<double>() == std::vector<double>{0, 1, 2, 0, 0, 0, 3, 4, 0, 0});
  const Tensor q = pad(x, {0, 1, 1, 0}, -1);
  CHECK(q.shape() == Shape{3, 3});
  CHECK(q.to_vector<double>() == std::vector<double>{-1, -1, -1, 1, 2, -1, 3, 4, -1});
  CHECK(pad(x, {}).to_vector<double>() == x.to_vector<double>());
  CHECK(pad(transpose(x, 0, 1), {1, 0}).to_vector<double>() == std::vector<double>{0, 1, 3, 0, 2, 4});
  CHECK(pad(from_vector<int64_t>({7}, {1}), {1, 1}, 9).to_vector<int64_t>() == std::vector<int64_t>{9, 7, 9});
  CHECK(pad(zeros({2, 0}), {1, 1}).shape() == Shape{2, 2});
  CHECK(pad(zeros({0, 2}, {DType::Float64}), {0, 0, 1, 1}, 3).to_vector<double>() == std::vector<double>{3, 3, 3, 3});
}

TEST_CASE("pad: gradients, with temporary inputs and pads lists") {
  // The pads list and the padded tensor are temporaries that are gone by the time backward runs;
  // the vectors allocated after pad returns reuse their memory.
  check_gradients([](const Inputs& in) {
    Tensor y = pad(exp(in[0]), std::vector<int64_t>{1, 2, 0, 1}, 0.5);
    const std::vector<int64_t> reuse1(4, 1000), reuse2(4, 2000);
    return y * static_cast<double>(reuse1[0] + reuse2[0]) / 3000.0;
  }, {uniform({2, 3}, 60)});
  check_gradients([](const Inputs& in) { return pad(transpose(in[0], 0, 1), {2, 0}); }, {uniform({2, 3}, 61)});
  check_gradients([](const Inputs& in) { return pad(in[0], {1, 1, 1, 1}); }, {uniform({1, 1}, 62)});
  check_gradients([](const Inputs& in) { return pad(in[0], {1, 0}); }, {uniform({2, 0}, 63)});
  check_gradients([](const Inputs& in) { return pad(in[0], {0, 0, 2, 1}); }, {uniform({0, 2}, 64)});
}

// ---------------------------------------------------------------------------------------------
// contiguous, clone, to

TEST_CASE("contiguous copies only when needed; clone always copies") {
  const Tensor x = iota({2, 3});
  CHECK(contiguous(x).impl_ptr() == x.impl_ptr());
  const Tensor t = transpose(x, 0, 1);
  const Tensor c = contiguous(t);
  CHECK(c.is_contiguous());
  CHECK_FALSE(shares_storage(c, t));
  CHECK(c.to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  const Tensor k = clone(x);
  CHECK_FALSE(shares_storage(k, x));
  CHECK(k.to_vector<double>() == x.to_vector<double>());
  {
    NoGradGuard no_grad;
    fill_(k, 0);
  }
  CHECK(x.to_vector<double>()[1] == 1.0);  // the original is untouched
  CHECK(clone(expand(f64({1, 2}, {2}), {2, 2})).strides() == Strides{2, 1});
  CHECK(clone(zeros({0, 3})).shape() == Shape{0, 3});
}

TEST_CASE("to(dtype) converts values; same dtype returns the tensor itself") {
  const Tensor x = f64({-1.5, 0, 2.7}, {3});
  CHECK(to(x, DType::Float64).impl_ptr() == x.impl_ptr());
  CHECK(to(x, DType::Int64).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 2});
  CHECK(to(x, DType::Int32).dtype() == DType::Int32);
  CHECK(to(x, DType::Bool).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(to(x, DType::Float32).to_vector<float>() == std::vector<float>{-1.5f, 0.0f, 2.7f});
  CHECK(to(from_vector<int64_t>({3, -4}, {2}), DType::Float64).to_vector<double>() == std::vector<double>{3, -4});
  CHECK(to(transpose(f64({1, 2, 3, 4}, {2, 2}), 0, 1), DType::Int64).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 2, 4});
  CHECK(to(zeros({0, 2}), DType::Int64).shape() == Shape{0, 2});
}

TEST_CASE("contiguous, clone, to: gradients") {
  check_gradients([](const Inputs& in) { return contiguous(transpose(in[0], 0, 1)) * 2.0; }, {uniform({2, 3}, 70)});
  check_gradients([](const Inputs& in) { return contiguous(in[0]) * 2.0; }, {uniform({2, 3}, 71)});
  check_gradients([](const Inputs& in) { return clone(slice(in[0], 1, 0, 4, 2)) * 2.0; }, {uniform({2, 4}, 72)});
  check_gradients([](const Inputs& in) { return clone(in[0]); }, {uniform({0, 3}, 73)});
  check_gradients([](const Inputs& in) { return contiguous(transpose(in[0], 0, 1)); }, {uniform({2, 0}, 74)});
  // Through float32 and back: linear, so a large step is exact up to float32 rounding.
  GradcheckOptions coarse;
  coarse.eps = 1e-2;
  check_gradients([](const Inputs& in) { return to(to(transpose(in[0], 0, 1), DType::Float32) * 3.0, DType::Float64); },
                  {uniform({2, 3}, 75)}, coarse);
  check_gradients([](const Inputs& in) { return to(to(in[0], DType::Float32), DType::Float64); }, {uniform({0, 2}, 76)});
  // The gradient arrives in the input's dtype; an integer conversion cuts the tape.
  Tensor x = f64({1, 2}, {2});
  x.set_requires_grad(true);
  sum(to(x, DType::Float32) * 4.0f).backward();
  CHECK(x.grad().dtype() == DType::Float64);
  check_close(x.grad(), f64({4, 4}, {2}));
  CHECK_FALSE(to(x, DType::Int64).requires_grad());
}

// ---------------------------------------------------------------------------------------------
// Bad input

TEST_CASE("view, reshape, permute, transpose reject bad arguments") {
  const Tensor x = zeros({2, 3});
  check_error([&] { view(transpose(x, 0, 1), {6}); }, {"view", "contiguous", "(3, 2)", "reshape"});
  check_error([&] { reshape(x, {4, 2}); }, {"reshape", "(4, 2)", "8 elements", "(2, 3)", "6 elements"});
  check_error([&] { view(x, {5}); }, {"view", "(5,)", "(2, 3)"});
  check_error([&] { reshape(x, {-1, -1}); }, {"reshape", "only one dim may be -1"});
  check_error([&] { reshape(x, {-1, 4}); }, {"reshape", "cannot infer", "(-1, 4)", "(2, 3)"});
  check_error([&] { reshape(x, {-2, -3}); }, {"reshape", "invalid size", "(-2, -3)"});
  check_error([&] { reshape(zeros({2, 0}), {0, -1}); }, {"reshape", "cannot infer"});
  check_error([&] { reshape(Tensor(), {1}); }, {"reshape", "undefined"});
  check_error([&] { permute(x, {0}); }, {"permute", "1 dims", "(2, 3)"});
  check_error([&] { permute(x, {1, 1}); }, {"permute", "dim 1 appears twice"});
  check_error([&] { permute(x, {0, 2}); }, {"permute", "dim 2 is out of range"});
  check_error([&] { transpose(x, 0, 2); }, {"transpose", "dim 2 is out of range"});
  check_error([&] { transpose(x, -3, 0); }, {"transpose", "dim -3 is out of range"});
}

TEST_CASE("slice, select, expand, squeeze, unsqueeze reject bad arguments") {
  const Tensor x = zeros({2, 3});
  check_error([&] { slice(x, 2, 0, 1); }, {"slice", "dim 2 is out of range"});
  check_error([&] { slice(x, 0, 0, 2, 0); }, {"slice", "step must be positive", "0"});
  check_error([&] { slice(x, 0, 2, 0, -1); }, {"slice", "step must be positive", "-1"});
  check_error([&] { slice(scalar(1.0), 0, 0, 1); }, {"slice", "out of range", "0 dims"});
  check_error([&] { select(x, 1, 3); }, {"select", "index 3 is out of range", "dim 1 of size 3"});
  check_error([&] { select(x, 0, -3); }, {"select", "index -3 is out of range", "size 2"});
  check_error([&] { select(zeros({0, 2}), 0, 0); }, {"select", "index 0 is out of range", "size 0"});
  check_error([&] { select(x, -3, 0); }, {"select", "dim -3 is out of range"});
  check_error([&] { expand(x, {3, 3}); }, {"expand", "(2, 3)", "(3, 3)"});
  check_error([&] { expand(x, {3}); }, {"expand", "fewer dims"});
  check_error([&] { expand(x, {-1, 2, 3}); }, {"expand", "(-1, 2, 3)"});
  check_error([&] { expand(x, {2, -2}); }, {"expand", "(2, -2)"});
  check_error([&] { squeeze(x, 1); }, {"squeeze", "dim 1", "(2, 3)", "size 3, not 1"});
  check_error([&] { squeeze(x, 2); }, {"squeeze", "dim 2 is out of range"});
  check_error([&] { unsqueeze(x, 3); }, {"unsqueeze", "dim 3 is out of range"});
  check_error([&] { unsqueeze(x, -4); }, {"unsqueeze", "dim -4 is out of range"});
}

TEST_CASE("concat, stack, split, pad reject bad arguments") {
  const Tensor a = zeros({2, 3}), b = zeros({2, 4});
  check_error([&] { concat({}, 0); }, {"concat", "at least one tensor"});
  check_error([&] { concat({a, b}, 0); }, {"concat", "(2, 3)", "(2, 4)", "differ outside dim 0"});
  check_error([&] { concat({a, zeros({2, 3, 1})}, 1); }, {"concat", "(2, 3, 1)"});
  check_error([&] { concat({a, zeros({2, 3}, {DType::Float64})}, 0); }, {"concat", "dtype mismatch", "float32", "float64"});
  check_error([&] { concat({scalar(1.0), scalar(2.0)}, 0); }, {"concat", "0-d"});
  check_error([&] { concat({a, a}, 2); }, {"concat", "dim 2 is out of range"});
  check_error([&] { concat({a, Tensor()}, 0); }, {"concat", "undefined"});
  check_error([&] { stack({}, 0); }, {"stack", "at least one tensor"});
  check_error([&] { stack({a, b}, 0); }, {"stack", "all shapes must match", "(2, 3)", "(2, 4)"});
  check_error([&] { stack({a, zeros({2, 3}, {DType::Float64})}, 0); }, {"stack", "dtype mismatch", "float32", "float64"});
  check_error([&] { stack({a, a}, 3); }, {"stack", "dim 3 is out of range"});
  check_error([&] { split(a, {1, 1}, 1); }, {"split", "(1, 1)", "add up to 2", "size 3"});
  check_error([&] { split(a, {4, -1}, 1); }, {"split", "negative size"});
  check_error([&] { split(a, 0, 1); }, {"split", "size must be positive"});
  check_error([&] { split(a, std::vector<int64_t>{3}, 2); }, {"split", "dim 2 is out of range"});
  check_error([&] { split(a, 2, -3); }, {"split", "dim -3 is out of range"});
  check_error([&] { pad(a, {1}); }, {"pad", "pairs", "(1,)"});
  check_error([&] { pad(a, {1, 1, 1, 1, 1, 1}); }, {"pad", "at most 2 dims"});
  check_error([&] { pad(a, {1, -1}); }, {"pad", "non-negative", "(1, -1)"});
  check_error([&] { pad(Tensor(), {1, 1}); }, {"pad", "undefined"});
  check_error([&] { clone(Tensor()); }, {"clone", "undefined"});
  check_error([&] { to(Tensor(), DType::Float32); }, {"to", "undefined"});
}

TEST_CASE("views refuse shapes and strides that overflow int64") {
  constexpr int64_t k62 = int64_t{1} << 62, k32 = int64_t{1} << 32;
  // The element count (2^64) wrapped to 0, matching the empty input, and a select then read
  // outside the storage (heap-buffer-overflow) or crashed.
  check_error([] { view(zeros({0}), {k62, 4}); }, {"view", "(4611686018427387904, 4)", "too large"});
  check_error([] { reshape(zeros({0}), {k32, k32}); }, {"reshape", "(4294967296, 4294967296)", "too large"});
  check_error([] { reshape(zeros({0}), {k32, k32, k32}); }, {"reshape", "too large"});
  check_error([] { reshape(zeros({0}), {0, k62, 8}); }, {"reshape", "too large"});
  check_error([] { expand(zeros({1, 1}), {k32, k32}); }, {"expand", "(4294967296, 4294967296)", "too large"});
  check_error([] { expand(zeros({1}), {k62, 2, 1}); }, {"expand", "too large"});
  // Still allowed: a large expand whose count fits, and a huge slice step on a short dim.
  CHECK(expand(zeros({1}), {k32, k32 / 4}).numel() == k62);
  const Tensor x = arange(0.0, 10.0);
  const Tensor s = slice(x, 0, 3, 10, std::numeric_limits<int64_t>::max());
  CHECK(s.shape() == Shape{1});
  CHECK(s.item<float>() == 3.0f);
  CHECK(slice(x, 0, 0, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()).numel() == 1);
  CHECK(split(x, std::numeric_limits<int64_t>::max(), 0).size() == 1);
  const int64_t big = std::numeric_limits<int64_t>::max();
  check_error([&] { split(x, {big, big}, 0); }, {"split", "overflows int64"});
  check_error([&] { pad(x, {big, big}); }, {"pad", "overflows int64"});
  check_error([&] { concat({expand(zeros({1}), {k62}), expand(zeros({1}), {k62}), expand(zeros({1}), {k62})}, 0); },
              {"concat", "overflows int64"});
}

TEST_CASE("concat and stack reject tensors on different devices") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: shape-op device-mismatch checks need a GPU (" << cuda::unavailable_reason() << ")");
    return;
  }
  const Tensor cpu = zeros({2, 3});
  const Tensor gpu = zeros({2, 3}, {DType::Float32, Device::cuda()});
  check_error([&] { concat({cpu, gpu}, 0); }, {"concat", "one device", "cpu", "cuda:0"});
  check_error([&] { concat({gpu, cpu}, 1); }, {"concat", "one device"});
  check_error([&] { stack({cpu, gpu}, 0); }, {"stack", "one device", "cpu", "cuda:0"});
}

// ---------------------------------------------------------------------------------------------
// flip, roll, repeat, tril, triu, detach

TEST_CASE("flip reverses along each given dim, any dtype") {
  const Tensor x = iota({2, 3});  // 0 1 2 / 3 4 5
  check_close(flip(x, {1}), f64({2, 1, 0, 5, 4, 3}, {2, 3}));
  check_close(flip(x, {0}), f64({3, 4, 5, 0, 1, 2}, {2, 3}));
  check_close(flip(x, {0, -1}), f64({5, 4, 3, 2, 1, 0}, {2, 3}));
  check_close(flip(x, {}), x);
  CHECK(flip(from_vector<int32_t>({1, 2, 3}, {3}), {0}).to_vector<int32_t>() == std::vector<int32_t>{3, 2, 1});
  CHECK(flip(from_vector<bool>({true, false}, {2}), {0}).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(flip(zeros({0, 2}), {0}).shape() == Shape{0, 2});
  check_gradients([](const Inputs& in) { return flip(in[0], {0, 2}); }, {uniform({2, 3, 4}, 1)});
  check_gradients([](const Inputs& in) { return flip(transpose(in[0], 0, 1), {1}); }, {uniform({3, 2}, 2)});
}

TEST_CASE("roll shifts with wrap-around, negative and large shifts, several dims") {
  const Tensor x = iota({2, 4});  // 0 1 2 3 / 4 5 6 7
  check_close(roll(x, {1}, {1}), f64({3, 0, 1, 2, 7, 4, 5, 6}, {2, 4}));
  check_close(roll(x, {-1}, {1}), f64({1, 2, 3, 0, 5, 6, 7, 4}, {2, 4}));
  check_close(roll(x, {9}, {-1}), roll(x, {1}, {1}));  // 9 mod 4 = 1
  check_close(roll(x, {1, 2}, {0, 1}), f64({6, 7, 4, 5, 2, 3, 0, 1}, {2, 4}));
  check_close(roll(x, {0}, {1}), x);
  CHECK(roll(zeros({0, 3}), {2}, {0}).shape() == Shape{0, 3});
  check_gradients([](const Inputs& in) { return roll(in[0], {2, -1}, {0, 1}); }, {uniform({3, 4}, 3)});
}

TEST_CASE("repeat tiles each dim, adds leading dims for extra counts, and sums the gradient over copies") {
  const Tensor x = iota({2});  // 0 1
  check_close(repeat(x, {3}), f64({0, 1, 0, 1, 0, 1}, {6}));
  check_close(repeat(x, {2, 2}), f64({0, 1, 0, 1, 0, 1, 0, 1}, {2, 4}));
  check_close(repeat(iota({2, 2}), {1, 2}), f64({0, 1, 0, 1, 2, 3, 2, 3}, {2, 4}));
  check_close(repeat(iota({2, 1}), {2, 3}), f64({0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1}, {4, 3}));
  CHECK(repeat(x, {0}).shape() == Shape{0});
  CHECK(repeat(scalar(5.0), {2, 3}).shape() == Shape{2, 3});
  CHECK(repeat(from_vector<int64_t>({7}, {1}), {3}).to_vector<int64_t>() == std::vector<int64_t>{7, 7, 7});
  check_gradients([](const Inputs& in) { return repeat(in[0], {2, 1, 3}); }, {uniform({2, 3}, 4)});
  check_gradients([](const Inputs& in) { return repeat(transpose(in[0], 0, 1), {2, 2}); }, {uniform({2, 3}, 5)});
}

TEST_CASE("tril and triu keep a triangle of the last two dims, with any diagonal offset") {
  const Tensor x = iota({3, 4}) + 1.0;  // 1..12
  check_close(tril(x), f64({1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}, {3, 4}));
  check_close(triu(x), f64({1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}, {3, 4}));
  check_close(tril(x, 1), f64({1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12}, {3, 4}));
  check_close(triu(x, -1), f64({1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}, {3, 4}));
  check_close(tril(x, -3), zeros({3, 4}, {DType::Float64}));
  // tril(x, k) + triu(x, k + 1) = x, over a batch.
  const Tensor b = uniform({2, 3, 5}, 6);
  check_close(tril(b, 1) + triu(b, 2), b);
  CHECK(tril(ones({2, 2}, {DType::Bool})).to_vector<bool>() == std::vector<bool>{true, false, true, true});
  CHECK(triu(ones({2, 2}, {DType::Int32})).to_vector<int32_t>() == std::vector<int32_t>{1, 1, 0, 1});
  check_gradients([](const Inputs& in) { return tril(in[0], 0); }, {uniform({2, 3, 3}, 7)});
  check_gradients([](const Inputs& in) { return triu(transpose(in[0], 0, 1), 1); }, {uniform({4, 3}, 8)});
}

TEST_CASE("detach as a free function shares storage and cuts the graph") {
  Tensor x = uniform({3}, 9);
  x.set_requires_grad(true);
  const Tensor d = detach(x * 2.0);
  CHECK_FALSE(d.requires_grad());
  const Tensor same = detach(x);
  CHECK(shares_storage(same, x));
  sum(x * detach(x)).backward();
  check_close(x.grad(), x.detach());  // d(x · c)/dx = c, with c = x held constant
}

TEST_CASE("flip, roll, repeat, tril, triu and detach reject bad arguments") {
  const Tensor x = zeros({2, 3});
  check_error([&] { flip(x, {2}); }, {"flip", "dim 2", "2 dims"});
  check_error([&] { flip(x, {1, -1}); }, {"flip", "appears twice", "(2, 3)"});
  check_error([&] { roll(x, {1, 2}, {0}); }, {"roll", "one shift per dim", "(2, 3)"});
  check_error([&] { roll(x, {1}, {5}); }, {"roll", "dim 5"});
  check_error([&] { repeat(x, {2}); }, {"repeat", "at least one count per dim", "(2, 3)"});
  check_error([&] { repeat(x, {2, -1}); }, {"repeat", "non-negative"});
  check_error([&] { tril(zeros({3})); }, {"tril", "at least 2 dims", "(3,)"});
  check_error([&] { triu(scalar(1.0)); }, {"triu", "at least 2 dims", "()"});
  check_error([&] { detach(Tensor()); }, {"detach", "undefined"});
  check_error([&] { flip(Tensor(), {0}); }, {"flip", "undefined"});
}
