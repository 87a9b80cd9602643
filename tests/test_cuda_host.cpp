// The host-side logic of the CUDA kernels, checked on the CPU (CI has no GPU): the strided indexer
// that every map kernel addresses its operands with (ops/cuda/strided.h), and the reducers of the
// reduction kernels (ops/cuda/reducers.h, clip_grad_norm's sum of squares included) under every way
// a kernel may split a row among threads and chunks, against the CPU ops, ties, infinities and NaN
// included.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/cuda.h"
#include "ops/cuda/reducers.h"
#include "ops/cuda/strided.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Offsets of every element of t (row-major over its shape), walked index by index.
std::vector<int64_t> naive_offsets(const Tensor& t) {
  std::vector<int64_t> out;
  const int64_t n = t.numel(), ndim = t.dim();
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, offset = 0;
    for (int64_t d = ndim - 1; d >= 0; --d) {
      offset += rest % t.shape()[d] * t.strides()[d];
      rest /= t.shape()[d];
    }
    out.push_back(offset);
  }
  return out;
}

// The indexer's offsets for out (contiguous, of x's shape) and x.
void check_indexer(const Tensor& x, int expected_dims) {
  INFO("shape " << to_string(x.shape()) << " strides " << to_string(x.strides()));
  const Strides out_strides = contiguous_strides(x.shape());
  const cuda::StridedIndexer<2> ix = cuda::make_indexer<2>("test", x.shape(), {out_strides, x.strides()});
  CHECK(ix.ndim == expected_dims);
  const std::vector<int64_t> expected = naive_offsets(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t offset[2];
    ix.offsets(i, offset);
    REQUIRE(offset[0] == i);
    REQUIRE(offset[1] == expected[i]);
  }
}

}  // namespace

TEST_CASE("strided indexer: merged dims, views, broadcasts") {
  const Tensor x = arange(2 * 3 * 4 * 5, {DType::Float32});
  const Tensor cube = reshape(x, {2, 3, 4, 5});
  check_indexer(cube, 1);                                    // contiguous: one dim
  check_indexer(reshape(x, {1, 120, 1}), 1);                 // size-1 dims dropped
  check_indexer(transpose(cube, 1, 2), 4);                   // no neighbours walk together
  check_indexer(permute(cube, {0, 3, 1, 2}), 3);             // (3, 4) stay together
  check_indexer(slice(cube, 3, 0, 5, 2), 2);                 // a step in the last dim
  check_indexer(slice(cube, 1, 1, 3), 2);                    // rows cut: (2) and (2·4·5)
  check_indexer(select(cube, 2, 3), 2);
  check_indexer(expand(reshape(x, {1, 120}), {3, 120}), 2);  // a broadcast dim (stride 0)
  check_indexer(expand(scalar(1.0), {4, 5}), 1);             // stride 0 throughout: one dim
  check_indexer(scalar(2.0), 0);                             // 0-d
}

TEST_CASE("strided indexer: many dims merge, unmergeable ones beyond the limit are refused") {
  Shape shape(20, 2);
  const Tensor many = reshape(arange(1 << 20, {DType::Float32}), shape);
  check_indexer(many, 1);
  std::vector<int64_t> reversed(20);
  for (int64_t d = 0; d < 20; ++d) reversed[d] = 19 - d;
  const Tensor scrambled = permute(many, reversed);
  const Strides out = contiguous_strides(scrambled.shape());
  check_error([&] { cuda::make_indexer<2>("add", scrambled.shape(), {out, scrambled.strides()}); },
              {"add", "at most 12 dims", "contiguous"});
}

