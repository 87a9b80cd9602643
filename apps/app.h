// Pieces every `tapestry` app shares: device and seed options, progress on long work, a JSON-lines
// metrics log, and exit codes.
//
// Exit codes: 0 success; 1 an error while running (a tapestry::Error: bad data, a corrupt
// checkpoint, ...); 2 a bad command line (unknown flag, malformed value).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"

namespace tapestry::app {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

// --device auto|cpu|cuda[:i]. Its spelling is checked when the command line is parsed (exit code 2),
// whether the device is present when it is resolved.
struct DeviceOption {
  std::string text = "auto";
  void add_to(CLI::App& app);
  // The device named; throws Error when it is not usable here (e.g. cuda without a GPU).
  Device resolve() const;
};

// The number of CPU threads (OpenMP) for a scope, restored at its end; 0 keeps OpenMP's default
// (OMP_NUM_THREADS, else one per core). On a machine that other work keeps busy, fewer threads than
// cores can be much faster: every parallel region waits for its slowest thread.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int previous_;
};

// Progress of a loop of `total` steps, on stderr. On a terminal one line is redrawn in place
// (step, the given metrics, throughput, ETA); otherwise a plain line is printed every
// `interval` seconds and at the end, so logs stay readable.
class Progress {
 public:
  Progress(std::string label, int64_t total, double interval_seconds = 10.0);
  // Reports step `step` (1-based) with metrics such as {"loss", 0.5}; `items` is what the step
  // processed (tokens), for the rate.
  void update(int64_t step, const std::vector<std::pair<std::string, double>>& metrics, double items = 0);
  // Ends the line (on a terminal).
  void finish();
  double seconds() const;

 private:
  std::string label_;
  int64_t total_;
  double interval_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_print_;
  double items_ = 0;
  bool printed_ = false;
};

// One JSON object per line, flushed at once; a no-op without a path.
class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);
  void write(const nlohmann::json& record);

 private:
  std::ofstream out_;
};

// Runs an app's body, turning exceptions into a message on stderr and an exit code.
template <class Body>
int run_reporting_errors(const char* app, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tapestry %s: %s\n", app, e.what());
    return kExitError;
  }
}

}  // namespace tapestry::app
