#include "dist/world.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "ops/elementwise.h"

#ifdef TAPESTRY_HAS_MPI
#include <mpi.h>
#endif

namespace tapestry::dist {

bool has_mpi() {
#ifdef TAPESTRY_HAS_MPI
  return true;
#else
  return false;
#endif
}

bool has_nccl() {
#ifdef TAPESTRY_HAS_NCCL
  return true;
#else
  return false;
#endif
}

void require_mpi(const std::string& flag) {
  TP_CHECK(has_mpi(), flag, "this build has no MPI, so it cannot train on several processes; install Open MPI "
           "(libopenmpi-dev openmpi-bin, as scripts/setup does) and configure the build again");
}

#ifdef TAPESTRY_HAS_MPI

namespace {

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

World World::join(const std::string& flag) {
  require_mpi(flag);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    std::atexit(finalize_at_exit);
  }
  World w;
  w.joined_ = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size_);
  // The local rank: this process's rank among those that share its memory (its machine).
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank_, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &w.local_rank_);
  MPI_Comm_free(&local);
  return w;
}

void World::broadcast(const Tensor& tensor) const {
  if (size_ == 1) return;
  // Through a contiguous host copy, so that one call serves every device and layout; it runs once
  // per run (the initial parameters), not per step.
  const Tensor host = host_contiguous(tensor);
  const size_t bytes = size_t(host.numel()) * element_size(host.dtype());
  TP_CHECK(bytes <= size_t(INT32_MAX), "broadcast", "a tensor of ", bytes, " bytes is over MPI's 2 GiB count");
  MPI_Bcast(host.raw_data(), int(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (host.raw_data() != tensor.raw_data()) copy_(tensor, host);
}

std::string World::broadcast(const std::string& text) const {
  if (size_ == 1) return text;
  long long length = static_cast<long long>(text.size());
  MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  std::string out = is_root() ? text : std::string(size_t(length), '\0');
  MPI_Bcast(out.data(), int(length), MPI_CHAR, 0, MPI_COMM_WORLD);
  return out;
}

void World::sum(std::vector<double>& values) const {
  if (size_ == 1) return;
  MPI_Allreduce(MPI_IN_PLACE, values.data(), int(values.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

void World::abort(const std::string& message) const {
  if (!joined_) throw Error(message);
  std::fprintf(stderr, "tapestry: rank %d of %d: %s; stopping every rank\n", rank_, size_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return
}

#else  // no MPI in this build: only a process alone

World World::join(const std::string& flag) {
  require_mpi(flag);
  return World();
}

void World::broadcast(const Tensor& /*tensor*/) const {}
std::string World::broadcast(const std::string& text) const { return text; }
void World::sum(std::vector<double>& /*values*/) const {}
void World::abort(const std::string& message) const { throw Error(message); }

#endif

double World::sum(double value) const {
  std::vector<double> values{value};
  sum(values);
  return values[0];
}

}  // namespace tapestry::dist
