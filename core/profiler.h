/// @file
/// Where the time goes: a profiler of ops, forward and backward apart (docs/PROFILING.md).
///
///   tapestry::Profiler profiler;                       // collects; records nothing yet
///   {
///     tapestry::ProfileSession on(profiler);           // this thread's ops report to it now
///     const Tensor loss = model.forward(x, gen);
///     loss.backward();
///     { tapestry::ProfileScope step("optimizer"); optimizer.step(); }
///   }
///   std::cout << tapestry::to_table(profiler.report());
///
/// What it measures, per op name and phase (forward, backward):
///
/// - **Forward.** An op reports itself when it calls record() (or record_cut()) after computing its
///   outputs; it has no start hook. Its forward time is the time since the previous boundary on this
///   thread: the previous op's report, a scope's start or end, the start or end of a session or of a
///   backward pass. That is the op's own checks, allocation and kernel, plus whatever ran between it
///   and the op before (the caller's code between two ops, which is usually nothing). An op built from
///   other ops is charged only what it does after the last of them (self time); the ops it calls
///   have rows of their own. Views (view, reshape, permute, slice, select, expand, unsqueeze: no
///   data moves) end no interval and have no forward row: an op that returns a view of its result
///   keeps its work, and a view's few microseconds go to the op after it. An op that calls a
///   copying op after its own work (sort along a dim other than the last, which permutes back)
///   has that work charged to the copy.
/// - **Backward.** Each op's backward closure is timed from its start to its end, the ops it calls
///   included; "(autograd)" is the rest of backward(): seeding, zero gradients for outputs that got
///   none, hooks, accumulation into .grad.
/// - **Outside ops.** Time up to a boundary that no op reported (the optimizer's fused update,
///   drawing a batch, the loss read back with item()) is charged to the innermost ProfileScope's
///   name, or "(outside ops)" outside any scope, in the phase "outside". So the rows sum to the
///   profiled time, and the share of each is of that total.
/// - **FLOPs** are what the op reported with profile_flops() during its interval (matmul and linear:
///   2·m·n·k per product, forward and backward); other ops report none.
/// - **Bytes** are the bytes ops asked the caching allocator for during the interval (allocations,
///   not the memory held).
/// - **Memory at the peak**: each block allocated during a session is charged to the row of the
///   interval that allocated it (an op's forward, its backward closure, a scope) while it is held.
///   When the bytes held from the session's own allocations reach their most, each row's share of
///   them is kept: the report's `peak_bytes` and the rows' `peak_bytes`, from the session whose peak
///   was highest. Memory held before the session (parameters, a batch drawn outside it) is not in
///   it, and a block freed on a thread other than the session's counts as held to the session's end.
///
/// On a GPU the kernels run asynchronously: a profiler made for a CUDA device synchronises it at
/// every boundary, so each interval holds its kernels' GPU time (and the launch overhead), and a
/// profiled run is slower than an unprofiled one.
///
/// Cost when no session is active on the thread: each hook is one test of a thread-local pointer.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"

namespace tapestry {

/// Which part of the work a row measures.
enum class ProfilePhase {
  Forward,   ///< an op's forward computation
  Backward,  ///< an op's backward closure, or "(autograd)"
  Outside,   ///< time no op reported, named after the innermost ProfileScope
};

/// "forward", "backward", "outside".
const char* to_string(ProfilePhase phase);

/// One op (or scope) in one phase, summed over its calls.
struct ProfileRow {
  std::string name;                            ///< the op's name, a scope's, "(autograd)", "(outside ops)"
  ProfilePhase phase = ProfilePhase::Forward;  ///< forward, backward or outside
  int64_t calls = 0;                           ///< intervals charged to it
  double seconds = 0;                          ///< their total wall time
  double flops = 0;                            ///< FLOPs the op reported (0: none)
  int64_t bytes = 0;                           ///< bytes the op asked the allocator for
  int64_t peak_bytes = 0;  ///< of the report's peak_bytes, those this row's intervals allocated
};

/// One interval for a timeline: a row's call, or a scope.
struct ProfileEvent {
  std::string name;      ///< the row's or scope's name
  std::string category;  ///< "forward", "backward", "outside", "scope"
  double start_us = 0;   ///< microseconds since the profiler was made
  double duration_us = 0;  ///< its length
};

/// What a Profiler collected.
struct ProfileReport {
  double seconds = 0;   ///< profiled wall time: the sessions' lengths summed
  int64_t sessions = 0;  ///< the sessions that ran
  std::vector<ProfileRow> rows;  ///< every op and phase, longest total first; they sum to `seconds`
  /// Each ProfileScope name's time from start to end (ops inside included), longest first; not part
  /// of the rows' sum.
  std::vector<ProfileRow> scopes;
  std::vector<ProfileEvent> events;  ///< the timeline, in order of ending (with Trace::Keep)
  int64_t events_dropped = 0;  ///< events past the timeline's limit (kMaxEvents), not kept
  /// The most bytes that blocks allocated in one session held at once (the highest session's);
  /// the rows' peak_bytes say which intervals allocated them.
  int64_t peak_bytes = 0;
};

/// Whether a Profiler keeps each interval for a timeline (to_chrome_trace) besides the sums.
enum class Trace { Skip, Keep };

/// Collects what the ops of the sessions opened on it report (see the top of this file).
class Profiler {
 public:
  /// `device`: the device the profiled work runs on; a CUDA device is synchronised at every
  /// boundary. Trace::Keep also keeps each interval, up to kMaxEvents.
  explicit Profiler(Device device = Device(), Trace trace = Trace::Skip);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// What the sessions so far recorded.
  ProfileReport report() const;

