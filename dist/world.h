/// @file
/// The ranks of a data-parallel run (docs/DISTRIBUTED.md): this process's place among them and the
/// few collectives training needs. The processes are started by MPI (`mpirun -np 4 tapestry ...`);
/// a World joins that job, reads its rank, world size and local rank (the rank among the processes
/// of one machine, which picks the GPU), and offers broadcasts from rank 0 and sums over all ranks.
///
/// A default World is one process alone (rank 0 of 1): every collective is then the identity, so a
/// trainer has one code path for one process and for many.
///
/// MPI is process-global: the first World::join() initialises it (MPI_THREAD_FUNNELED: only the
/// thread that joined calls MPI) and it is finalised when the process exits. A collective waits for
/// every rank; when one rank fails, abort() ends the whole job so that no other rank waits forever
/// (MPI_Abort), and a rank that dies is reported by mpirun, which then ends the others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapestry::dist {

/// Whether this build has MPI (CMake found it), i.e. whether World::join() can work.
bool has_mpi();
/// Whether this build has NCCL (CUDA and MPI builds where the toolkit ships it): GPU gradients are
/// then all-reduced on the GPU; without it, --distributed on a GPU is refused.
bool has_nccl();
/// Throws Error naming `flag` when the build has no MPI, saying how to get it.
void require_mpi(const std::string& flag);

/// This process's place among the ranks of a data-parallel run, and the collectives (see above).
class World {
 public:
  /// One process alone: rank 0 of 1.
  World() = default;

  /// The MPI job this process was started in. Throws Error naming `flag` when the build has no MPI.
  static World join(const std::string& flag = "--distributed");

  int rank() const { return rank_; }              ///< this process's rank, 0 .. size − 1
  int size() const { return size_; }              ///< the number of ranks
  int local_rank() const { return local_rank_; }  ///< rank among the processes on this machine
  bool is_root() const { return rank_ == 0; }     ///< whether this is rank 0
  bool joined() const { return joined_; }         ///< started by MPI (not a process alone)

  /// Rank 0's values of `tensor` (any device, any dtype), copied in place on every other rank.
  void broadcast(const Tensor& tensor) const;
  /// Rank 0's text, returned on every rank.
  std::string broadcast(const std::string& text) const;
  /// The sum of `value` over the ranks, on every rank.
  double sum(double value) const;
  /// The element-wise sum over the ranks of `values`, in place (every rank passes the same count).
  void sum(std::vector<double>& values) const;
  /// Ends every rank of the job, after printing `"tapestry: rank r of W: <message>"` on stderr. For a
  /// process alone it throws Error(message) instead.
  [[noreturn]] void abort(const std::string& message) const;

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  bool joined_ = false;
};

}  // namespace tapestry::dist
