#include <algorithm>
#include <limits>
#include <numeric>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// The reference: each row along `dim` ordered with std::stable_sort (or, for top-k, std::sort on
// inputs without ties), keeping the first k. Returns values and indices in the output's layout.
struct Reference {
  std::vector<double> values;
  std::vector<int64_t> indices;
};

Reference reference(const Tensor& x, int64_t dim, int64_t k, bool descending, bool stable) {
  const Shape& shape = x.shape();
  const std::vector<double> v = x.to_vector<double>();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= shape[d];
  const int64_t n = shape[dim];
  Reference ref{std::vector<double>(outer * k * inner), std::vector<int64_t>(outer * k * inner)};
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      auto at = [&](int64_t j) { return v[(o * n + j) * inner + i]; };
      auto cmp = [&](int64_t a, int64_t b) { return descending ? at(a) > at(b) : at(a) < at(b); };
      if (stable) std::stable_sort(order.begin(), order.end(), cmp);
      else std::sort(order.begin(), order.end(), cmp);
      for (int64_t j = 0; j < k; ++j) {
        ref.values[(o * k + j) * inner + i] = at(order[j]);
        ref.indices[(o * k + j) * inner + i] = order[j];
      }
    }
  return ref;
}

// Small integers as float64: many ties.
Tensor with_ties(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return to(randint(0, 4, shape, gen), DType::Float64);
}

void check_matches(const Sorted& got, const Reference& ref) {
  CHECK(got.indices.dtype() == DType::Int64);
  CHECK(got.values.to_vector<double>() == ref.values);
  CHECK(got.indices.to_vector<int64_t>() == ref.indices);
}

}  // namespace

TEST_CASE("sort is stable: equal keys keep their order, ascending and descending") {
  const Tensor x = from_vector<double>({3, 1, 2, 1, 3, 1}, {6});
  const auto [up, up_idx] = sort(x);
  CHECK(up.to_vector<double>() == std::vector<double>{1, 1, 1, 2, 3, 3});
  CHECK(up_idx.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 5, 2, 0, 4});
  const auto [down, down_idx] = sort(x, 0, Descending::Yes);
  CHECK(down.to_vector<double>() == std::vector<double>{3, 3, 2, 1, 1, 1});
  CHECK(down_idx.to_vector<int64_t>() == std::vector<int64_t>{0, 4, 2, 1, 3, 5});
  CHECK(argsort(x, -1, Descending::Yes).to_vector<int64_t>() == std::vector<int64_t>{0, 4, 2, 1, 3, 5});
}

TEST_CASE("sort and argsort of batched rows along every dim match std::stable_sort") {
  const Tensor x = with_ties({5, 6, 7}, 1);
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (Descending order : {Descending::No, Descending::Yes}) {
      const bool descending = order == Descending::Yes;
      INFO("dim " << dim << (descending ? " descending" : " ascending"));
      const Sorted s = sort(x, dim, order);
      CHECK(s.values.shape() == x.shape());
      check_matches(s, reference(x, dim, x.shape()[dim], descending, true));
      CHECK(argsort(x, dim, order).to_vector<int64_t>() == s.indices.to_vector<int64_t>());
      // values = gather(x, dim, indices)
      CHECK(gather(x, dim, s.indices).to_vector<double>() == s.values.to_vector<double>());
    }
  }
}

TEST_CASE("sort handles integers, float32, strided input and many rows in parallel") {
  Generator gen(2);
  const Tensor ints = randint(-50, 50, {40, 600}, gen, {DType::Int32});
  check_matches(sort(ints, 1), reference(ints, 1, 600, false, true));
  const Tensor floats = rand({600, 40}, gen);
  check_matches(sort(floats, 0, Descending::Yes), reference(floats, 0, 600, true, true));
  const Tensor strided = transpose(with_ties({8, 9}, 3), 0, 1);  // (9, 8), not contiguous
  check_matches(sort(strided, 1), reference(contiguous(strided), 1, 8, false, true));
  // empty rows and no rows
  CHECK(sort(zeros({3, 0}), 1).values.shape() == Shape{3, 0});
  CHECK(sort(zeros({0, 4}), 1).indices.shape() == Shape{0, 4});
}

TEST_CASE("NaN sorts above every number: last ascending, first descending") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor x = from_vector<double>({2, nan, -1, nan, 5}, {5});
  CHECK(argsort(x).to_vector<int64_t>() == std::vector<int64_t>{2, 0, 4, 1, 3});
  CHECK(argsort(x, 0, Descending::Yes).to_vector<int64_t>() == std::vector<int64_t>{1, 3, 4, 0, 2});
  CHECK(topk(x, 1).indices.to_vector<int64_t>() == std::vector<int64_t>{1});
}