  static constexpr int64_t kMaxEvents = int64_t{1} << 20;  ///< the timeline's limit (≈ 50 MiB)

  struct State;  ///< what is collected (core/profiler.cpp)

 private:
  friend class ProfileSession;
  std::unique_ptr<State> state_;
};

/// This thread's ops report to `profiler` while it lives. One session per thread at a time (a
/// second throws Error); a profiler may have many sessions, one after another.
class ProfileSession {
 public:
  /// Starts reporting to `profiler`.
  explicit ProfileSession(Profiler& profiler);
  /// Stops; the time since the last boundary is charged as outside ops.
  ~ProfileSession();
  ProfileSession(const ProfileSession&) = delete;
  ProfileSession& operator=(const ProfileSession&) = delete;

 private:
  Profiler::State* state_;
};

/// Names a region of the active session (an optimizer step): its time, ops included, is listed
/// among the report's scopes, and time in it that no op reported is charged to its name. Scopes
/// nest. Free when no session is active.
class ProfileScope {
 public:
  /// Opens the region `name` (a string that outlives the scope: a literal).
  explicit ProfileScope(const char* name);
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profiler::State* state_;
};

/// An op reports the floating-point operations it performs, before it calls record() (or inside
/// its backward closure). Free when no session is active.
void profile_flops(double flops);

/// The report as a text table: one line per row, longest first, with calls, total and mean time,
/// share of the profiled time, GFLOP, GFLOP/s, MiB allocated and MiB held at the peak; then the
/// scopes.
std::string to_table(const ProfileReport& report);
/// {"seconds", "sessions", "rows": [{"name", "phase", "calls", "seconds", "mean_seconds", "share",
///  "flops", "gflops_per_second", "bytes", "peak_bytes"}], "scopes": [...], "events_dropped",
///  "peak_bytes"}
nlohmann::json to_json(const ProfileReport& report);
/// The timeline in the Chrome trace event format, which chrome://tracing and Perfetto open:
/// {"traceEvents": [{"name", "cat", "ph": "X", "ts", "dur", "pid", "tid"}], "displayTimeUnit": "ms"}.
nlohmann::json to_chrome_trace(const ProfileReport& report);

/// What core/autograd.cpp and the allocator tell the active session; nothing else calls these.
namespace profile_hooks {
/// This thread's active session, or null (the one test that ops pay when none is active).
Profiler::State* active();
/// A forward op reported itself (record(), record_cut()).
void op_reported(Profiler::State& state, const char* op);
/// `nbytes` were asked of an allocator, which handed out `block`.
void allocated(Profiler::State& state, std::size_t nbytes, const void* block);
/// An allocator took `block` back.
void released(Profiler::State& state, const void* block);

/// Lives while a view reports itself (ops/shape.cpp): its report ends no interval.
class View {
 public:
  View();
  ~View();
  View(const View&) = delete;
  View& operator=(const View&) = delete;

 private:
  Profiler::State* state_;
};

/// A backward pass: times each closure, charges the rest to "(autograd)"; ops called meanwhile are
/// part of the closure or of the pass, not forward ops.
class BackwardPass {
 public:
  /// Begins a pass when `state` is not null.
  explicit BackwardPass(Profiler::State* state);
  ~BackwardPass();
  BackwardPass(const BackwardPass&) = delete;
  BackwardPass& operator=(const BackwardPass&) = delete;
  /// Call before op `op`'s backward closure.
  void closure_began();
  /// Call after it (or when it threw).
  void closure_ended(const std::string& op);

 private:
  Profiler::State* state_;
};
}  // namespace profile_hooks

}  // namespace tapestry
