// `tapestry bench ...`: the benchmark programs (DESIGN §7). Benchmarks are programs, never timed
// tests: each prints a table on stdout and, with --json FILE, writes
//   {"benchmark", "device", "device_name", "commit", "threads", "date", "config", "rows": [...]}
// and each measures side by side in one run (every attention against full attention at the same N,
// every op against the device's copy bandwidth or a direct BLAS call). bench/peers/*.py measure
// PyTorch with the settings read back from these files; bench/compare.py puts the two together.
//
//   tapestry bench attention   one self-attention layer, forward + backward (clustered-attention
//                              paper, supplementary §C.1): time and peak memory per element
//   tapestry bench ops         achieved GB/s of memory-bound ops, GFLOP/s of matmul
//   tapestry bench train       time per training step of the copy-task model
//   tapestry bench translate   time per training step of the translation model
//
// Timing: each timed run is bracketed by the device's synchronize() (a no-op on the CPU), after
// `warmup` untimed runs; the table shows the median of `repeats` runs.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/app.h"
#include "core/device.h"
#include "core/profiler.h"
#include "core/tensor.h"
#include "optim/optimizer.h"
#include "train/profiling.h"
#include "train/training_run.h"

namespace tapestry::app {

// Registers `bench` and its subcommands on the tapestry command line.
void add_bench(CommandLine& cli);

}  // namespace tapestry::app

namespace tapestry::app::bench {

// What every benchmark takes.
struct CommonOptions {
  DeviceOption device;
  int repeats = 5;
  int warmup = 1;
  uint64_t seed = 0;
  std::string json;  // where to write the JSON document; empty: none
  bool tf32 = false;  // --tf32: float32 matmuls on the GPU in TensorFloat-32 (train::Float32MatmulScope)
  std::string precision = "float32";  // --precision bf16: forward passes under autocast (ops/autocast.h)
  // --profile, --profile-json, --profile-trace: the timed runs profiled (train::make_profiler makes
  // the profiler, null without them; train::write_profile writes it at the end).
  train::ProfileOutputs profile;
};
// Whether a benchmark takes --precision (bench ops times float32 kernels only, and has no such flag).
enum class Precision { Float32Only, Selectable };
void add_common_options(CLI::App& command, CommonOptions& options, Precision precision = Precision::Selectable);
// Whether the benchmark's forward passes run under autocast to bfloat16 (--precision bf16).
inline bool bf16(const CommonOptions& options) { return options.precision == "bf16"; }

// The subcommands (apps/bench_attention.cpp, bench_ops.cpp, bench_train.cpp, bench_translate.cpp).
void add_attention(CommandLine& cli, CLI::App* bench);
void add_ops(CommandLine& cli, CLI::App* bench);
void add_train(CommandLine& cli, CLI::App* bench);
void add_translate(CommandLine& cli, CLI::App* bench);

// Waits until the work queued on `device` has finished (a no-op on the CPU).
void synchronize(Device device);

// Wall-clock milliseconds of `repeats` runs of `run` after `warmup` untimed ones, each bracketed by
// synchronize(device). `before`, when given, runs untimed before each timed run (resetting memory
// statistics, dropping gradients). With a `profiler`, each timed run is one of its sessions.
struct Timing {
  std::vector<double> ms;  // one per timed run, in order
  double median() const;
};
Timing time_runs(Device device, int warmup, int repeats, const std::function<void()>& run,
                 const std::function<void()>& before = {}, Profiler* profiler = nullptr);

// A training step as measure_step runs it: with the optimizer's gradients zeroed and under autocast
// to bfloat16 when --precision bf16, `forward` returns the loss to report and the objective to
// differentiate; measure_step then back-propagates the objective and steps the optimizer.
struct TrainingStep {
  std::function<std::pair<Tensor, Tensor>()> forward;  // {loss, objective}
  std::shared_ptr<optim::Optimizer> optimizer;
};

// One row of a training-step benchmark (bench train, bench translate): `build` makes the model,
// optimizer and batch on `device` and returns the step. The step is timed by time_runs (common's
// warm-up and repeats) with the allocator's peak reset before each run. Sets row's "status" ("ok"),
// "ms" (the median), "ms_runs", "peak_bytes" (the allocator's peak over the runs, parameters and
// batch included), "activation_bytes" (the bytes in use after the forward less those before it:
// what the forward keeps for the backward, activations and autocast's bfloat16 copies of the
// weights; the most of any run), "loss" (the last step's) and "flops" (what the step's ops reported
// to a profiler of its own in one more, untimed step: matmul, linear and fused attention;
// core/profiler.h); when building or a step throws, "status" says why (failure_status) and "ms" is
// NaN. The allocator's cache is emptied before and after. With a `profiler`, the timed steps are
// profiled.
void measure_step(nlohmann::json& row, Device device, const CommonOptions& common,
                  const std::function<TrainingStep()>& build, Profiler* profiler = nullptr);

// The matrix-product rate of `device` in FLOP/s at common's precision (float32, or bfloat16 with
// --precision bf16), measured now: a 2048 × 2048 × 2048 matmul, the median of common's repeats after
// its warm-up. A training step's reported FLOPs at this rate are its bound: the time its matrix
// products alone would take, which no framework beats on this machine (docs/PERFORMANCE.md).
double matmul_rate(Device device, const CommonOptions& common);

// Sets row's "bound_ms" (its "flops" at `rate` FLOP/s) and "x_bound" (its "ms" over that); null
// where the row has no time or no FLOPs.
void add_bound(nlohmann::json& row, double rate);

// row[key] as a number; NaN when it is missing or not a number.
double number(const nlohmann::json& row, const char* key);

// The status of a row whose run threw: "out of memory" when the allocator (or operator new) ran out,
// else "failed: <message>".
std::string failure_status(const std::exception& e);

// "a,b,,c" -> {"a", "b", "", "c"}: text split at every `separator`, the empty pieces kept ("a," -> {"a", ""}).
std::vector<std::string> split_at(const std::string& text, char separator);

// "full,improved-clustered:clusters=15,topk=32" -> {"full", "improved-clustered:clusters=15,topk=32"}:
// split at commas, except that a piece of the form key=value belongs to the type before it.
std::vector<std::string> split_types(const std::string& text);
// A CLI11 check that every type of such a list parses as an attention config.
std::string check_types(const std::string& text);

// A fixed-width table: right-aligned cells, the first column left-aligned.
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// printf-style formatting of one number ("%.3g", "%.2f", ...); "-" for NaN.
std::string format(const char* spec, double value);

// The document every benchmark writes (see the top of this file); write_json throws Error when the
// file cannot be written.
nlohmann::json document(const std::string& benchmark, Device device, nlohmann::json config, nlohmann::json rows);
// What a training or attention benchmark's config records of the common options, which the PyTorch
// peers read back (--like): {"repeats", "warmup", "seed", "precision"}.
nlohmann::json common_config(const CommonOptions& common);
void write_json(const std::string& path, const nlohmann::json& doc);
// Before a benchmark runs: throws Error (exit 1) when `path` (not empty) cannot be written because
// its folder is missing, rather than after minutes of measuring.
void check_json_path(const std::string& path);

// The device's name: the CPU model from /proc/cpuinfo, or the GPU's name.
std::string device_name(Device device);

}  // namespace tapestry::app::bench