TEST_CASE("topk matches a std::sort reference on inputs without ties, along any dim") {
  const Tensor x = uniform({6, 9, 5}, 4);  // continuous values: no ties
  for (int64_t dim = 0; dim < 3; ++dim) {
    for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{3}, x.shape()[dim]}) {
      INFO("dim " << dim << " k " << k);
      const Sorted largest = topk(x, k, dim);
      Shape shape = x.shape();
      shape[dim] = k;
      CHECK(largest.values.shape() == shape);
      check_matches(largest, reference(x, dim, k, true, false));
      check_matches(topk(x, k, dim, TopK::Smallest), reference(x, dim, k, false, false));
    }
    // top-1 agrees with argmax / argmin
    CHECK(topk(x, 1, dim).indices.to_vector<int64_t>() == argmax(x, dim, KeepDim::Yes).to_vector<int64_t>());
    CHECK(topk(x, 1, dim, TopK::Smallest).indices.to_vector<int64_t>() ==
          argmin(x, dim, KeepDim::Yes).to_vector<int64_t>());
  }
  // ties go to the lower index, as in the stable order
  const Tensor tied = from_vector<double>({1, 4, 2, 4, 4}, {5});
  CHECK(topk(tied, 2).indices.to_vector<int64_t>() == std::vector<int64_t>{1, 3});
  CHECK(topk(tied, 3, 0, TopK::Smallest).indices.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 1});
}

TEST_CASE("argmax and argmin against a naive reference on inputs without ties") {
  const Tensor x = uniform({7, 11}, 5);
  const std::vector<double> v = x.to_vector<double>();
  std::vector<int64_t> row_max(7), row_min(7);
  for (int64_t r = 0; r < 7; ++r) {
    const auto begin = v.begin() + r * 11;
    row_max[r] = std::max_element(begin, begin + 11) - begin;
    row_min[r] = std::min_element(begin, begin + 11) - begin;
  }
  CHECK(argmax(x, 1).to_vector<int64_t>() == row_max);
  CHECK(argmin(x, 1).to_vector<int64_t>() == row_min);
  CHECK(argsort(x, 1, Descending::Yes).to_vector<int64_t>()[11] == row_max[1]);
}

TEST_CASE("gradcheck: sort and topk values scatter dy back to the indices") {
  const GradcheckOptions opts{1e-6, 1e-7, 1e-5};
  const Tensor x = uniform({4, 5}, 6);
  for (int64_t dim : {0, 1}) {
    check_gradients([dim](const std::vector<Tensor>& in) { return sort(in[0], dim).values; }, {x}, opts);
    check_gradients([dim](const std::vector<Tensor>& in) {
      const Tensor v = sort(in[0], dim, Descending::Yes).values;
      return v * v;
    }, {x}, opts);
    check_gradients([dim](const std::vector<Tensor>& in) {
      const Tensor v = topk(in[0], 2, dim).values;
      return v * v;
    }, {x}, opts);
    check_gradients([dim](const std::vector<Tensor>& in) { return topk(in[0], 3, dim, TopK::Smallest).values; }, {x}, opts);
  }
  // elements outside the top-k get no gradient
  Tensor w = from_vector<double>({0.5, 3, -1, 2}, {4});
  w.set_requires_grad(true);
  sum(topk(w, 2).values).backward();
  check_close(w.grad(), from_vector<double>({0, 1, 0, 1}, {4}));
}

TEST_CASE("sort and topk refuse bad arguments") {
  const Tensor x = uniform({3, 5}, 7);
  check_error([&] { topk(x, 6, 1); }, {"topk", "k = 6", "[0, 5]", "dim 1", "(3, 5)"});
  check_error([&] { topk(x, 4, 0); }, {"topk", "k = 4", "[0, 3]"});
  check_error([&] { topk(x, -1); }, {"topk", "k = -1"});
  check_error([&] { sort(x, 2); }, {"sort", "dim 2 is out of range"});
  check_error([&] { argsort(x, -3); }, {"argsort", "dim -3"});
  check_error([] { sort(scalar(1.0)); }, {"sort", "0-d"});
  check_error([] { topk(zeros({3}, {DType::Bool}), 1); }, {"topk", "numeric", "bool"});
  check_error([] { sort(Tensor()); }, {"sort", "undefined"});
}
