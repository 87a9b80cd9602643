/// @file
/// Where a profiled run writes what its profiler collected (core/profiler.h): the flags --profile
/// (the table), --profile-json and --profile-trace, shared by the training apps (train::TrainOptions)
/// and the benchmarks. Any of them turns profiling on.
#pragma once

#include <memory>
#include <string>

#include "core/device.h"
#include "core/profiler.h"
#include "train/trainer.h"

namespace tapestry::train {

/// The files a profile goes to; empty: not written.
struct ProfileOutputs {
  std::string table;  ///< --profile: the text table (to_table); "-": standard error
  std::string json;   ///< --profile-json: to_json
  std::string trace;  ///< --profile-trace: the Chrome trace (to_chrome_trace)
  /// Whether any is asked for.
  bool any() const { return !table.empty() || !json.empty() || !trace.empty(); }
};

/// The files --profile, --profile-json and --profile-trace name in a training app's options.
ProfileOutputs profile_outputs(const TrainOptions& options);

/// A profiler for work on `device` when `outputs` asks for any file (keeping a timeline when it asks
/// for the trace), else null. Creates each file now, so that a path that cannot be written is refused
/// before the run rather than after it: throws Error naming the flag and the path.
std::unique_ptr<Profiler> make_profiler(const ProfileOutputs& outputs, Device device);

/// Writes `profiler`'s report to each file of `outputs`; throws Error naming the flag and the path
/// when one cannot be written.
void write_profile(const ProfileOutputs& outputs, const Profiler& profiler);

}  // namespace tapestry::train
