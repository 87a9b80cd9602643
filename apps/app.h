// The `tapestry` command line: how a subcommand is registered, exit codes, and the --device option
// of the programs that are not training runs (benchmarks). Training apps take their flags from an
// option table (apps/options.h) and run on the Trainer (train/trainer.h).
//
// Exit codes: 0 success; 1 an error while running (a tapestry::Error: bad data, a corrupt
// checkpoint, ...); 2 a bad command line (unknown flag, malformed value).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
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

// Integer flags are decimal integers in their type's range, whole: CLI11 alone clamps an
// out-of-range value to the type's limit (--steps 9223372036854775808 trained for ever) and reads
// -1 into an unsigned seed as 2^64 − 1. The problem with `text` as a T ("" when none); a long
// text is shortened in the message.
template <class T>
std::string integer_problem(const std::string& text) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc() && ptr == end && !text.empty()) return "";
  const std::string shown = text.size() > 24 ? text.substr(0, 21) + "..." : text;
  return "'" + shown + "' is not an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
         std::to_string(std::numeric_limits<T>::max()) + "]";
}

// A CLI11 check for an integer flag of type T (integer_problem) that is at least `low`; a failure is
// a usage error. (CLI11's PositiveNumber prints its bound, DBL_MAX, in 300 digits.)
template <class T>
CLI::Validator integer_check(T low = std::numeric_limits<T>::min()) {
  return CLI::Validator(
      [low](std::string& input) {
        const std::string problem = integer_problem<T>(input);
        if (!problem.empty()) return problem;
        T value{};
        std::from_chars(input.data(), input.data() + input.size(), value);
        return value < low ? "must be at least " + std::to_string(low) + ", got " + input : std::string();
      },
      "", "integer");
}

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

// The command line: subcommands, each run once the whole command line has parsed, so that a parse
// error never leaves work half done.
//
//   CommandLine cli("Tapestry: ...");
//   cli.add("copy-task", "Train ...", [](CLI::App& cmd) {
//     ...register cmd's flags...
//     return [=] { ...; return 0; };   // runs after parsing; returns the exit code
//   });
//   return cli.main(argc, argv);
class CommandLine {
 public:
  using Run = std::function<int()>;
  using Setup = std::function<Run(CLI::App& command)>;

  explicit CommandLine(const std::string& description);
  // A subcommand of `parent` (the top level when null); returns it.
  CLI::App* add(const std::string& name, const std::string& description, const Setup& setup, CLI::App* parent = nullptr);
  // A subcommand that only groups others (`tapestry bench attention`).
  CLI::App* add_group(const std::string& name, const std::string& description);
  // Parses, runs the chosen subcommand (the innermost one named) and returns the process's exit
  // code: --help 0, a bad command line kExitUsage, otherwise the subcommand's.
  int main(int argc, char** argv);

 private:
  CLI::App app_;
  std::vector<std::pair<CLI::App*, Run>> commands_;
};

}  // namespace tapestry::app
