#include "train/profiling.h"

#include <fstream>
#include <iostream>

#include "core/error.h"

namespace tapestry::train {

namespace {

// Writes `text` to `path` ("-" for the table: standard error); Error naming `flag` and the path.
void write_text(const char* flag, const std::string& path, const std::string& text) {
  if (path.empty()) return;
  if (path == "-") {
    std::cerr << text;
    return;
  }
  std::ofstream out(path);
  TP_CHECK(out.good(), flag, "cannot open '", path, "' for writing");
  out << text;
  out.close();
  TP_CHECK(out.good(), flag, "cannot write '", path, "'");
}

}  // namespace

ProfileOutputs profile_outputs(const TrainOptions& o) { return {o.profile, o.profile_json, o.profile_trace}; }

std::unique_ptr<Profiler> make_profiler(const ProfileOutputs& outputs, Device device) {
  if (!outputs.any()) return nullptr;
  write_text("--profile", outputs.table, "");
  write_text("--profile-json", outputs.json, "");
  write_text("--profile-trace", outputs.trace, "");
  return std::make_unique<Profiler>(device, outputs.trace.empty() ? Trace::Skip : Trace::Keep);
}

void write_profile(const ProfileOutputs& outputs, const Profiler& profiler) {
  const ProfileReport report = profiler.report();
  write_text("--profile", outputs.table, to_table(report));
  if (!outputs.json.empty()) write_text("--profile-json", outputs.json, to_json(report).dump(1) + "\n");
  if (!outputs.trace.empty()) write_text("--profile-trace", outputs.trace, to_chrome_trace(report).dump() + "\n");
}

}  // namespace tapestry::train
