#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Row-major coordinates of element `flat` of `shape`, and back.
Shape coords_of(int64_t flat, const Shape& shape) {
  Shape c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = flat % shape[d];
    flat /= shape[d];
  }
  return c;
}

int64_t flat_of(const Shape& c, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + c[d];
  return flat;
}

Tensor indices(int64_t high, const Shape& shape, uint64_t seed, DType dtype = DType::Int64) {
  Generator gen(seed);
  return randint(0, high, shape, gen, {dtype});
}

// The naive gather: y[c] = x[c with c[dim] = index[c]].
std::vector<double> naive_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  const std::vector<double> xv = x.to_vector<double>();
  const std::vector<int64_t> iv = index.to_vector<int64_t>();
  std::vector<double> y(iv.size());
  for (size_t k = 0; k < iv.size(); ++k) {
    Shape c = coords_of(static_cast<int64_t>(k), index.shape());
    c[dim] = iv[k];
    y[k] = xv[flat_of(c, x.shape())];
  }
  return y;
}

// The naive scatter_add: y = x; y[c with c[dim] = index[c]] += src[c].
std::vector<double> naive_scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  std::vector<double> y = x.to_vector<double>();
  const std::vector<int64_t> iv = index.to_vector<int64_t>();
  const std::vector<double> sv = src.to_vector<double>();
  for (size_t k = 0; k < iv.size(); ++k) {
    Shape c = coords_of(static_cast<int64_t>(k), index.shape());
    c[dim] = iv[k];
    y[flat_of(c, x.shape())] += sv[k];
  }
  return y;
}

// The naive index_select / index_add over 1-d indices.
std::vector<double> naive_index_select(const Tensor& x, int64_t dim, const std::vector<int64_t>& index) {
  Shape shape = x.shape();
  shape[dim] = static_cast<int64_t>(index.size());
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> y(numel(shape));
  for (size_t k = 0; k < y.size(); ++k) {
    Shape c = coords_of(static_cast<int64_t>(k), shape);
    c[dim] = index[c[dim]];
    y[k] = xv[flat_of(c, x.shape())];
  }
  return y;
}

std::vector<double> naive_index_add(const Tensor& x, int64_t dim, const std::vector<int64_t>& index, const Tensor& src) {
  std::vector<double> y = x.to_vector<double>();
  const std::vector<double> sv = src.to_vector<double>();
  for (size_t k = 0; k < sv.size(); ++k) {
    Shape c = coords_of(static_cast<int64_t>(k), src.shape());
    c[dim] = index[c[dim]];
    y[flat_of(c, x.shape())] += sv[k];
  }
  return y;
}

void check_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  const std::vector<double> v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (size_t k = 0; k < v.size(); ++k) {
    INFO("element " << k << ": " << v[k] << " vs " << expected[k]);
    CHECK(std::abs(v[k] - expected[k]) <= tol + tol * std::abs(expected[k]));
  }
}

double dot(const Tensor& a, const Tensor& b) { return sum(a * b).item<double>(); }

}  // namespace

TEST_CASE("gather follows torch semantics along every dim, with int32 and int64 indices") {
  const Tensor x = uniform({4, 5, 6}, 1);
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (DType dtype : {DType::Int32, DType::Int64}) {
      // index is smaller than x outside dim and larger along it (indices repeat)
      Shape shape{3, 4, 5};
      shape[dim] = 7;
      const Tensor index = indices(x.shape()[dim], shape, 10 + dim, dtype);
      const Tensor y = gather(x, dim, index);
      CHECK(y.shape() == shape);
      check_values(y, naive_gather(x, dim, index));
    }
  }
  // a negative dim, and a strided (transposed) x
  const Tensor xt = transpose(x, 0, 2);  // (6, 5, 4)
  const Tensor index = indices(4, {6, 5, 3}, 3);
  check_values(gather(xt, -1, index), naive_gather(contiguous(xt), 2, index));
}

TEST_CASE("scatter_add adds src at the indices, accumulating duplicates") {
  const Tensor x = uniform({3, 4, 5}, 2);
  for (int64_t dim = 0; dim < 3; ++dim) {
    Shape shape{2, 3, 4};
    shape[dim] = 9;  // more indices than the dim has: duplicates
    const Tensor index = indices(x.shape()[dim], shape, 20 + dim, dim == 1 ? DType::Int32 : DType::Int64);
    const Tensor src = uniform(shape, 30 + dim);
    const Tensor y = scatter_add(x, dim, index, src);
    CHECK(y.shape() == x.shape());
    check_values(y, naive_scatter_add(x, dim, index, src));
  }
  // all of src into one element
  const Tensor y = scatter_add(zeros({1, 3}, {DType::Float64}), 1, zeros({1, 4}, {DType::Int64}),
                               from_vector<double>({1, 2, 3, 4}, {1, 4}));
  CHECK(y.to_vector<double>() == std::vector<double>{10, 0, 0});
}

