#include "data/batch.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "core/creation.h"

namespace tapestry::data {

namespace {

// An epoch draws fewer than 2^32 counters when it has fewer than 2^31 examples (n − 1 swaps for
// the examples, fewer than n for the batches).
constexpr int64_t kMaxExamples = int64_t(1) << 31;
constexpr int64_t kMaxEpoch = int64_t(1) << 32;

struct Padded {
  Tensor values;   // (B, N) or (B, N, F)
  Tensor lengths;  // (B) int64
};

// Rows `indices` of `rows`, each holding n_i steps of `step` shape (row-major), copied into one
// (B, N, *step) tensor (N the longest n_i) filled with `pad` after each row's end. The caller has
// checked the indices and that each row holds whole steps.
template <class T>
Padded pad_rows(const std::vector<std::vector<T>>& rows, const std::vector<int64_t>& indices, const Shape& step,
                T pad) {
  const int64_t B = static_cast<int64_t>(indices.size()), width = numel(step);
  std::vector<int64_t> lengths(B);
  int64_t N = 0;
  for (int64_t b = 0; b < B; ++b) {
    lengths[b] = static_cast<int64_t>(rows[indices[b]].size()) / width;
    N = std::max(N, lengths[b]);
  }
  std::vector<T> values(B * N * width, pad);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<T>& row = rows[indices[b]];
    std::copy(row.begin(), row.end(), values.begin() + b * N * width);
  }
  Shape shape{B, N};
  shape.insert(shape.end(), step.begin(), step.end());
  return {from_vector(values, shape), from_vector(lengths, {B})};
}

// Every index lies in [0, size).
void check_indices(const char* op, const std::vector<int64_t>& indices, size_t size) {
  TP_CHECK(!indices.empty(), op, "no examples to batch (indices is empty)");
  for (size_t b = 0; b < indices.size(); ++b) {
    TP_CHECK(indices[b] >= 0 && indices[b] < static_cast<int64_t>(size), op, "index ", indices[b], " (row ", b,
             ") is outside the data set of ", size, " examples");
  }
}

void check_targets(const char* op, size_t targets, size_t examples) {
  TP_CHECK(targets == examples, op, "got ", targets, " targets for ", examples, " examples");
}

// The padded token cost of a length: empty sequences still take a row.
int64_t cost(int64_t length) { return std::max<int64_t>(length, 1); }

}  // namespace

Batch pad_sequences(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id) {
  TP_CHECK(!sequences.empty(), "pad_sequences", "no sequences to pad");
  std::vector<int64_t> indices(sequences.size());
  std::iota(indices.begin(), indices.end(), 0);
  return make_batch(sequences, indices, pad_id);
}

Batch make_batch(const std::vector<std::vector<int64_t>>& sequences, const std::vector<int64_t>& indices,
                 int64_t pad_id) {
  check_indices("make_batch", indices, sequences.size());
  Padded tokens = pad_rows(sequences, indices, {}, pad_id);
  return {tokens.values, tokens.lengths, Tensor(), Tensor(), indices};
}

Batch make_batch(const std::vector<std::vector<int64_t>>& sequences,
                 const std::vector<std::vector<int64_t>>& targets, const std::vector<int64_t>& indices,
                 int64_t pad_id, int64_t target_pad_id) {
  check_targets("make_batch", targets.size(), sequences.size());
  Batch batch = make_batch(sequences, indices, pad_id);
  Padded padded = pad_rows(targets, indices, {}, target_pad_id);
  batch.targets = padded.values;
  batch.target_lengths = padded.lengths;
  return batch;
}

FrameBatch make_frame_batch(const std::vector<std::vector<float>>& frames, int64_t features,
                            const std::vector<int64_t>& indices) {
  const char* op = "make_frame_batch";
  TP_CHECK(features >= 1, op, "features must be at least 1, got ", features);
  check_indices(op, indices, frames.size());
  for (const int64_t i : indices) {
    TP_CHECK(static_cast<int64_t>(frames[i].size()) % features == 0, op, "example ", i, " holds ",
             frames[i].size(), " floats, not a whole number of frames of ", features, " features");
  }
  Padded padded = pad_rows(frames, indices, {features}, 0.0f);
  return {padded.values, padded.lengths, Tensor(), Tensor(), indices};
}

FrameBatch make_frame_batch(const std::vector<std::vector<float>>& frames, int64_t features,
                            const std::vector<std::vector<int64_t>>& targets, const std::vector<int64_t>& indices,
                            int64_t target_pad_id) {
  check_targets("make_frame_batch", targets.size(), frames.size());
  FrameBatch batch = make_frame_batch(frames, features, indices);
  Padded padded = pad_rows(targets, indices, {}, target_pad_id);
  batch.targets = padded.values;
  batch.target_lengths = padded.lengths;
  return batch;
}

Generator epoch_generator(uint64_t seed, int64_t epoch) {
  TP_CHECK(epoch >= 0 && epoch < kMaxEpoch, "epoch_generator", "the epoch must be in [0, 2^32), got ", epoch);
  Generator gen(seed);
  gen.set_state(seed, static_cast<uint64_t>(epoch) << 32);
  return gen;
}

