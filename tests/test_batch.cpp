#include "tests/testing.h"

#include <numeric>
#include <set>

#include "data/batch.h"

using namespace tapestry;
using namespace tapestry::testing;
using data::BatchingOptions;
using data::BatchList;
using data::Oversize;
using data::Shuffle;

namespace {

using Ids = std::vector<int64_t>;

// Lengths in [0, max_length] from a fixed seed.
Ids random_lengths(int64_t n, int64_t max_length, uint64_t seed) {
  Generator gen(seed);
  return randint(0, max_length + 1, {n}, gen).to_vector<int64_t>();
}

// Every example 0..n-1 appears exactly once in `batches`, none is empty, and each batch keeps to
// the budget.
void check_epoch(const BatchList& batches, const Ids& lengths, const BatchingOptions& options) {
  std::vector<int> seen(lengths.size(), 0);
  for (const Ids& batch : batches) {
    REQUIRE_FALSE(batch.empty());
    int64_t longest = 0;
    for (const int64_t i : batch) {
      REQUIRE(i >= 0);
      REQUIRE(i < static_cast<int64_t>(lengths.size()));
      ++seen[i];
      longest = std::max(longest, std::max<int64_t>(lengths[i], 1));
    }
    const int64_t rows = static_cast<int64_t>(batch.size());
    INFO("batch of " << rows << " rows, longest " << longest);
    CHECK(rows * longest <= options.max_tokens);
    if (options.max_batch > 0) CHECK(rows <= options.max_batch);
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    INFO("example " << i);
    CHECK(seen[i] == 1);
  }
}

}  // namespace

TEST_CASE("data: pad_sequences pads every row to the longest with the pad id") {
  const data::Batch batch = data::pad_sequences({{5, 6, 7}, {8}, {}}, -1);
  CHECK(batch.tokens.shape() == Shape{3, 3});
  CHECK(batch.tokens.dtype() == DType::Int64);
  CHECK(batch.tokens.to_vector<int64_t>() == Ids{5, 6, 7, 8, -1, -1, -1, -1, -1});
  CHECK(batch.lengths.shape() == Shape{3});
  CHECK(batch.lengths.to_vector<int64_t>() == Ids{3, 1, 0});
  CHECK(batch.indices == Ids{0, 1, 2});
  CHECK(batch.size() == 3);
  CHECK_FALSE(batch.targets.defined());
  CHECK_FALSE(batch.target_lengths.defined());

  const data::Batch empty_rows = data::pad_sequences({{}, {}});
  CHECK(empty_rows.tokens.shape() == Shape{2, 0});
  CHECK(empty_rows.lengths.to_vector<int64_t>() == Ids{0, 0});
}

TEST_CASE("data: make_batch gathers the selected examples and their targets") {
  const std::vector<Ids> sources = {{1, 2}, {3}, {4, 5, 6}};
  const std::vector<Ids> targets = {{7}, {8, 9, 10, 11}, {12, 13}};
  const data::Batch batch = data::make_batch(sources, targets, {2, 0}, 0, -100);
  CHECK(batch.indices == Ids{2, 0});
  CHECK(batch.tokens.shape() == Shape{2, 3});
  CHECK(batch.tokens.to_vector<int64_t>() == Ids{4, 5, 6, 1, 2, 0});
  CHECK(batch.lengths.to_vector<int64_t>() == Ids{3, 2});
  CHECK(batch.targets.shape() == Shape{2, 2});
  CHECK(batch.targets.to_vector<int64_t>() == Ids{12, 13, 7, -100});
  CHECK(batch.target_lengths.to_vector<int64_t>() == Ids{2, 1});

  const data::Batch repeated = data::make_batch(sources, {1, 1}, 9);
  CHECK(repeated.tokens.to_vector<int64_t>() == Ids{3, 3});
}

