#include <algorithm>
#include <limits>
#include <numeric>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

enum class Fold { Sum, Mean, Max };

// The naive segment reduction of x (N, ...) over offsets: rows folded elementwise, 0 when empty.
std::vector<double> naive_segment(const Tensor& x, const std::vector<int64_t>& off, Fold fold) {
  const std::vector<double> v = x.to_vector<double>();
  const int64_t width = x.shape()[0] == 0 ? 0 : x.numel() / x.shape()[0];
  std::vector<double> y;
  for (size_t s = 0; s + 1 < off.size(); ++s)
    for (int64_t i = 0; i < width; ++i) {
      double acc = 0;
      for (int64_t n = off[s]; n < off[s + 1]; ++n) {
        const double e = v[n * width + i];
        acc = fold == Fold::Max ? (n == off[s] ? e : std::max(acc, e)) : acc + e;
      }
      if (fold == Fold::Mean && off[s + 1] > off[s]) acc /= static_cast<double>(off[s + 1] - off[s]);
      y.push_back(acc);
    }
  return y;
}

Tensor offsets_tensor(const std::vector<int64_t>& off) {
  return from_vector<int64_t>(off, {static_cast<int64_t>(off.size())});
}

void check_values(const Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  const std::vector<double> v = t.to_vector<double>();
  REQUIRE(v.size() == expected.size());
  for (size_t k = 0; k < v.size(); ++k) {
    INFO("element " << k << ": " << v[k] << " vs " << expected[k]);
    CHECK(std::abs(v[k] - expected[k]) <= tol + tol * std::abs(expected[k]));
  }
}

// Segments of lengths 0 (first, middle, last), 1 and several: N = 9, S = 7.
const std::vector<int64_t> kOffsets{0, 0, 1, 4, 4, 5, 9, 9};

}  // namespace

TEST_CASE("segment_sum, segment_mean and segment_max match naive loops, empty and single-row segments included") {
  const Tensor offsets = offsets_tensor(kOffsets);
  for (const Shape& shape : {Shape{9}, Shape{9, 3, 2}, Shape{9, 300}}) {  // 300 columns: several blocks
    INFO("x shape " << to_string(shape));
    const Tensor x = uniform(shape, 1);
    Shape out = shape;
    out[0] = 7;
    const Tensor s = segment_sum(x, offsets), m = segment_mean(x, offsets), mx = segment_max(x, offsets);
    CHECK(s.shape() == out);
    CHECK(m.shape() == out);
    CHECK(mx.shape() == out);
    check_values(s, naive_segment(x, kOffsets, Fold::Sum));
    check_values(m, naive_segment(x, kOffsets, Fold::Mean));
    check_values(mx, naive_segment(x, kOffsets, Fold::Max));
  }
  // int32 offsets are accepted too
  const Tensor x = uniform({9, 2}, 2);
  check_close(segment_sum(x, to(offsets_tensor(kOffsets), DType::Int32)), segment_sum(x, offsets_tensor(kOffsets)));
}

TEST_CASE("segment ops on large inputs run in parallel and match naive loops") {
  Generator gen(3);
  // 2000 rows into 50 segments of random lengths (some empty)
  const std::vector<int64_t> cuts = randint(0, 2001, {49}, gen).to_vector<int64_t>();
  std::vector<int64_t> off{0};
  std::vector<int64_t> sorted = cuts;
  std::sort(sorted.begin(), sorted.end());
  off.insert(off.end(), sorted.begin(), sorted.end());
  off.push_back(2000);
  const Tensor x = rand({2000, 40}, gen, {DType::Float64});
  check_values(segment_sum(x, offsets_tensor(off)), naive_segment(x, off, Fold::Sum), 1e-10);
  check_values(segment_max(x, offsets_tensor(off)), naive_segment(x, off, Fold::Max));
  const Tensor values = rand({50, 40}, gen, {DType::Float64});
  const Tensor y = segment_broadcast(values, offsets_tensor(off));
  const std::vector<double> yv = y.to_vector<double>(), vv = values.to_vector<double>();
  bool same = true;
  for (int64_t s = 0; s < 50; ++s)
    for (int64_t n = off[s]; n < off[s + 1]; ++n)
      for (int64_t i = 0; i < 40; ++i) same = same && yv[n * 40 + i] == vv[s * 40 + i];
  CHECK(same);
}

TEST_CASE("segment_broadcast copies each segment's row to its rows; the adjoint of segment_sum") {
  const Tensor offsets = offsets_tensor(kOffsets);
  const Tensor values = uniform({7, 2}, 4);
  const Tensor y = segment_broadcast(values, offsets);
  CHECK(y.shape() == Shape{9, 2});
  const std::vector<double> v = values.to_vector<double>(), yv = y.to_vector<double>();
  for (int64_t s = 0; s < 7; ++s)
    for (int64_t n = kOffsets[s]; n < kOffsets[s + 1]; ++n) {
      CHECK(yv[n * 2] == v[s * 2]);
      CHECK(yv[n * 2 + 1] == v[s * 2 + 1]);
    }
  // <segment_sum(x), w> = <x, segment_broadcast(w)>
  const Tensor x = uniform({9, 2}, 5), w = uniform({7, 2}, 6);
  CHECK(sum(segment_sum(x, offsets) * w).item<double>() ==
        doctest::Approx(sum(x * segment_broadcast(w, offsets)).item<double>()).epsilon(1e-12));
}