void shuffle(std::vector<int64_t>& values, Generator& gen) {
  for (size_t i = values.size(); i-- > 1;) {
    const uint64_t j = uniform_below(philox_block(gen.reserve(1), gen.seed()), i + 1);
    std::swap(values[i], values[j]);
  }
}

BatchList bucket_batches(const std::vector<int64_t>& lengths, const BatchingOptions& options, uint64_t seed,
                         int64_t epoch) {
  const char* op = "bucket_batches";
  const int64_t n = static_cast<int64_t>(lengths.size());
  TP_CHECK(n >= 1, op, "the data set is empty");
  TP_CHECK(n < kMaxExamples, op, "at most 2^31 - 1 examples, got ", n);
  TP_CHECK(options.max_tokens >= 1, op, "max_tokens must be at least 1, got ", options.max_tokens);
  TP_CHECK(options.max_batch >= 0, op, "max_batch must be at least 0 (0: no limit), got ", options.max_batch);
  TP_CHECK(options.window >= 0, op, "window must be at least 0 (0: the whole data set), got ", options.window);
  TP_CHECK(epoch >= 0 && epoch < kMaxEpoch, op, "the epoch must be in [0, 2^32), got ", epoch);
  for (int64_t i = 0; i < n; ++i) {
    TP_CHECK(lengths[i] >= 0, op, "example ", i, " has a negative length ", lengths[i]);
    TP_CHECK(options.oversize == Oversize::Alone || cost(lengths[i]) <= options.max_tokens, op, "example ", i,
             " has length ", lengths[i], ", over the token budget max_tokens = ", options.max_tokens,
             " (raise the budget, filter the example out, or batch it alone with Oversize::Alone)");
  }

  Generator gen = epoch_generator(seed, epoch);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (options.shuffle == Shuffle::Yes) shuffle(order, gen);

  const int64_t window = options.window == 0 ? n : std::min(options.window, n);
  BatchList batches;
  for (int64_t start = 0; start < n; start += window) {
    const auto first = order.begin() + start, last = order.begin() + std::min(n, start + window);
    std::stable_sort(first, last, [&](int64_t a, int64_t b) { return lengths[a] < lengths[b]; });
    std::vector<int64_t> current;
    int64_t longest = 0;  // the largest cost in `current`
    for (auto it = first; it != last; ++it) {
      const int64_t widest = std::max(longest, cost(lengths[*it]));
      const int64_t rows = static_cast<int64_t>(current.size()) + 1;
      // rows × widest ≤ max_tokens, written so that it cannot overflow.
      const bool fits = widest <= options.max_tokens / rows && (options.max_batch == 0 || rows <= options.max_batch);
      if (!current.empty() && !fits) {
        batches.push_back(std::move(current));
        current.clear();
      }
      longest = current.empty() ? cost(lengths[*it]) : widest;
      current.push_back(*it);
    }
    batches.push_back(std::move(current));
  }

  if (options.shuffle == Shuffle::No) return batches;
  std::vector<int64_t> permutation(batches.size());
  std::iota(permutation.begin(), permutation.end(), 0);
  shuffle(permutation, gen);
  BatchList shuffled;
  shuffled.reserve(batches.size());
  for (const int64_t p : permutation) shuffled.push_back(std::move(batches[p]));
  return shuffled;
}

BatchList shard(const BatchList& batches, int64_t rank, int64_t world_size) {
  const char* op = "shard";
  TP_CHECK(world_size >= 1, op, "world_size must be at least 1, got ", world_size);
  TP_CHECK(rank >= 0 && rank < world_size, op, "rank must be in [0, ", world_size, "), got ", rank);
  const int64_t n = static_cast<int64_t>(batches.size());
  TP_CHECK(n >= world_size, op, n, " batches cannot give each of ", world_size, " ranks one");
  BatchList share;
  share.reserve(n / world_size);
  for (int64_t step = 0; step < n / world_size; ++step) share.push_back(batches[step * world_size + rank]);
  return share;
}

BatchSampler::BatchSampler(std::vector<int64_t> lengths, BatchingOptions options, uint64_t seed, int64_t rank,
                           int64_t world_size)
    : lengths_(std::move(lengths)), options_(options), seed_(seed), rank_(rank), world_size_(world_size) {
  begin_epoch(0);
}

void BatchSampler::begin_epoch(int64_t epoch) {
  batches_ = shard(bucket_batches(lengths_, options_, seed_, epoch), rank_, world_size_);
  state_ = {epoch, 0};
}

std::vector<int64_t> BatchSampler::next() {
  if (state_.position == batches_in_epoch()) begin_epoch(state_.epoch + 1);
  return batches_[state_.position++];
}

void BatchSampler::restore(const SamplerState& state) {
  const char* op = "BatchSampler::restore";
  TP_CHECK(state.epoch >= 0, op, "the epoch must be at least 0, got ", state.epoch);
  BatchList batches = shard(bucket_batches(lengths_, options_, seed_, state.epoch), rank_, world_size_);
  TP_CHECK(state.position >= 0 && state.position <= static_cast<int64_t>(batches.size()), op, "position ",
           state.position, " is outside [0, ", batches.size(), "], the batches of epoch ", state.epoch);
  batches_ = std::move(batches);
  state_ = state;
}

}  // namespace tapestry::data
