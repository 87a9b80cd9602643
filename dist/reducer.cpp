#include "dist/reducer.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/autograd.h"
#include "core/creation.h"
#include "core/error.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

#ifdef TAPESTRY_HAS_MPI
#include <mpi.h>
#endif
#ifdef TAPESTRY_HAS_NCCL
#include <nccl.h>

#include "core/cuda_context.h"
#endif

namespace tapestry::dist {

namespace {

constexpr const char* kOp = "GradientReducer";

#ifdef TAPESTRY_HAS_NCCL
void nccl_check(ncclResult_t result, const char* call) {
  TP_CHECK(result == ncclSuccess, kOp, call, " failed: ", ncclGetErrorString(result));
}
#endif

}  // namespace

struct GradientReducer::State {
  struct Bucket {
    Tensor flat;                  // (P + K) float32: the gradients back to back, then one slot per parameter
    std::vector<size_t> params;   // indices into `params` below
    std::vector<int64_t> offsets; // where each parameter's gradient starts in `flat`
    int64_t elements = 0;         // P
    size_t arrived = 0;           // parameters whose gradient is in `flat` this pass
  };

  World world;
  Device device;
  std::vector<Tensor> params;
  std::vector<size_t> bucket_of, slot_of;  // per parameter: its bucket and its place in it
  std::vector<bool> arrived;               // per parameter, this pass
  std::vector<Bucket> buckets;
  size_t next_start = 0;  // buckets start in index order on every rank
#ifdef TAPESTRY_HAS_MPI
  std::vector<MPI_Request> requests;  // per bucket, while its host all-reduce runs
#endif
#ifdef TAPESTRY_HAS_NCCL
  ncclComm_t nccl = nullptr;
#endif

  Tensor gradient_view(const Bucket& b, size_t k) const {
    const Tensor& p = params[b.params[k]];
    return view(slice(b.flat, 0, b.offsets[k], b.offsets[k] + p.numel()), p.shape());
  }
  Tensor slot(const Bucket& b, size_t k) const {
    const int64_t at = b.elements + int64_t(k);
    return slice(b.flat, 0, at, at + 1);
  }

  // The hook: parameter i's gradient of this pass is final.
  void arrive(size_t i, const Tensor& grad) {
    TP_CHECK(!arrived[i], kOp, "parameter ", i, " received a second gradient before finish(): one backward per step");
    arrived[i] = true;
    Bucket& b = buckets[bucket_of[i]];
    copy_(gradient_view(b, slot_of[i]), grad);
    fill_(slot(b, slot_of[i]), 1.0);
    ++b.arrived;
    start_ready();
    progress();
  }

  void start_ready() {
    while (next_start < buckets.size() && buckets[next_start].arrived == buckets[next_start].params.size())
      start(next_start++);
  }