TEST_CASE("gradcheck: segment ops with empty and single-row segments") {
  const GradcheckOptions opts{1e-6, 1e-7, 1e-5};
  const Tensor offsets = offsets_tensor(kOffsets);
  const Tensor x = uniform({9, 3}, 7);  // continuous values: no ties for max
  auto squared = [](const Tensor& t) { return t * t; };
  check_gradients([&](const std::vector<Tensor>& in) { return squared(segment_sum(in[0], in[1])); }, {x, offsets}, opts);
  check_gradients([&](const std::vector<Tensor>& in) { return squared(segment_mean(in[0], in[1])); }, {x, offsets}, opts);
  check_gradients([&](const std::vector<Tensor>& in) { return squared(segment_max(in[0], in[1])); }, {x, offsets}, opts);
  check_gradients([&](const std::vector<Tensor>& in) { return squared(segment_broadcast(in[0], in[1])); },
                  {uniform({7, 3}, 8), offsets}, opts);
}

TEST_CASE("segment_max: the gradient goes to the first maximal row; empty segments give 0; NaN propagates") {
  Tensor x = from_vector<double>({1, 5, 3, 3, 2, 5}, {3, 2});
  // column 0: 1, 3, 2 -> max 3 at row 1; column 1: 5, 3, 5 -> max 5 at rows 0 and 2 (the first wins)
  x.set_requires_grad(true);
  const Tensor offsets = offsets_tensor({0, 3, 3});
  const Tensor y = segment_max(x, offsets);
  CHECK(y.to_vector<double>() == std::vector<double>{3, 5, 0, 0});
  sum(y).backward();
  check_close(x.grad(), from_vector<double>({0, 1, 1, 0, 0, 0}, {3, 2}));

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> with_nan = segment_max(from_vector<double>({1, nan, 7}, {3}), offsets).to_vector<double>();
  CHECK(std::isnan(with_nan[0]));
  CHECK(with_nan[1] == 0);
  // integers have no gradient but reduce the same way
  CHECK(segment_max(from_vector<int64_t>({-4, -2, -9}, {3}), offsets).to_vector<int64_t>() == std::vector<int64_t>{-2, 0});
  CHECK(segment_sum(from_vector<int32_t>({4, 2, 9}, {3}), offsets_tensor({0, 1, 3})).to_vector<int32_t>() ==
        std::vector<int32_t>{4, 11});
}

