#include "apps/bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <new>
#include <optional>
#include <tuple>

#include "core/cpu_capability.h"
#include "core/error.h"
#include "nn/attention/config.h"
#include "ops/autocast.h"
#include "ops/creation.h"
#include "ops/matmul.h"
#include "ops/onednn_gemm.h"
#include "ops/shape.h"

#ifdef TAPESTRY_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

// TAPESTRY_COMMIT, the commit the figures were measured at: `git rev-parse --short HEAD` when the
// build ran, "-dirty" for uncommitted changes to tracked files (cmake/tapestry_commit.cmake).
#include "tapestry_commit.h"

namespace tapestry::app {

void add_bench(CommandLine& cli) {
  CLI::App* bench = cli.add_group("bench", "Benchmarks: attention layers, ops, training steps (table + --json)");
  bench::add_attention(cli, bench);
  bench::add_ops(cli, bench);
  bench::add_train(cli, bench);
  bench::add_translate(cli, bench);
}

}  // namespace tapestry::app

namespace tapestry::app::bench {

void add_common_options(CLI::App& command, CommonOptions& options, Precision precision) {
  // `make bench` appends BENCH_ARGS after its own flags: the last value given wins.
  command.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  options.device.add_to(command);
  command.add_option("--repeats", options.repeats, "Timed runs per row (the median is reported)")
      ->check(integer_check<decltype(options.repeats)>(1))
      ->capture_default_str();
  command.add_option("--warmup", options.warmup, "Untimed runs before the timed ones")
      ->check(integer_check<decltype(options.warmup)>(0))
      ->capture_default_str();
  command.add_option("--seed", options.seed, "Seed of the inputs and parameters")
      ->check(integer_check<decltype(options.seed)>())
      ->capture_default_str();
  // Text and switches through add_value, as every app's: --json '' and --tf32=2 are refused.
  add_value(command, "--json", options.json, "Also write the results as JSON to this file");
  add_value(command, "--tf32", options.tf32,
            "float32 matmuls on the GPU in TensorFloat-32 (Ampere and later); off: IEEE float32");
  if (precision == Precision::Selectable)
    add_value(command, "--precision", options.precision,
              "float32, or bf16: the forward passes under autocast to bfloat16 (docs/MIXED-PRECISION.md)")
        ->check(CLI::IsMember({"float32", "bf16"}))
        ->capture_default_str();
  add_value(command, "--profile", options.profile.table,
            "Profile the timed runs: a table of time, FLOPs and bytes per op to FILE ('-': standard error; "
            "docs/PROFILING.md)");
  add_value(command, "--profile-json", options.profile.json, "Profile the timed runs: the profile as JSON to FILE");
  add_value(command, "--profile-trace", options.profile.trace,
            "Profile the timed runs: their timeline to FILE (Chrome trace: chrome://tracing, Perfetto)");
}

void synchronize(Device device) { context(device).synchronize(); }

double Timing::median() const {
  if (ms.empty()) return std::nan("");
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const size_t half = sorted.size() / 2;
  return sorted.size() % 2 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2;
}

Timing time_runs(Device device, int warmup, int repeats, const std::function<void()>& run,
                 const std::function<void()>& before, Profiler* profiler) {
  for (int i = 0; i < warmup; ++i) {
    if (before) before();
    run();
  }
  Timing timing;
  for (int i = 0; i < repeats; ++i) {
    if (before) before();
    synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    {
      std::optional<ProfileSession> profiled;
      if (profiler) profiled.emplace(*profiler);
      run();
    }
    synchronize(device);
    timing.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return timing;
}

void measure_step(nlohmann::json& row, Device device, const CommonOptions& common,
                  const std::function<TrainingStep()>& build, Profiler* profiler) {
  Allocator& allocator = context(device).allocator();
  allocator.empty_cache();  // the last row's cached blocks would crowd this one; its warm-up refills the cache
  try {
    const TrainingStep step = build();
    Tensor loss;
    int64_t peak = 0, activations = 0;
    const auto run = [&] {
      step.optimizer->zero_grad();
      const int64_t before = allocator.stats().in_use;
      Tensor objective;
      {
        const AutocastScope autocast(bf16(common));
        std::tie(loss, objective) = step.forward();
      }
      activations = std::max(activations, allocator.stats().in_use - before);
      objective.backward();
      step.optimizer->step();
    };
    const Timing timing = time_runs(
        device, common.warmup, common.repeats,
        [&] {
          run();
          peak = std::max(peak, allocator.stats().peak);
        },
        [&] {
          synchronize(device);
          allocator.reset_peak();
        },
        profiler);
    row["status"] = "ok";
    row["ms"] = timing.median();
    row["ms_runs"] = timing.ms;
    row["peak_bytes"] = peak;
    row["activation_bytes"] = activations;
    row["loss"] = loss.item<double>();
    Profiler counter(device);
    {
      const ProfileSession on(counter);
      run();
    }
    double flops = 0;
    for (const ProfileRow& op : counter.report().rows) flops += op.flops;
    row["flops"] = flops;
  } catch (const std::exception& e) {
    row["status"] = failure_status(e);
    row["ms"] = std::numeric_limits<double>::quiet_NaN();
  }
  allocator.empty_cache();
}

double matmul_rate(Device device, const CommonOptions& common) {
  constexpr int64_t n = 2048;
  Generator gen(common.seed);
  const DType dtype = bf16(common) ? DType::BFloat16 : DType::Float32;
  const Tensor a = to(randn({n, n}, gen, {DType::Float32, device}), dtype);
  const Tensor b = to(randn({n, n}, gen, {DType::Float32, device}), dtype);
  const Timing timing = time_runs(device, common.warmup, common.repeats, [&] { matmul(a, b); });
  return 2.0 * n * n * n / (timing.median() * 1e-3);
}

void add_bound(nlohmann::json& row, double rate) {
  const double ms = number(row, "ms"), flops = number(row, "flops");
  const bool known = std::isfinite(ms) && flops > 0 && rate > 0;
  row["bound_ms"] = known ? nlohmann::json(flops / rate * 1e3) : nlohmann::json(nullptr);
  row["x_bound"] = known ? nlohmann::json(ms / (flops / rate * 1e3)) : nlohmann::json(nullptr);
}

double number(const nlohmann::json& row, const char* key) {
  return row.contains(key) && row[key].is_number() ? row[key].get<double>() : std::numeric_limits<double>::quiet_NaN();
}

std::string failure_status(const std::exception& e) {
  // The caching allocator says "out of memory on cuda:0 ..." (or "on cpu").
  const std::string message = e.what();
  const bool out_of_memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                             message.find("out of memory") != std::string::npos;
  return out_of_memory ? std::string("out of memory") : "failed: " + message;
}

std::vector<std::string> split_at(const std::string& text, char separator) {
  // Not std::getline, which drops an empty last piece: "2x2x2," would pass as "2x2x2".
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t end; (end = text.find(separator, start)) != std::string::npos; start = end + 1)
    parts.push_back(text.substr(start, end - start));
  parts.push_back(text.substr(start));
  return parts;
}

std::vector<std::string> split_types(const std::string& text) {
  std::vector<std::string> types;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string piece = text.substr(start, comma - start);
    const bool option_of_previous = !types.empty() && piece.find('=') != std::string::npos &&
                                    piece.find(':') == std::string::npos;
    if (option_of_previous) types.back() += "," + piece;
    else types.push_back(piece);
    start = comma + 1;
  }
  return types;
}