  // The sum over the ranks of bucket j, in place, started now and completed by wait().
  void start(size_t j) {
    if (!world.joined()) return;  // a process alone: the sum is the buffer itself
    Bucket& b = buckets[j];
#ifdef TAPESTRY_HAS_NCCL
    if (device.is_cuda()) {
      // On the context's stream, behind the copies that filled the bucket.
      nccl_check(ncclAllReduce(b.flat.raw_data(), b.flat.raw_data(), size_t(b.flat.numel()), ncclFloat32, ncclSum,
                               nccl, cuda::active_context(device).stream()),
                 "ncclAllReduce");
      return;
    }
#endif
#ifdef TAPESTRY_HAS_MPI
    MPI_Iallreduce(MPI_IN_PLACE, b.flat.raw_data(), int(b.flat.numel()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                   &requests[j]);
#else
    (void)b;
#endif
  }

  // MPI progresses a non-blocking collective only inside MPI calls: a test after each hook lets the
  // buckets already started move on while backward computes the rest.
  void progress() {
#ifdef TAPESTRY_HAS_MPI
    if (!world.joined() || device.is_cuda()) return;
    for (size_t j = 0; j < next_start; ++j) {
      int done = 0;
      if (requests[j] != MPI_REQUEST_NULL) MPI_Test(&requests[j], &done, MPI_STATUS_IGNORE);
    }
#endif
  }

  void wait() {
#ifdef TAPESTRY_HAS_MPI
    if (world.joined() && !device.is_cuda())
      MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
#endif
    // NCCL: nothing to wait for; what reads the buckets next is queued behind the all-reduces.
  }
};

GradientReducer::GradientReducer(const World& world, const std::vector<Tensor>& parameters, int64_t bucket_bytes)
    : state_(std::make_shared<State>()) {
  TP_CHECK(bucket_bytes > 0, kOp, "bucket_bytes must be positive, got ", bucket_bytes);
  TP_CHECK(!parameters.empty(), kOp, "no parameters to reduce");
  State& s = *state_;
  s.world = world;
  s.params = parameters;
  s.device = parameters[0].device();
  for (size_t i = 0; i < parameters.size(); ++i) {
    const Tensor& p = parameters[i];
    TP_CHECK(p.requires_grad() && p.dtype() == DType::Float32, kOp, "parameter ", i, " (", to_string(p.shape()),
             ", ", p.dtype(), ") must be a float32 tensor that requires grad");
    TP_CHECK(p.device() == s.device, kOp, "parameter ", i, " is on ", p.device(), ", parameter 0 on ", s.device,
             ": all parameters must be on one device");
  }
  TP_CHECK(!s.device.is_cuda() || has_nccl(), kOp, "the parameters are on ", s.device,
           ", but this build has no NCCL to reduce GPU gradients (build with CUDA and MPI; NCCL ships with the "
           "CUDA toolkit)");

  // Buckets in reverse parameter order, each up to bucket_bytes (a larger parameter is one bucket).
  s.bucket_of.resize(parameters.size());
  s.slot_of.resize(parameters.size());
  s.arrived.assign(parameters.size(), false);
  int64_t bytes = 0;
  for (size_t n = parameters.size(); n-- > 0;) {
    const int64_t size = parameters[n].numel() * int64_t(sizeof(float));
    if (s.buckets.empty() || (bytes + size > bucket_bytes && !s.buckets.back().params.empty())) {
      s.buckets.emplace_back();
      bytes = 0;
    }
    State::Bucket& b = s.buckets.back();
    s.bucket_of[n] = s.buckets.size() - 1;
    s.slot_of[n] = b.params.size();
    b.params.push_back(n);
    b.offsets.push_back(b.elements);
    b.elements += parameters[n].numel();
    bytes += size;
  }
  for (State::Bucket& b : s.buckets) {
    TP_CHECK(b.elements + int64_t(b.params.size()) <= INT32_MAX, kOp, "a bucket of ", b.elements,
             " elements is over MPI's count limit; use smaller buckets");
    b.flat = empty({b.elements + int64_t(b.params.size())}, {DType::Float32, s.device});
  }
#ifdef TAPESTRY_HAS_MPI
  s.requests.assign(s.buckets.size(), MPI_REQUEST_NULL);
#endif
#ifdef TAPESTRY_HAS_NCCL
  if (s.device.is_cuda() && world.joined()) {
    // Rank 0 makes the communicator's id and MPI carries it to the others.
    ncclUniqueId id;
    if (world.is_root()) nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    const std::string bytes_of_id =
        world.broadcast(std::string(reinterpret_cast<const char*>(&id), sizeof id));
    std::copy(bytes_of_id.begin(), bytes_of_id.end(), reinterpret_cast<char*>(&id));
    cuda::active_context(s.device);  // this rank's GPU becomes the current device
    nccl_check(ncclCommInitRank(&s.nccl, world.size(), id, world.rank()), "ncclCommInitRank");
  }
#endif

  // The hooks hold the state weakly: the parameters (and so their hooks) may outlive the reducer.
  const std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < parameters.size(); ++i)
    parameters[i].register_hook([weak, i](const Tensor& grad) {
      if (const auto state = weak.lock()) state->arrive(i, grad);
    });
}

GradientReducer::~GradientReducer() {
#ifdef TAPESTRY_HAS_NCCL
  if (state_->nccl) ncclCommDestroy(state_->nccl);
#endif
}

void GradientReducer::finish() {
  State& s = *state_;
  NoGradGuard no_grad;
  // A parameter without a gradient on this rank adds zeros, and a slot of 0.
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (s.arrived[i]) continue;
    State::Bucket& b = s.buckets[s.bucket_of[i]];
    fill_(s.gradient_view(b, s.slot_of[i]), 0.0);
    fill_(s.slot(b, s.slot_of[i]), 0.0);
    ++b.arrived;
  }
  s.start_ready();
  s.wait();

  const double scale = 1.0 / s.world.size();
  for (State::Bucket& b : s.buckets) {
    const std::vector<float> ranks = slice(b.flat, 0, b.elements, b.flat.numel()).to_vector<float>();
    mul_(slice(b.flat, 0, 0, b.elements), scale);
    for (size_t k = 0; k < b.params.size(); ++k) {
      const Tensor& p = s.params[b.params[k]];
      // The gradient's own copy: the bucket is refilled by the next backward.
      p.impl().autograd->grad = ranks[k] > 0 ? clone(s.gradient_view(b, k)) : Tensor();
    }
    b.arrived = 0;
  }
  s.arrived.assign(s.params.size(), false);
  s.next_start = 0;
}

int64_t GradientReducer::buckets() const { return int64_t(state_->buckets.size()); }

int64_t GradientReducer::bytes_per_step() const {
  int64_t bytes = 0;
  for (const State::Bucket& b : state_->buckets) bytes += b.flat.numel() * int64_t(sizeof(float));
  return bytes;
}

}  // namespace tapestry::dist