TEST_CASE("segment ops with no rows: every segment is empty") {
  const Tensor x = zeros({0, 3}, {DType::Float64});
  const Tensor offsets = offsets_tensor({0, 0, 0});
  CHECK(segment_sum(x, offsets).to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(segment_mean(x, offsets).to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(segment_max(x, offsets).to_vector<double>() == std::vector<double>(6, 0.0));
  CHECK(segment_broadcast(uniform({2, 3}, 9), offsets).shape() == Shape{0, 3});
  CHECK(segment_sum(x, offsets_tensor({0})).shape() == Shape{0, 3});
}

TEST_CASE("segment_offsets converts sorted ids, with gaps, to offsets") {
  const Tensor ids = from_vector<int64_t>({1, 1, 3, 3, 3, 4}, {6});
  CHECK(segment_offsets(ids, 6).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 2, 2, 5, 6, 6});
  CHECK(segment_offsets(to(ids, DType::Int32), 5).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 2, 2, 5, 6});
  CHECK(segment_offsets(zeros({0}, {DType::Int64}), 2).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("cluster_layout: a stable permutation by cluster, its offsets and counts") {
  const Tensor ids = from_vector<int64_t>({2, 0, 2, 3, 0, 2, 0}, {7});
  const ClusterLayout layout = cluster_layout(ids, 5);
  CHECK(layout.permutation.to_vector<int64_t>() == std::vector<int64_t>{1, 4, 6, 0, 2, 5, 3});
  CHECK(layout.offsets.to_vector<int64_t>() == std::vector<int64_t>{0, 3, 3, 6, 7, 7});
  CHECK(layout.counts.to_vector<int64_t>() == std::vector<int64_t>{3, 0, 3, 1, 0});
  // the same as a stable argsort, and as segment_offsets of the sorted ids
  CHECK(layout.permutation.to_vector<int64_t>() == argsort(ids).to_vector<int64_t>());
  CHECK(segment_offsets(index_select(ids, 0, layout.permutation), 5).to_vector<int64_t>() ==
        layout.offsets.to_vector<int64_t>());

  // centroids through the layout match the naive per-cluster means, and gradients flow through
  Generator gen(10);
  const Tensor many = randint(0, 6, {200}, gen, {DType::Int32});
  const ClusterLayout big = cluster_layout(many, 6);
  const Tensor q = uniform({200, 4}, 11);
  const Tensor centroids = segment_mean(index_select(q, 0, big.permutation), big.offsets);
  const std::vector<int64_t> cid = many.to_vector<int64_t>();
  const std::vector<double> qv = q.to_vector<double>();
  std::vector<double> expected(24, 0.0), count(6, 0.0);
  for (size_t n = 0; n < cid.size(); ++n) {
    count[cid[n]] += 1;
    for (int64_t e = 0; e < 4; ++e) expected[cid[n] * 4 + e] += qv[n * 4 + e];
  }
  for (int64_t c = 0; c < 6; ++c)
    for (int64_t e = 0; e < 4; ++e) expected[c * 4 + e] /= std::max(count[c], 1.0);
  check_values(centroids, expected, 1e-12);
  CHECK(big.counts.to_vector<int64_t>() == std::vector<int64_t>(count.begin(), count.end()));

  const Tensor small_ids = from_vector<int64_t>({1, 0, 1, 3, 1}, {5});
  const ClusterLayout small = cluster_layout(small_ids, 4);
  check_gradients([&](const std::vector<Tensor>& in) {
    // each query takes its cluster's centroid, back in the original order
    const Tensor c = segment_mean(index_select(in[0], 0, small.permutation), small.offsets);
    const Tensor sorted = segment_broadcast(c * c, small.offsets);
    return index_add(zeros({5, 2}, {DType::Float64}), 0, small.permutation, sorted);
  }, {uniform({5, 2}, 12)}, {1e-6, 1e-7, 1e-5});
}

TEST_CASE("segment ops refuse invalid offsets and ids") {
  const Tensor x = uniform({4, 2}, 13);
  check_error([&] { segment_sum(x, offsets_tensor({0, 3, 2, 4})); },
              {"segment_sum", "non-decreasing", "offsets[2] = 2", "offsets[1] = 3"});
  check_error([&] { segment_mean(x, offsets_tensor({0, 2, 3})); },
              {"segment_mean", "must end at the number of rows N = 4", "(4, 2)", "offsets[2] = 3"});
  check_error([&] { segment_max(x, offsets_tensor({0, 2, 5})); }, {"segment_max", "N = 4", "offsets[2] = 5"});
  check_error([&] { segment_sum(x, offsets_tensor({1, 4})); }, {"segment_sum", "start at 0", "offsets[0] = 1"});
  check_error([&] { segment_sum(x, zeros({3})); }, {"segment_sum", "int64", "float32", "(3,)"});
  check_error([&] { segment_sum(x, zeros({2, 2}, {DType::Int64})); }, {"segment_sum", "1-d", "(2, 2)"});
  check_error([&] { segment_sum(x, zeros({0}, {DType::Int64})); }, {"segment_sum", "S + 1 >= 1", "(0,)"});
  check_error([&] { segment_sum(scalar(1.0), offsets_tensor({0})); }, {"segment_sum", "0-d"});
  check_error([&] { segment_mean(zeros({4}, {DType::Int64}), offsets_tensor({0, 4})); }, {"segment_mean", "floating", "int64"});
  check_error([&] { segment_broadcast(uniform({3, 2}, 14), offsets_tensor({0, 1, 4})); },
              {"segment_broadcast", "values of shape (3, 2)", "2 segments"});
  check_error([&] { segment_broadcast(uniform({2, 2}, 14), offsets_tensor({0, 3, 1})); }, {"segment_broadcast", "non-decreasing"});

  check_error([] { segment_offsets(from_vector<int64_t>({0, 2, 1}, {3}), 3); },
              {"segment_offsets", "sorted", "ids[2] = 1", "ids[1] = 2"});
  check_error([] { segment_offsets(from_vector<int64_t>({0, 3}, {2}), 3); }, {"segment_offsets", "ids[1] = 3", "[0, 3)"});
  check_error([] { segment_offsets(from_vector<int64_t>({-1, 0}, {2}), 3); }, {"segment_offsets", "ids[0] = -1"});
  check_error([] { segment_offsets(zeros({2}), 3); }, {"segment_offsets", "int32 or int64", "float32"});
  const Tensor ids = from_vector<int32_t>({0, 4, 1}, {3});
  const std::vector<int32_t> before = ids.to_vector<int32_t>();
  check_error([&] { cluster_layout(ids, 4); }, {"cluster_layout", "ids[1] = 4", "[0, 4) of 4 clusters"});
  check_error([&] { cluster_layout(from_vector<int64_t>({0, -2}, {2}), 4); }, {"cluster_layout", "ids[1] = -2"});
  check_error([] { cluster_layout(zeros({2, 2}, {DType::Int64}), 4); }, {"cluster_layout", "1-d", "(2, 2)"});
  check_error([] { cluster_layout(zeros({2}, {DType::Int64}), -1); }, {"cluster_layout", "non-negative"});
  CHECK(ids.to_vector<int32_t>() == before);
}
