/// @file
/// Batches of variable-length sequences: padding, length bucketing under a token budget,
/// reproducible shuffling, sharding across data-parallel ranks, and a resumable epoch sampler.
///
/// Shape letters: B examples in a batch, N the longest input in it, T the longest target, F features
/// per frame.
///
/// ---- The batching contract ----
///
/// A data set is seen through one length per example (`lengths[i]`, in tokens or frames: the cost
/// that padding multiplies; for seq2seq pass max(source, target) length, or whichever side dominates
/// memory). Each epoch, bucket_batches turns the lengths into batches of example indices:
///
///   1. order: the indices 0..n-1, shuffled (Shuffle::Yes) by the epoch's generator;
///   2. buckets: that order is cut into windows of `window` examples (0: one window holding all),
///      and each window is sorted by length, stably, so equal lengths keep their shuffled order;
///   3. packing: walking the sorted windows, examples join the current batch while its padded size,
///      rows × max(1, longest length), stays ≤ max_tokens and its rows stay ≤ max_batch (when set);
///      a batch never spans two windows;
///   4. batch order: the batches are shuffled (Shuffle::Yes) by the same generator.
///
/// Every example appears in exactly one batch per epoch, and no batch exceeds the budget, except
/// that an example longer than max_tokens is refused with an Error (Oversize::Refuse, the default)
/// or becomes a batch of its own, the only batches over the budget (Oversize::Alone). A length of 0
/// counts as 1 for the budget.
///
/// Randomness is reproducible on every machine: epoch e of seed s draws from Generator(s) at offset
/// e · 2^32 (epoch_generator), and each shuffle is the Fisher–Yates of `shuffle` below, one Philox
/// block per swap. Nothing uses std::shuffle or an implementation-defined distribution.
///
/// shard then gives rank r of W the batches r, r + W, r + 2W, ... of the first W · ⌊n / W⌋: every
/// rank steps the same number of times, the shares are disjoint, and the n mod W batches left over
/// (different ones each epoch when shuffling) are skipped that epoch. With windows, the number of
/// batches may differ from epoch to epoch, never from rank to rank: every rank computes the same
/// list from the same seed.
///
/// BatchSampler ties these together over epochs; its state is two integers (epoch, position) that a
/// checkpoint stores and a resumed run restores to continue with the same batches.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace tapestry::data {

/// A batch of token sequences (on the CPU; move it to a device with the ops).
struct Batch {
  Tensor tokens;          ///< (B, N) int64, each row padded with the pad id after its length
  Tensor lengths;         ///< (B) int64
  Tensor targets;         ///< (B, T) int64, padded with the target pad id; undefined without targets
  Tensor target_lengths;  ///< (B) int64; undefined without targets
  std::vector<int64_t> indices;  ///< (B) the data-set index of each row

  /// B, the number of rows.
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

/// A batch of sequences of F-dimensional frames (speech features), on the CPU.
struct FrameBatch {
  Tensor features;        ///< (B, N, F) float32, zero after each row's length
  Tensor lengths;         ///< (B) int64, in frames
  Tensor targets;         ///< (B, T) int64, padded with the target pad id; undefined without targets
  Tensor target_lengths;  ///< (B) int64; undefined without targets
  std::vector<int64_t> indices;  ///< (B) the data-set index of each row