TEST_CASE("data: make_frame_batch pads frames with zeros to (B, N, F)") {
  const std::vector<std::vector<float>> frames = {{1, 2, 3, 4}, {5, 6}, {7, 8, 9, 10, 11, 12}};
  const data::FrameBatch batch = data::make_frame_batch(frames, 2, {1, 0});
  CHECK(batch.features.shape() == Shape{2, 2, 2});
  CHECK(batch.features.dtype() == DType::Float32);
  CHECK(batch.features.to_vector<float>() == std::vector<float>{5, 6, 0, 0, 1, 2, 3, 4});
  CHECK(batch.lengths.to_vector<int64_t>() == Ids{1, 2});
  CHECK(batch.indices == Ids{1, 0});
  CHECK_FALSE(batch.targets.defined());

  const data::FrameBatch labelled = data::make_frame_batch(frames, 2, {{1}, {2, 3}, {4, 5, 6}}, {2, 1}, 0);
  CHECK(labelled.features.shape() == Shape{2, 3, 2});
  CHECK(labelled.features.to_vector<float>() == std::vector<float>{7, 8, 9, 10, 11, 12, 5, 6, 0, 0, 0, 0});
  CHECK(labelled.targets.to_vector<int64_t>() == Ids{4, 5, 6, 2, 3, 0});
  CHECK(labelled.target_lengths.to_vector<int64_t>() == Ids{3, 2});
}

TEST_CASE("data: batch construction refuses bad arguments") {
  const std::vector<Ids> sources = {{1, 2}, {3}};
  check_error([&] { data::pad_sequences({}); }, {"pad_sequences", "no sequences"});
  check_error([&] { data::make_batch(sources, {}); }, {"make_batch", "indices is empty"});
  check_error([&] { data::make_batch(sources, {0, 2}); }, {"make_batch", "index 2 (row 1)", "2 examples"});
  check_error([&] { data::make_batch(sources, {-1}); }, {"make_batch", "index -1"});
  const std::vector<Ids> one_target = {{1}};
  check_error([&] { data::make_batch(sources, one_target, {0}); }, {"make_batch", "1 targets for 2 examples"});
  const std::vector<std::vector<float>> frames = {{1, 2, 3}, {4, 5}};
  check_error([&] { data::make_frame_batch(frames, 0, {0}); }, {"make_frame_batch", "features", "got 0"});
  check_error([&] { data::make_frame_batch(frames, 2, {1, 0}); },
              {"make_frame_batch", "example 0", "3 floats", "2 features"});
  check_error([&] { data::make_frame_batch(frames, 1, {5}); }, {"make_frame_batch", "index 5"});
  check_error([&] { data::make_frame_batch(frames, 1, one_target, {0}); },
              {"make_frame_batch", "1 targets for 2 examples"});
}

TEST_CASE("data: bucket_batches sorts by length and packs to the token budget") {
  // Sorted by length (stable): 1 (1), 5 (1), 3 (2), 2 (3), 4 (4), 0 (5).
  const Ids lengths = {5, 1, 3, 2, 4, 1};
  BatchingOptions options;
  options.max_tokens = 6;
  options.shuffle = Shuffle::No;
  CHECK(data::bucket_batches(lengths, options) == BatchList{{1, 5, 3}, {2}, {4}, {0}});

  options.max_batch = 2;
  CHECK(data::bucket_batches(lengths, options) == BatchList{{1, 5}, {3, 2}, {4}, {0}});

  // Windows of 3 in data-set order: {0, 1, 2} and {3, 4, 5}, each sorted on its own.
  options.max_batch = 0;
  options.window = 3;
  CHECK(data::bucket_batches(lengths, options) == BatchList{{1, 2}, {0}, {5, 3}, {4}});

  // Empty sequences count as length 1 for the budget.
  options.window = 0;
  options.max_tokens = 3;
  CHECK(data::bucket_batches({0, 0, 0, 0, 0}, options) == BatchList{{0, 1, 2}, {3, 4}});
}

TEST_CASE("data: an example over the token budget is refused, or batched alone when asked") {
  BatchingOptions options;
  options.max_tokens = 6;
  options.shuffle = Shuffle::No;
  check_error([&] { data::bucket_batches({2, 10, 3}, options); },
              {"bucket_batches", "example 1", "length 10", "max_tokens = 6", "Oversize::Alone"});
  options.oversize = Oversize::Alone;
  CHECK(data::bucket_batches({2, 10, 3, 7}, options) == BatchList{{0, 2}, {3}, {1}});
}