std::string check_types(const std::string& text) {
  for (const std::string& type : split_types(text)) {
    try {
      attention::AttentionConfig::parse(type);
    } catch (const Error& e) {
      return e.what();
    }
  }
  return {};
}

void Table::print(std::ostream& out) const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  const auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < cells.size() ? cells[c] : "";
      // setw counts bytes; pad by characters so that µ, × and the like keep the columns straight.
      const size_t chars = static_cast<size_t>(std::count_if(cell.begin(), cell.end(), [](char ch) {
        return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
      }));
      const std::string pad(width[c] > chars ? width[c] - chars : 0, ' ');
      out << (c ? "  " : "") << (c == 0 ? cell + pad : pad + cell);
    }
    out << "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
  out.flush();
}

std::string format(const char* spec, double value) {
  if (std::isnan(value)) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

std::string device_name(Device device) {
#ifdef TAPESTRY_HAS_CUDA
  if (device.is_cuda()) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, device.index) == cudaSuccess) return properties.name;
    return "unknown GPU";
  }
#endif
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return device.is_cpu() ? "unknown CPU" : "unknown GPU";
}

nlohmann::json common_config(const CommonOptions& common) {
  return {{"repeats", common.repeats}, {"warmup", common.warmup}, {"seed", common.seed}, {"precision", common.precision}};
}

nlohmann::json document(const std::string& benchmark, Device device, nlohmann::json config, nlohmann::json rows) {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {{"benchmark", benchmark},
          {"device", to_string(device)},
          {"device_name", device_name(device)},
          {"commit", TAPESTRY_COMMIT},
          {"threads", omp_get_max_threads()},
          {"cpu_capability", to_string(cpu_capability())},
          {"cpu_float32_gemm", to_string(cpu_float32_gemm())},  // ops/onednn_gemm.h
          {"float32_matmul", device.is_cuda() && cuda::float32_matmul(device.index) == cuda::Float32Matmul::TF32
                                 ? "tf32" : "full"},
          {"date", date},
          {"config", std::move(config)},
          {"rows", std::move(rows)}};
}

void check_json_path(const std::string& path) {
  if (path.empty()) return;
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  std::error_code error;
  TP_CHECK(folder.empty() || std::filesystem::is_directory(folder, error), "--json", "cannot write '", path,
           "': no folder '", folder.string(), "'");
}

void write_json(const std::string& path, const nlohmann::json& doc) {
  std::ofstream out(path);
  TP_CHECK(out.good(), "--json", "cannot open '", path, "' for writing");
  out << doc.dump(2) << "\n";
  out.close();
  TP_CHECK(out.good(), "--json", "cannot write '", path, "'");
}

}  // namespace tapestry::app::bench
