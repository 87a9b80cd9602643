/// @file
/// Gradient averaging over the ranks of a World, in buckets that start during backward.
///
/// The parameters (float32, all on one device) are cut into buckets of about `bucket_bytes`, taken
/// in reverse order of the list: backward reaches the last layers first, so the first bucket is the
/// first to be complete. Each bucket is one flat buffer:
///
///   float flat[P + K];  // P: the bucket's parameter elements, back to back; K: one slot per parameter
///
/// A hook on every parameter (Tensor::register_hook) copies its gradient into its place as soon as
/// backward has made it final, and writes 1 into its slot. When the last parameter of a bucket has
/// arrived, the bucket's sum over the ranks starts at once, without waiting for the rest of
/// backward: MPI_Iallreduce on the host buffer for CPU parameters, ncclAllReduce on the GPU
/// context's stream for CUDA ones. Buckets start in index order on every rank (a bucket complete
/// early waits for the ones before it), so every rank issues the same collectives in the same
/// order, which MPI and NCCL require.
///
/// finish() starts the buckets still open (a parameter that got no gradient on this rank adds
/// zeros), waits for all of them and sets each parameter's gradient to the sum divided by the world
/// size. A parameter's slot then counts the ranks that computed a gradient for it: with none, it
/// keeps no gradient, as in one process, and the optimizer leaves it alone.
///
///   GradientReducer reducer(world, model.parameters());
///   optimizer.zero_grad(); loss.backward(); reducer.finish(); optimizer.step();
///
/// One backward per finish(), after zero_grad: the hooks see each pass's gradient, and finish()
/// replaces the parameters' gradients with the averages.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "dist/world.h"

namespace tapestry::dist {

/// Averages the gradients of `parameters` over the ranks of a World, bucket by bucket (see above).
class GradientReducer {
 public:
  /// 25 MiB buckets: large enough that each all-reduce runs near the link's bandwidth, small enough
  /// that the first starts well before backward ends (PyTorch DDP's default, for the same reasons).
  static constexpr int64_t kBucketBytes = 25 << 20;

  /// Registers the hooks. Throws Error for a parameter that is not float32 or does not require
  /// grad, parameters on more than one device, and CUDA parameters in a build without NCCL.
  GradientReducer(const World& world, const std::vector<Tensor>& parameters, int64_t bucket_bytes = kBucketBytes);
  /// Releases the NCCL communicator of GPU parameters; the hooks stay on the parameters (they share State).
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  /// After backward: completes every bucket and sets the parameters' gradients to the averages.
  void finish();

  int64_t buckets() const;         ///< the number of buckets
  int64_t bytes_per_step() const;  ///< what each rank all-reduces per step (its buffers' bytes)

  struct State;  ///< shared with the hooks, which may outlive this object (they stay on the parameters)

 private:
  std::shared_ptr<State> state_;
};

}  // namespace tapestry::dist