TEST_CASE("data: every example once per epoch, within the budget, for many settings") {
  const Ids lengths = random_lengths(1000, 40, 11);
  for (const int64_t max_tokens : {40, 64, 500}) {
    for (const int64_t max_batch : {0, 1, 7}) {
      for (const int64_t window : {0, 1, 50, 999, 5000}) {
        BatchingOptions options;
        options.max_tokens = max_tokens;
        options.max_batch = max_batch;
        options.window = window;
        for (int64_t epoch = 0; epoch < 2; ++epoch) {
          CAPTURE(max_tokens);
          CAPTURE(max_batch);
          CAPTURE(window);
          CAPTURE(epoch);
          check_epoch(data::bucket_batches(lengths, options, 5, epoch), lengths, options);
        }
      }
    }
  }
  // Sorting the whole data set makes batches of near-equal lengths: a budget of 500 wastes little.
  BatchingOptions options;
  options.max_tokens = 500;
  int64_t padded = 0, real = 0;
  for (const Ids& batch : data::bucket_batches(lengths, options, 5, 0)) {
    int64_t longest = 0;
    for (const int64_t i : batch) longest = std::max(longest, lengths[i]), real += lengths[i];
    padded += longest * static_cast<int64_t>(batch.size());
  }
  CHECK(padded < real * 11 / 10);
}

TEST_CASE("data: shuffle is the documented Fisher-Yates over Philox draws") {
  Ids values(50);
  std::iota(values.begin(), values.end(), 0);
  Ids expected = values;
  Generator gen = data::epoch_generator(42, 3);
  CHECK(gen.seed() == 42);
  CHECK(gen.offset() == (uint64_t(3) << 32));
  data::shuffle(values, gen);
  CHECK(gen.offset() == (uint64_t(3) << 32) + 49);
  uint64_t counter = uint64_t(3) << 32;
  for (size_t i = expected.size() - 1; i >= 1; --i) {
    std::swap(expected[i], expected[uniform_below(philox_block(counter++, 42), i + 1)]);
  }
  CHECK(values == expected);
  Ids sorted = values;
  std::sort(sorted.begin(), sorted.end());
  Ids identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  CHECK(sorted == identity);
  CHECK(values != identity);

  Ids one = {7};
  data::shuffle(one, gen);
  CHECK(one == Ids{7});
  check_error([] { data::epoch_generator(1, -1); }, {"epoch_generator", "-1"});
  check_error([] { data::epoch_generator(1, int64_t(1) << 32); }, {"epoch_generator", "2^32"});
}

TEST_CASE("data: the same seed gives the same batches; another epoch or seed gives others") {
  const Ids lengths = random_lengths(300, 30, 12);
  BatchingOptions options;
  options.max_tokens = 120;
  options.window = 100;
  const BatchList a = data::bucket_batches(lengths, options, 9, 4);
  CHECK(a == data::bucket_batches(lengths, options, 9, 4));
  CHECK(a != data::bucket_batches(lengths, options, 9, 5));
  CHECK(a != data::bucket_batches(lengths, options, 10, 4));

  // Two epochs group the examples differently, not only in another order.
  const BatchList b = data::bucket_batches(lengths, options, 9, 5);
  CHECK(std::set<Ids>(a.begin(), a.end()) != std::set<Ids>(b.begin(), b.end()));

  // Without shuffling, seed and epoch do not matter.
  options.shuffle = Shuffle::No;
  CHECK(data::bucket_batches(lengths, options, 1, 0) == data::bucket_batches(lengths, options, 2, 7));
}

TEST_CASE("data: bucket_batches refuses bad arguments") {
  BatchingOptions options;
  check_error([&] { data::bucket_batches({}, options); }, {"bucket_batches", "empty"});
  check_error([&] { data::bucket_batches({3, -2}, options); }, {"bucket_batches", "example 1", "negative length -2"});
  check_error([&] { data::bucket_batches({3}, options, 0, -1); }, {"bucket_batches", "epoch", "-1"});
  options.max_tokens = 0;
  check_error([&] { data::bucket_batches({3}, options); }, {"bucket_batches", "max_tokens", "got 0"});
  options.max_tokens = 10;
  options.max_batch = -1;
  check_error([&] { data::bucket_batches({3}, options); }, {"bucket_batches", "max_batch", "got -1"});
  options.max_batch = 0;
  options.window = -4;
  check_error([&] { data::bucket_batches({3}, options); }, {"bucket_batches", "window", "got -4"});
}

