// Segment ops on the GPU against the CPU: segment_sum / mean / max and segment_broadcast (forward and
// backward) over offsets with segments of length 0 and 1 (first, middle and last), at every parity
// size, with trailing dims, integer data, ties and NaN for the maxima, non-contiguous inputs and int32
// offsets; segment_offsets and cluster_layout of sorted and unsorted ids; bad ids refused with the
// CPU's message.
//
// Each output is folded by one thread over its rows in order, with the CPU's accumulator, so every
// comparison is exact.
#include <limits>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// Offsets of `rows` rows cut into segments of lengths 0, 1, 3, 0, 1, 7, 2, 33, ... (repeating), the
// last one cut short, with an empty segment before the first and after the last.
Tensor offsets_for(int64_t rows, DType dtype = DType::Int64) {
  static const int64_t lengths[] = {0, 1, 3, 0, 1, 7, 2, 33};
  std::vector<int64_t> off{0, 0};
  for (size_t k = 0; off.back() < rows; ++k) off.push_back(std::min(rows, off.back() + lengths[k % 8]));
  off.push_back(rows);
  return to(from_vector<int64_t>(off, {static_cast<int64_t>(off.size())}), dtype);
}

int64_t segments_in(const Tensor& offsets) { return offsets.numel() - 1; }

// Sorted ids of `rows` rows over `count` segments, with gaps (segments that do not occur).
Tensor sorted_ids(int64_t rows, int64_t count, uint64_t seed, DType dtype = DType::Int64) {
  if (rows == 0) return zeros({0}, {dtype});
  return to(sort(small_integers({rows}, seed, DType::Int64, 0, count)).values, dtype);
}

}  // namespace

TEST_CASE("segment_sum, segment_mean, segment_max: every size, empty and single-row segments, forward and backward") {
  uint64_t seed = 1;
  for (int64_t n : parity_sizes())
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO("rows " << n << " " << dtype);
      const Tensor offsets = offsets_for(n);
      const Tensor x = input({n, 3, 5}, ++seed, dtype);
      check_parity([](const std::vector<Tensor>& in) { return segment_sum(in[0], in[1]); }, {x, offsets}, kExact);
      check_parity([](const std::vector<Tensor>& in) { return segment_mean(in[0], in[1]); }, {x, offsets}, kExact);
      check_parity([](const std::vector<Tensor>& in) { return segment_max(in[0], in[1]); }, {x, offsets}, kExact);
      // 1-d rows (D = 1) and int32 offsets
      const Tensor v = input({n}, ++seed, dtype);
      check_parity([](const std::vector<Tensor>& in) { return segment_sum(in[0], in[1]); },
                   {v, offsets_for(n, DType::Int32)}, kExact);
      check_parity([](const std::vector<Tensor>& in) { return segment_max(in[0], in[1]); },
                   {v, offsets_for(n, DType::Int32)}, kExact);
    }
}

TEST_CASE("segment_broadcast: every size, forward and backward (its adjoint is segment_sum)") {
  uint64_t seed = 100;
  for (int64_t n : parity_sizes())
    for (DType dtype : {DType::Float32, DType::Float64}) {
      INFO("rows " << n << " " << dtype);
      const Tensor offsets = offsets_for(n);
      check_parity([](const std::vector<Tensor>& in) { return segment_broadcast(in[0], in[1]); },
                   {input({segments_in(offsets), 4, 3}, ++seed, dtype), offsets}, kExact);
    }
  // every dtype is copied
  const Tensor offsets = offsets_for(1000);
  for (DType dtype : {DType::Int32, DType::Int64, DType::Bool})
    check_values([](const std::vector<Tensor>& in) { return segment_broadcast(in[0], in[1]); },
                 {small_integers({segments_in(offsets), 3}, 5, dtype, 0, 2), offsets}, kExact);
}

