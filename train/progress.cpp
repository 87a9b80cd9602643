#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/error.h"

namespace tapestry::train {

namespace {

std::string clock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buffer[32];
  if (s >= 3600) std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60), (long long)(s % 60));
  else std::snprintf(buffer, sizeof buffer, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buffer;
}

std::string rate(double per_second) {
  char buffer[32];
  if (per_second >= 1e6) std::snprintf(buffer, sizeof buffer, "%.1fM", per_second / 1e6);
  else if (per_second >= 1e3) std::snprintf(buffer, sizeof buffer, "%.1fk", per_second / 1e3);
  else std::snprintf(buffer, sizeof buffer, "%.1f", per_second);
  return buffer;
}

}  // namespace

Progress::Progress(std::string label, int64_t total, std::string unit, double interval_seconds)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      interval_(interval_seconds),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

double Progress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::update(int64_t step, const std::vector<std::pair<std::string, double>>& metrics, double items) {
  items_ += items;
  const auto now = std::chrono::steady_clock::now();
  const bool last = step >= total_;
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (!last && since < (tty_ ? 0.1 : interval_)) return;
  last_print_ = now;
  const double elapsed = seconds();
  std::string line = label_ + " " + std::to_string(step) + "/" + std::to_string(total_);
  if (tty_) {
    const int width = 20, filled = static_cast<int>(width * std::min<double>(1.0, double(step) / std::max<int64_t>(total_, 1)));
    line = label_ + " [" + std::string(filled, '#') + std::string(width - filled, ' ') + "] " + std::to_string(step) +
           "/" + std::to_string(total_);
  }
  char value[32];
  for (const auto& [name, v] : metrics) {
    std::snprintf(value, sizeof value, "%.4g", v);
    line += "  " + name + " " + value;
  }
  if (items_ > 0) line += "  " + rate(items_ / std::max(elapsed, 1e-9)) + " " + unit_ + "/s";
  line += "  " + clock(elapsed) + " elapsed";
  if (!last && step > 0) line += ", ETA " + clock(elapsed / step * (total_ - step));
  if (tty_) std::cerr << "\r\033[K" << line << std::flush;
  else std::cerr << line << "\n";
  printed_ = true;
}

void Progress::note(const std::string& text) {
  if (tty_ && printed_) std::cerr << "\r\033[K";
  std::cerr << label_ << " " << text << std::endl;
  printed_ = false;
}

void Progress::finish() {
  if (tty_ && printed_) std::cerr << "\n";
  printed_ = false;
}

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  if (path.empty()) return;
  out_.open(path, std::ios::app);
  TP_CHECK(out_.good(), "--log", "cannot open '", path, "' for writing");
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << "\n";
  out_.flush();
  TP_CHECK(out_.good(), "--log", "cannot write '", path_, "'");
}

}  // namespace tapestry::train