TEST_CASE("index_select and index_add along every dim, with repeated indices") {
  const Tensor x = uniform({4, 3, 5}, 3);
  for (int64_t dim = 0; dim < 3; ++dim) {
    const int64_t size = x.shape()[dim];
    std::vector<int64_t> idx{size - 1, 0, size - 1, 1, 0};
    const Tensor index = from_vector<int64_t>(idx, {5});
    const Tensor y = index_select(x, dim, index);
    Shape shape = x.shape();
    shape[dim] = 5;
    CHECK(y.shape() == shape);
    check_values(y, naive_index_select(x, dim, idx));
    check_values(index_select(x, dim, to(index, DType::Int32)), naive_index_select(x, dim, idx));

    const Tensor src = uniform(shape, 40 + dim);
    const Tensor z = index_add(x, dim, index, src);
    CHECK(z.shape() == x.shape());
    check_values(z, naive_index_add(x, dim, idx, src));
  }
  // an empty index selects nothing and adds nothing
  const Tensor none = zeros({0}, {DType::Int64});
  CHECK(index_select(x, 1, none).shape() == Shape{4, 0, 5});
  check_close(index_add(x, 1, none, zeros({4, 0, 5}, {DType::Float64})), x);
}

TEST_CASE("the adjoint pairs: <gather(x), y> = <x, scatter_add(0, y)> and likewise index_select / index_add") {
  const Tensor x = uniform({6, 7}, 4), index = indices(6, {9, 7}, 5), y = uniform({9, 7}, 6);
  const double lhs = dot(gather(x, 0, index), y);
  const double rhs = dot(x, scatter_add(zeros({6, 7}, {DType::Float64}), 0, index, y));
  CHECK(lhs == doctest::Approx(rhs).epsilon(1e-12));

  const Tensor rows = indices(7, {11}, 7), v = uniform({6, 11}, 8);
  const double lhs2 = dot(index_select(x, 1, rows), v);
  const double rhs2 = dot(x, index_add(zeros({6, 7}, {DType::Float64}), 1, rows, v));
  CHECK(lhs2 == doctest::Approx(rhs2).epsilon(1e-12));
}

TEST_CASE("gradcheck: gather, scatter_add, index_select, index_add with duplicate indices") {
  const GradcheckOptions opts{1e-6, 1e-7, 1e-5};
  for (int64_t dim : {0, 1}) {
    const Tensor x = uniform({3, 4}, 50 + dim);
    // duplicates within every fiber along dim
    const Tensor index = dim == 0 ? from_vector<int64_t>({0, 2, 2, 1, 1, 1, 0, 0, 2, 0, 2, 2}, {3, 4})
                                  : from_vector<int64_t>({3, 3, 0, 1, 0, 0, 2, 2, 3}, {3, 3});
    check_gradients([dim](const std::vector<Tensor>& in) { return gather(in[0], dim, in[1]); }, {x, index}, opts);
    const Tensor src = uniform(index.shape(), 60 + dim);
    // squared, so that dy differs between the elements that duplicates add up
    check_gradients([dim](const std::vector<Tensor>& in) {
      const Tensor y = scatter_add(in[0], dim, in[1], in[2]);
      return y * y;
    }, {x, index, src}, opts);

    const Tensor rows = from_vector<int32_t>({1, 0, 1, 1, 2}, {5});
    check_gradients([dim](const std::vector<Tensor>& in) {
      const Tensor y = index_select(in[0], dim, in[1]);
      return y * y;
    }, {x, rows}, opts);
    Shape shape = x.shape();
    shape[dim] = 5;
    check_gradients([dim](const std::vector<Tensor>& in) {
      const Tensor y = index_add(in[0], dim, in[1], in[2]);
      return y * y;
    }, {x, rows, uniform(shape, 70 + dim)}, opts);
  }
}

