/// @file
/// What a training run shows and records: a progress line on stderr and a JSON-lines metrics log.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace tapestry::train {

/// Progress of a loop of `total` steps, on stderr. On a terminal one line is redrawn in place
/// (step, the given metrics, throughput, ETA); otherwise a plain line is printed every
/// `interval` seconds and at the end, so logs stay readable.
class Progress {
 public:
  /// `unit` names what update()'s items count, for the rate ("tok" gives "tok/s").
  Progress(std::string label, int64_t total, std::string unit = "tok", double interval_seconds = 10.0);
  /// Reports step `step` (1-based) with metrics such as {"loss", 0.5}; `items` is what the step
  /// processed (tokens), for the rate.
  void update(int64_t step, const std::vector<std::pair<std::string, double>>& metrics, double items = 0);
  /// Prints `text` on a line of its own, labelled, above the progress line (which the next update
  /// redraws on a terminal): evaluation results during training.
  void note(const std::string& text);
  /// Ends the line (on a terminal).
  void finish();
  /// Seconds since construction.
  double seconds() const;

 private:
  std::string label_, unit_;
  int64_t total_;
  double interval_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_print_;
  double items_ = 0;
  bool printed_ = false;
};

/// One JSON object per line, flushed at once; a no-op without a path.
class MetricsLog {
 public:
  /// Appends to the file at `path` (nothing when `path` is empty); throws Error naming --log when it
  /// cannot be opened.
  explicit MetricsLog(const std::string& path);
  /// Writes `record` as one line and flushes it (nothing without a path); throws Error naming --log
  /// when the line cannot be written (a full disk, /dev/full), rather than losing the log unsaid.
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace tapestry::train