TEST_CASE("data: shard gives each rank an equal, disjoint, strided share") {
  const BatchList batches = {{0}, {1}, {2}, {3}, {4}, {5}, {6}};
  CHECK(data::shard(batches, 0, 3) == BatchList{{0}, {3}});
  CHECK(data::shard(batches, 1, 3) == BatchList{{1}, {4}});
  CHECK(data::shard(batches, 2, 3) == BatchList{{2}, {5}});  // batch 6, the remainder, is skipped
  CHECK(data::shard(batches, 0, 1) == batches);

  // On a real epoch: shares are disjoint, equal in size, and cover all but the remainder.
  const Ids lengths = random_lengths(500, 25, 13);
  BatchingOptions options;
  options.max_tokens = 100;
  const BatchList epoch = data::bucket_batches(lengths, options, 3, 0);
  for (const int64_t world : {2, 4, 5}) {
    std::multiset<int64_t> covered;
    for (int64_t rank = 0; rank < world; ++rank) {
      const BatchList share = data::shard(epoch, rank, world);
      CHECK(static_cast<int64_t>(share.size()) == static_cast<int64_t>(epoch.size()) / world);
      for (const Ids& batch : share) covered.insert(batch.begin(), batch.end());
    }
    std::multiset<int64_t> expected;
    for (size_t b = 0; b < epoch.size() / world * world; ++b) expected.insert(epoch[b].begin(), epoch[b].end());
    CHECK(covered == expected);  // equal multisets: no example twice, none of the kept batches lost
  }

  check_error([&] { data::shard(batches, 0, 0); }, {"shard", "world_size", "got 0"});
  check_error([&] { data::shard(batches, 3, 3); }, {"shard", "rank", "[0, 3)", "got 3"});
  check_error([&] { data::shard(batches, -1, 3); }, {"shard", "rank", "got -1"});
  check_error([&] { data::shard(batches, 0, 8); }, {"shard", "7 batches", "8 ranks"});
}

TEST_CASE("data: BatchSampler walks the epochs' shares and crosses epochs by itself") {
  const Ids lengths = random_lengths(200, 20, 14);
  BatchingOptions options;
  options.max_tokens = 80;
  data::BatchSampler sampler(lengths, options, 21, 1, 2);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const BatchList expected = data::shard(data::bucket_batches(lengths, options, 21, epoch), 1, 2);
    for (size_t b = 0; b < expected.size(); ++b) {
      CHECK(sampler.next() == expected[b]);
      CHECK(sampler.epoch() == epoch);
      CHECK(sampler.position() == static_cast<int64_t>(b) + 1);
    }
    CHECK(sampler.batches() == expected);
    CHECK(sampler.batches_in_epoch() == static_cast<int64_t>(expected.size()));
  }
}

TEST_CASE("data: a BatchSampler restored from its state continues with the same batches") {
  const Ids lengths = random_lengths(150, 30, 15);
  BatchingOptions options;
  options.max_tokens = 90;
  options.window = 40;
  data::BatchSampler original(lengths, options, 8);
  const int64_t per_epoch = original.batches_in_epoch();
  // Stop mid-epoch, at an epoch's end, at the very start, and in the second epoch.
  for (const int64_t steps : {per_epoch / 2, per_epoch, int64_t(0), per_epoch + 3}) {
    data::BatchSampler run(lengths, options, 8);
    for (int64_t s = 0; s < steps; ++s) run.next();
    const data::SamplerState saved = run.state();

    data::BatchSampler resumed(lengths, options, 8);
    resumed.restore(saved);
    CHECK(resumed.epoch() == saved.epoch);
    CHECK(resumed.position() == saved.position);
    for (int64_t s = 0; s < 2 * per_epoch; ++s) {
      CAPTURE(steps);
      CAPTURE(s);
      CHECK(resumed.next() == run.next());
    }
  }

  data::BatchSampler sampler(lengths, options, 8);
  check_error([&] { sampler.restore({-1, 0}); }, {"BatchSampler::restore", "epoch", "-1"});
  check_error([&] { sampler.restore({2, per_epoch + 1000}); }, {"BatchSampler::restore", "position", "epoch 2"});
  check_error([&] { sampler.restore({0, -1}); }, {"BatchSampler::restore", "position -1"});
  CHECK(sampler.state().epoch == 0);  // a refused restore changes nothing
  CHECK(sampler.state().position == 0);
  check_error([&] { data::BatchSampler(lengths, options, 8, 2, 2); }, {"shard", "rank"});
  check_error([&] { data::BatchSampler({1, -1}, options); }, {"bucket_batches", "negative length"});
}