TEST_CASE("gradients reach only the inputs that need them, and accumulate") {
  Tensor x = uniform({3, 2}, 9), src = uniform({4, 2}, 10);
  src.set_requires_grad(true);  // x does not require grad
  const Tensor index = from_vector<int64_t>({0, 0, 2, 2, 0, 1, 2, 0}, {4, 2});
  sum(scatter_add(x, 0, index, src) * 2.0).backward();
  CHECK_FALSE(x.grad().defined());
  check_close(src.grad(), full({4, 2}, 2.0, {DType::Float64}));

  // x used twice: gather's gradient adds to the other branch's
  Tensor w = uniform({3}, 11);
  w.set_requires_grad(true);
  const Tensor picks = from_vector<int64_t>({2, 2, 0}, {3});
  sum(gather(w, 0, picks) + w).backward();
  check_close(w.grad(), from_vector<double>({2, 1, 3}, {3}));
}

TEST_CASE("large scatter_add and index_add are deterministic and match a serial sum") {
  // enough work for the parallel path; float32 sums differ with order, so determinism shows
  Generator gen(12);
  const Tensor src = rand({300, 257}, gen);
  const Tensor index = randint(0, 7, {300, 257}, gen);
  const Tensor x = zeros({7, 257});
  const Tensor a = scatter_add(x, 0, index, src), b = scatter_add(x, 0, index, src);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  check_values(a, naive_scatter_add(to(x, DType::Float64), 0, index, to(src, DType::Float64)), 1e-5);

  const Tensor rows = randint(0, 5, {300}, gen);
  const Tensor c = index_add(zeros({5, 257}), 0, rows, src), d = index_add(zeros({5, 257}), 0, rows, src);
  CHECK(c.to_vector<float>() == d.to_vector<float>());
  check_values(c, naive_index_add(zeros({5, 257}, {DType::Float64}), 0, rows.to_vector<int64_t>(),
                                  to(src, DType::Float64)), 1e-5);
}