namespace {

// A row reduced as the kernels do it: `threads` threads per block (a power of two), chunks of
// `chunk` elements (one block each, then a block over the chunks' accumulators).
template <class R, class T>
typename R::Out emulate(const R& r, const std::vector<T>& row, int threads, int64_t chunk) {
  using Acc = typename R::Acc;
  const int64_t n = static_cast<int64_t>(row.size());
  auto block = [&](auto&& item, int64_t begin, int64_t end, Acc first) {
    std::vector<Acc> acc(static_cast<size_t>(threads), r.start(first));
    for (int t = 0; t < threads; ++t)
      for (int64_t i = begin + t; i < end; i += threads) acc[t] = r.combine(acc[t], item(i));
    for (int s = threads / 2; s > 0; s /= 2)
      for (int t = 0; t < s; ++t) acc[t] = r.combine(acc[t], acc[t + s]);
    return acc[0];
  };
  auto element = [&](int64_t i) { return r.load(row[i], i); };
  const int64_t chunks = (n + chunk - 1) / chunk;
  if (chunks == 1) return r.finish(block(element, 0, n, element(0)));
  std::vector<Acc> partial;
  for (int64_t c = 0; c < chunks; ++c) partial.push_back(block(element, c * chunk, std::min(n, (c + 1) * chunk), element(0)));
  auto partial_item = [&](int64_t i) { return partial[i]; };
  return r.finish(block(partial_item, 0, chunks, partial[0]));
}

bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

template <class T>
void check_reducers(const std::vector<T>& row) {
  const Tensor x = from_vector<T>(row, {static_cast<int64_t>(row.size())});
  const double max_cpu = tapestry::max(x).item<double>(), min_cpu = tapestry::min(x).item<double>();
  const int64_t argmax_cpu = argmax(x, 0).item<int64_t>(), argmin_cpu = argmin(x, 0).item<int64_t>();
  const double sum_cpu = sum(x).item<double>();
  double squares = 0;  // clip_grad_norm's Σ x² in double, in index order
  for (T v : row) squares += static_cast<double>(v) * static_cast<double>(v);
  for (int threads : {1, 2, 32, 256})
    for (int64_t chunk : {int64_t{1}, int64_t{3}, int64_t{7}, static_cast<int64_t>(row.size())}) {
      INFO("threads " << threads << " chunk " << chunk << " length " << row.size());
      CHECK(same(emulate(cuda::MaxReducer<T>{}, row, threads, chunk), max_cpu));
      CHECK(same(emulate(cuda::MinReducer<T>{}, row, threads, chunk), min_cpu));
      CHECK(emulate(cuda::ArgMaxReducer<T>{}, row, threads, chunk) == argmax_cpu);
      CHECK(emulate(cuda::ArgMinReducer<T>{}, row, threads, chunk) == argmin_cpu);
      const double s = emulate(cuda::SumReducer<T>{}, row, threads, chunk);
      CHECK((same(s, sum_cpu) || std::abs(s - sum_cpu) <= 1e-12 * (1 + std::abs(sum_cpu))));
      const double q = emulate(cuda::SumOfSquaresReducer<T>{}, row, threads, chunk);
      CHECK((same(q, squares) || std::abs(q - squares) <= 1e-12 * (1 + squares)));
    }
}

}  // namespace

TEST_CASE("reducers: any split among threads and chunks gives the CPU's result") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<std::vector<double>> rows{
      {5.0},
      {1, 3, 3, 2, 3, 0, -1, 3},                    // ties: the first index wins
      {nan, 1, 2, 3},                               // NaN first: max and min are NaN, index 0
      {1, nan, 7, 2, nan, 7, -4},                   // NaN elsewhere: max and min NaN, index 1 (the first)
      {nan, nan, nan},
      {-inf, -inf, 2, inf, inf, -inf},
      {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
  };
  for (const auto& row : rows) {
    check_reducers(row);
    std::vector<float> as_float(row.begin(), row.end());
    check_reducers(as_float);
  }
  Generator gen(3);
  check_reducers(rand({1000}, gen, {DType::Float64}).to_vector<double>());
  check_reducers(randint(-5, 5, {777}, gen, {DType::Int64}).to_vector<int64_t>());
  check_reducers(randint(-5, 5, {300}, gen, {DType::Int32}).to_vector<int32_t>());
}

TEST_CASE("the public CUDA controls say why they cannot work without a GPU") {
  if (cuda::is_available()) {
    MESSAGE("a GPU is present: tests/cuda/ covers these");
    return;
  }
  const std::string why = cuda::unavailable_reason();
  CHECK(!why.empty());
  check_error([] { cuda::memory_stats(); }, {"cuda:0", why});
  check_error([] { cuda::empty_cache(); }, {"cuda:0"});
  check_error([] { cuda::reset_peak_memory(); }, {"cuda:0"});
  check_error([] { cuda::synchronize(); }, {"cuda:0"});
  check_error([] { cuda::set_float32_matmul(cuda::Float32Matmul::TF32); }, {"cuda:0"});
  check_error([] { cuda::float32_matmul(); }, {"cuda:0"});
}