TEST_CASE("segment ops: integers, ties and NaN in the maxima, views, long segments, no rows") {
  uint64_t seed = 200;
  const Tensor offsets = offsets_for(4097);
  for (DType dtype : {DType::Int32, DType::Int64}) {
    INFO(dtype);
    const Tensor x = small_integers({4097, 7}, ++seed, dtype, -1000, 1000);
    check_values([](const std::vector<Tensor>& in) { return segment_sum(in[0], in[1]); }, {x, offsets}, kExact);
    check_values([](const std::vector<Tensor>& in) { return segment_max(in[0], in[1]); }, {x, offsets}, kExact);
  }
  // ties: the gradient goes to the first maximal row; NaN wins and propagates
  const Tensor tied = small_integers({4097, 3}, ++seed, DType::Float64, 0, 3);
  check_parity([](const std::vector<Tensor>& in) { return segment_max(in[0], in[1]); }, {tied, offsets}, kExact);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor with_nan = from_vector<double>({1, nan, 2, 3, 5, nan, nan, 0, 4, 4, nan, 1}, {6, 2});
  check_parity([](const std::vector<Tensor>& in) { return segment_max(in[0], in[1]); },
               {with_nan, from_vector<int64_t>({0, 1, 1, 4, 6}, {5})}, kExact);
  // non-contiguous x and values: made contiguous by the op
  check_parity([](const std::vector<Tensor>& in) { return segment_sum(transpose(in[0], 0, 1), in[1]); },
               {input({5, 4097}, ++seed), offsets}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return segment_broadcast(transpose(in[0], 0, 1), in[1]); },
               {input({2, segments_in(offsets)}, ++seed), offsets}, kExact);
  // a few long segments (one thread folds each column of each)
  check_parity([](const std::vector<Tensor>& in) { return segment_mean(in[0], in[1]); },
               {input({100000, 2}, ++seed), from_vector<int64_t>({0, 1, 70000, 100000}, {4})}, kExact);
  // no rows: every segment is empty
  check_parity([](const std::vector<Tensor>& in) { return segment_sum(in[0], in[1]); },
               {input({0, 3}, ++seed), from_vector<int64_t>({0, 0, 0}, {3})}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return segment_max(in[0], in[1]); },
               {input({0, 3}, ++seed), from_vector<int64_t>({0, 0, 0}, {3})}, kExact);
  check_parity([](const std::vector<Tensor>& in) { return segment_broadcast(in[0], in[1]); },
               {input({2, 3}, ++seed), from_vector<int64_t>({0, 0, 0}, {3})}, kExact);
}

TEST_CASE("segment_offsets and cluster_layout: every size, gaps, int32 ids, more clusters than rows") {
  uint64_t seed = 300;
  for (int64_t n : parity_sizes())
    for (DType dtype : {DType::Int32, DType::Int64})
      for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{2000}}) {
        INFO("rows " << n << " " << dtype << " segments " << count);
        check_values([count](const std::vector<Tensor>& in) { return segment_offsets(in[0], count); },
                     {sorted_ids(n, count, ++seed, dtype)}, kExact);
        const Tensor ids = n == 0 ? zeros({0}, {dtype}) : small_integers({n}, ++seed, dtype, 0, count);
        check_values([count](const std::vector<Tensor>& in) { return cluster_layout(in[0], count).permutation; }, {ids},
                     kExact);
        check_values([count](const std::vector<Tensor>& in) { return cluster_layout(in[0], count).offsets; }, {ids},
                     kExact);
        check_values([count](const std::vector<Tensor>& in) { return cluster_layout(in[0], count).counts; }, {ids},
                     kExact);
      }
  // no clusters at all (and so no rows)
  check_values([](const std::vector<Tensor>& in) { return cluster_layout(in[0], 0).offsets; },
               {zeros({0}, {DType::Int64})}, kExact);
  check_values([](const std::vector<Tensor>& in) { return segment_offsets(in[0], 0); }, {zeros({0}, {DType::Int64})},
               kExact);
  // a stable layout of many equal ids, then the segment ops through it
  const Tensor ids = small_integers({4097}, ++seed, DType::Int64, 0, 3);
  check_parity([](const std::vector<Tensor>& in) {
    const ClusterLayout layout = cluster_layout(in[1], 5);
    return segment_mean(index_select(in[0], 0, layout.permutation), layout.offsets);
  }, {input({4097, 6}, ++seed), ids}, kExact);
}

TEST_CASE("segment ops refuse bad ids and offsets on the device with the CPU's messages") {
  const Tensor unsorted = to(from_vector<int64_t>({0, 0, 2, 1, 3}, {5}), dut());
  check_error([&] { segment_offsets(unsorted, 4); },
              {"segment_offsets", "sorted", "ids[3] = 1 after ids[2] = 2", "cluster_layout"});
  const Tensor outside = to(from_vector<int32_t>({0, 1, 4, 9}, {4}), dut());
  check_error([&] { segment_offsets(outside, 4); }, {"segment_offsets", "ids[2] = 4", "[0, 4)"});
  check_error([&] { cluster_layout(outside, 4); }, {"cluster_layout", "ids[2] = 4", "[0, 4) of 4 clusters"});
  check_error([&] { cluster_layout(to(from_vector<int64_t>({0, -2}, {2}), dut()), 4); }, {"cluster_layout", "ids[1] = -2"});
  const Tensor x = to(input({4, 2}, 1), dut());
  check_error([&] { segment_sum(x, to(from_vector<int64_t>({0, 3, 2, 4}, {4}), dut())); },
              {"segment_sum", "non-decreasing"});
  check_error([&] { segment_max(x, to(from_vector<int64_t>({0, 2, 5}, {3}), dut())); }, {"segment_max", "N = 4"});
  if (on_gpu()) check_error([&] { segment_sum(x, from_vector<int64_t>({0, 4}, {2})); }, {"segment_sum", "one device"});
}