TEST_CASE("gather and index_select copy integer and bool tensors too") {
  const Tensor x = from_vector<int64_t>({10, 11, 12, 13}, {4});
  CHECK(gather(x, 0, from_vector<int32_t>({3, 0, 3}, {3})).to_vector<int64_t>() == std::vector<int64_t>{13, 10, 13});
  CHECK(index_select(x, 0, from_vector<int64_t>({1, 1}, {2})).to_vector<int64_t>() == std::vector<int64_t>{11, 11});
  const Tensor mask = from_vector<bool>({true, false}, {2});
  CHECK(index_select(mask, 0, from_vector<int64_t>({1, 0, 0}, {3})).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(scatter_add(x, 0, from_vector<int64_t>({0, 0}, {2}), from_vector<int64_t>({5, 6}, {2})).to_vector<int64_t>() ==
        std::vector<int64_t>{21, 11, 12, 13});
}

TEST_CASE("one_hot: float32 by default, any dtype on request") {
  const Tensor index = from_vector<int64_t>({2, 0, 1, 2}, {2, 2});
  const Tensor y = one_hot(index, 3);
  CHECK(y.dtype() == DType::Float32);
  CHECK(y.shape() == Shape{2, 2, 3});
  CHECK(y.to_vector<float>() == std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 0, 1});
  const Tensor z = one_hot(from_vector<int32_t>({1}, {1}), 2, DType::Int64);
  CHECK(z.dtype() == DType::Int64);
  CHECK(z.to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(one_hot(zeros({0}, {DType::Int64}), 4).shape() == Shape{0, 4});
}

TEST_CASE("out-of-range indices are refused before anything is written") {
  const Tensor x = uniform({2, 3}, 13), src = uniform({2, 2}, 14);
  const std::vector<double> x_before = x.to_vector<double>(), src_before = src.to_vector<double>();
  for (int64_t bad : {-1, 3, 100}) {
    // the bad index is last, after valid ones that a kernel would have written already
    const Tensor index = from_vector<int64_t>({0, 1, 2, bad}, {2, 2});
    check_error([&] { gather(x, 1, index); }, {"gather", "index " + std::to_string(bad), "(1, 1)", "[0, 3)", "dim 1 of x (2, 3)"});
    check_error([&] { scatter_add(x, 1, index, src); }, {"scatter_add", "index " + std::to_string(bad), "out of range"});
    const Tensor rows = from_vector<int32_t>({0, 2, static_cast<int32_t>(bad)}, {3});
    check_error([&] { index_select(x, 1, rows); }, {"index_select", "index " + std::to_string(bad), "(2,)", "[0, 3)"});
    check_error([&] { index_add(x, 1, rows, uniform({2, 3}, 15)); }, {"index_add", "out of range [0, 3)"});
    check_error([&] { one_hot(rows, 3); }, {"one_hot", "index " + std::to_string(bad), "3 classes"});
  }
  check_error([&] { index_select(x, 0, from_vector<int64_t>({2}, {1})); }, {"index_select", "[0, 2)", "dim 0"});
  CHECK(x.to_vector<double>() == x_before);
  CHECK(src.to_vector<double>() == src_before);
}

TEST_CASE("index ops refuse wrong dtypes and shapes") {
  const Tensor x = uniform({2, 3}, 16);
  const Tensor fidx = zeros({2, 3}, {DType::Float32});
  check_error([&] { gather(x, 0, fidx); }, {"gather", "index must be int32 or int64", "float32"});
  check_error([&] { scatter_add(x, 0, fidx, x); }, {"scatter_add", "int32 or int64"});
  check_error([&] { index_select(x, 0, zeros({2}, {DType::Bool})); }, {"index_select", "bool"});
  check_error([&] { index_add(x, 0, zeros({2}), x); }, {"index_add", "float32"});
  check_error([&] { one_hot(zeros({2}, {DType::Float64}), 3); }, {"one_hot", "float64"});

  const Tensor idx = zeros({2, 3}, {DType::Int64});
  check_error([&] { gather(x, 0, zeros({2}, {DType::Int64})); }, {"gather", "index of shape (2,)", "2 dims of x (2, 3)"});
  check_error([&] { gather(x, 0, zeros({2, 4}, {DType::Int64})); }, {"gather", "(2, 4)", "no larger outside dim 0"});
  check_error([&] { gather(x, 2, idx); }, {"gather", "dim 2 is out of range"});
  check_error([&] { scatter_add(x, 0, idx, uniform({2, 2}, 17)); }, {"scatter_add", "src of shape (2, 2)", "shape of index (2, 3)"});
  check_error([&] { scatter_add(x, 0, idx, zeros({2, 3})); }, {"scatter_add", "dtype mismatch", "float64", "float32"});
  check_error([&] { index_select(x, 0, idx); }, {"index_select", "index must be 1-d", "(2, 3)"});
  check_error([&] { index_add(x, 0, zeros({2}, {DType::Int64}), uniform({3, 3}, 18)); },
              {"index_add", "src of shape (3, 3)", "must be (2, 3)"});
  check_error([&] { index_add(x, 1, zeros({2}, {DType::Int64}), zeros({2, 2})); }, {"index_add", "dtype mismatch"});
  check_error([&] { one_hot(idx, -1); }, {"one_hot", "num_classes must be non-negative"});
  check_error([&] { gather(x, 0, Tensor()); }, {"gather", "undefined"});
}

TEST_CASE("masked_select: the elements where the mask is true, row-major, with broadcasting and a gradient") {
  const Tensor x = from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor mask = from_vector<bool>({true, false, true, false, false, true}, {2, 3});
  CHECK(masked_select(x, mask).to_vector<double>() == std::vector<double>{1, 3, 6});
  // A (3,) mask broadcast over the rows; a (2, 1) mask over the columns.
  CHECK(masked_select(x, from_vector<bool>({false, true, true}, {3})).to_vector<double>() ==
        std::vector<double>{2, 3, 5, 6});
  CHECK(masked_select(x, from_vector<bool>({false, true}, {2, 1})).to_vector<double>() == std::vector<double>{4, 5, 6});
  // x broadcast against a larger mask: an element is picked once per true position.
  CHECK(masked_select(from_vector<double>({7, 8}, {2}), ones({2, 2}, {DType::Bool})).to_vector<double>() ==
        std::vector<double>{7, 8, 7, 8});
  CHECK(masked_select(x, zeros({2, 3}, {DType::Bool})).shape() == Shape{0});
  CHECK(masked_select(from_vector<int32_t>({4, 5}, {2}), from_vector<bool>({false, true}, {2})).to_vector<int32_t>() ==
        std::vector<int32_t>{5});
  check_gradients([mask](const std::vector<Tensor>& in) { return masked_select(in[0], mask); }, {uniform({2, 3}, 50)});
  check_gradients([](const std::vector<Tensor>& in) { return masked_select(in[0], ones({2, 2}, {DType::Bool})); },
                  {uniform({2}, 51)});
  check_error([&] { masked_select(x, zeros({2, 3})); }, {"masked_select", "mask must be bool", "float32", "float64", "(2, 3)"});
  check_error([&] { masked_select(x, zeros({4}, {DType::Bool})); }, {"masked_select", "(2, 3)", "(4,)", "cannot be broadcast"});
  check_error([&] { masked_select(Tensor(), mask); }, {"masked_select", "undefined"});
}