  /// B, the number of rows.
  int64_t size() const { return static_cast<int64_t>(indices.size()); }
};

/// All of `sequences`, in order, as one batch (indices 0..B-1). Throws Error when there are none.
Batch pad_sequences(const std::vector<std::vector<int64_t>>& sequences, int64_t pad_id = 0);

/// The examples `indices` of a data set (rows in that order; repeats allowed), padded. Throws Error
/// for an empty `indices`, an index outside the data set, or (with targets) a target list whose
/// size differs from the sequences'.
Batch make_batch(const std::vector<std::vector<int64_t>>& sequences, const std::vector<int64_t>& indices,
                 int64_t pad_id = 0);
/// As above, with each example's targets (padded with `target_pad_id`) in Batch::targets and
/// Batch::target_lengths.
Batch make_batch(const std::vector<std::vector<int64_t>>& sequences,
                 const std::vector<std::vector<int64_t>>& targets, const std::vector<int64_t>& indices,
                 int64_t pad_id = 0, int64_t target_pad_id = 0);

/// The same for frames: frames[i] holds example i's frames row-major, n_i × `features` floats.
/// Throws Error as make_batch does, and for features < 1 or a selected example whose size is not a
/// multiple of `features`.
FrameBatch make_frame_batch(const std::vector<std::vector<float>>& frames, int64_t features,
                            const std::vector<int64_t>& indices);
/// As above, with each example's targets (padded with `target_pad_id`) in FrameBatch::targets and
/// FrameBatch::target_lengths.
FrameBatch make_frame_batch(const std::vector<std::vector<float>>& frames, int64_t features,
                            const std::vector<std::vector<int64_t>>& targets, const std::vector<int64_t>& indices,
                            int64_t target_pad_id = 0);

/// Whether bucket_batches shuffles the examples before bucketing and the batches after (see the
/// contract above).
enum class Shuffle {
  No,  ///< the examples in data-set order, the batches in the order they were packed
  Yes  ///< both shuffled by the epoch's generator
};
/// What bucket_batches does with an example longer than max_tokens.
enum class Oversize {
  Refuse,  ///< throw Error naming the example (the default)
  Alone    ///< put it in a batch of its own, over the budget
};

/// How bucket_batches packs examples into batches (see the contract above).
struct BatchingOptions {
  int64_t max_tokens = 4096;  ///< budget: rows × max(1, longest length) ≤ max_tokens
  int64_t max_batch = 0;      ///< at most this many rows (0: no limit besides the budget)
  /// Examples sorted together (0: the whole data set). Sorting everything pads least, but then a
  /// batch holds nearly the same examples every epoch; windows of tens of batches' worth of
  /// examples mix them at the cost of a little padding.
  int64_t window = 0;
  Shuffle shuffle = Shuffle::Yes;  ///< whether examples and batches are shuffled
  Oversize oversize = Oversize::Refuse;  ///< what to do with an example over the budget
};

/// The example indices of each batch, in step order.
using BatchList = std::vector<std::vector<int64_t>>;

/// The generator of epoch `epoch` under `seed`: Generator(seed) at offset epoch · 2^32, so epochs
/// draw from disjoint counter ranges (an epoch uses fewer than 2^32 draws: bucket_batches refuses
/// 2^31 examples or more). Throws Error for an epoch outside [0, 2^32).
Generator epoch_generator(uint64_t seed, int64_t epoch);

/// Fisher–Yates over Philox draws: for i = n − 1 down to 1, the swap partner of i is
///   j = uniform_below(philox_block(c, gen.seed()), i + 1)
/// where c = gen.reserve(1) (core/random.h); so n − 1 counters are used, one per swap.
void shuffle(std::vector<int64_t>& values, Generator& gen);

/// The batches of one epoch (see the contract above). `seed` and `epoch` matter only with
/// Shuffle::Yes. Throws Error for an empty data set, a negative length, max_tokens < 1,
/// max_batch < 0, window < 0, an epoch outside [0, 2^32), and (Oversize::Refuse) an example over
/// the budget.
BatchList bucket_batches(const std::vector<int64_t>& lengths, const BatchingOptions& options, uint64_t seed = 0,
                         int64_t epoch = 0);

/// Rank `rank`'s share of `batches` among `world_size` ranks (see the contract above). Throws Error
/// for world_size < 1, rank outside [0, world_size), and fewer batches than ranks.
BatchList shard(const BatchList& batches, int64_t rank, int64_t world_size);

/// Where a BatchSampler stands: `position` batches of epoch `epoch` have been handed out.
struct SamplerState {
  int64_t epoch = 0;     ///< the current epoch, from 0
  int64_t position = 0;  ///< the batches of that epoch handed out so far
};

/// Batches of a data set, epoch after epoch, for one rank:
///
///   BatchSampler sampler(lengths, options, seed, rank, world_size);
///   sampler.restore({ckpt.metadata["sampler"]["epoch"], ckpt.metadata["sampler"]["position"]});
///   while (training) {
///     const Batch batch = make_batch(sources, targets, sampler.next());
///     ...
///     ckpt.metadata["sampler"] = {{"epoch", sampler.state().epoch}, {"position", sampler.state().position}};
///   }
///
/// Epoch e's batches are shard(bucket_batches(lengths, options, seed, e), rank, world_size). A
/// restored state continues with exactly the batches the saved run would have taken next, provided
/// lengths, options, seed, rank and world_size are the same.
class BatchSampler {
 public:
  /// Throws Error as bucket_batches and shard do (it builds epoch 0 at once).
  BatchSampler(std::vector<int64_t> lengths, BatchingOptions options, uint64_t seed = 0, int64_t rank = 0,
               int64_t world_size = 1);

  /// The next batch's example indices. When the current epoch is used up, the next epoch begins
  /// first (epoch + 1, position 0), so next() always returns a batch.
  std::vector<int64_t> next();

  int64_t epoch() const { return state_.epoch; }  ///< the current epoch (SamplerState::epoch)
  int64_t position() const { return state_.position; }  ///< the batches of it handed out so far
  int64_t world_size() const { return world_size_; }  ///< the ranks that share each epoch
  ///@{
  /// This rank's batches of the current epoch, and their number.
  const BatchList& batches() const { return batches_; }
  int64_t batches_in_epoch() const { return static_cast<int64_t>(batches_.size()); }
  ///@}

  /// The state to save: epoch and position.
  SamplerState state() const { return state_; }
  /// Continues from `state`. Throws Error for a negative epoch, or a position outside
  /// [0, batches of that epoch].
  void restore(const SamplerState& state);

 private:
  void begin_epoch(int64_t epoch);

  std::vector<int64_t> lengths_;
  BatchingOptions options_;
  uint64_t seed_;
  int64_t rank_, world_size_;
  SamplerState state_;
  BatchList batches_;  ///< this rank's batches of state_.epoch
};

}  // namespace tapestry::data
