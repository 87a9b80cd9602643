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
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"

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

// A CLI11 check for an integer flag of type T (integer_problem) that is at least `low` and at most
// `high`; a failure is a usage error. (CLI11's PositiveNumber prints its bound, DBL_MAX, in 300 digits.)
template <class T>
CLI::Validator integer_check(T low = std::numeric_limits<T>::min(), T high = std::numeric_limits<T>::max()) {
  return CLI::Validator(
      [low, high](std::string& input) {
        const std::string problem = integer_problem<T>(input);
        if (!problem.empty()) return problem;
        T value{};
        std::from_chars(input.data(), input.data() + input.size(), value);
        if (high < std::numeric_limits<T>::max() && (value < low || value > high))
          return "must lie in [" + std::to_string(low) + ", " + std::to_string(high) + "], got " + input;
        return value < low ? "must be at least " + std::to_string(low) + ", got " + input : std::string();
      },
      "", "integer");
}

// Floating-point flags are numbers, whole: CLI11 alone reads '' as 0 (--dropout '' trained without
// dropout). The problem with `text` as a number ("" when none).
std::string number_problem(const std::string& text);
// Switches are given bare (--cache) or as --flag=true|false (also 1|0, yes|no, on|off): CLI11 alone
// reads --cache=2 as true. The problem with `text` as a switch's value ("" when none).
std::string switch_problem(const std::string& text);

// The CLI11 check every flag of type T gets: an integer (integer_problem), a number (number_problem),
// a switch (switch_problem) or a text that is not empty (CLI11 takes --resume '' as the flag left out:
// training from scratch; --save '' saved nothing). For a list, each element's (so --clusters 5, is
// refused). Configs are their parsers' business (an optional config's empty text is "none").
template <class T>
CLI::Validator value_check() {
  if constexpr (std::is_same_v<T, bool>) {
    return CLI::Validator([](std::string& input) { return switch_problem(input); }, "", "switch");
  } else if constexpr (std::is_integral_v<T>) {
    return integer_check<T>();
  } else if constexpr (std::is_floating_point_v<T>) {
    return CLI::Validator([](std::string& input) { return number_problem(input); }, "", "number");
  } else {
    return CLI::Validator(
        [](std::string& input) { return input.empty() ? "an empty value (give one, or leave the flag out)" : ""; },
        "", "");
  }
}
template <class T>
CLI::Validator value_check(const T*) {
  return value_check<T>();
}
template <class T>
CLI::Validator value_check(const std::vector<T>*) {
  return value_check<T>();
}

// A config type: read from its text by T::parse (which throws Error) and written back by
// to_string() (attention::AttentionConfig, optim::OptimizerConfig, ScheduleConfig, ParamGroupsConfig).
// A flag of such a type is parsed once, as the command line is read (a text that fails is a bad
// command line, exit 2), and the options carry it typed from there; checkpoints record its
// to_string(). A std::optional of one is a flag whose absence means another setting's value
// (--eval-attention: the training attention); its empty text is "none".
template <class T, class = void>
struct IsConfig : std::false_type {};
template <class T>
struct IsConfig<T, std::void_t<decltype(T::parse(std::string())), decltype(std::declval<const T&>().to_string())>>
    : std::true_type {};

template <class T>
struct IsOptionalConfig : std::false_type {};
template <class T>
struct IsOptionalConfig<std::optional<T>> : IsConfig<T> {};
// Whether a flag of type T is a config or an optional config, read by its parser rather than CLI11.
template <class T>
constexpr bool kReadByParser = IsConfig<T>::value || IsOptionalConfig<T>::value;

// A flag's value as --help shows it and checkpoints record it.
template <class T>
std::string flag_text(const T& value) {
  if constexpr (IsConfig<T>::value) {
    return value.to_string();
  } else if constexpr (IsOptionalConfig<T>::value) {
    return value ? value->to_string() : "";
  } else {
    std::ostringstream out;
    out << std::boolalpha << value;
    return out.str();
  }
}

// A config flag's value from its text; throws Error as its parser does.
template <class T>
T parse_flag_text(const std::string& text) {
  if constexpr (IsOptionalConfig<T>::value) return text.empty() ? T() : T(T::value_type::parse(text));
  else return T::parse(text);
}

// Registers `flag` on `cmd` with the check its type needs (value_check): a switch for a bool, a
// config read by its parser (kReadByParser), an option taking a value otherwise. Every flag of every
// app is registered through here or an option table (apps/options.h), which does the same.
template <class T>
CLI::Option* add_value(CLI::App& cmd, const std::string& flag, T& variable, const std::string& help) {
  if constexpr (kReadByParser<T>) {  // parsed here, once; a text that fails is a bad command line
    return cmd
        .add_option_function<std::string>(
            flag,
            [flag, &variable](const std::string& text) {
              try {
                variable = parse_flag_text<T>(text);
              } catch (const Error& e) {
                throw CLI::ValidationError(flag, e.what());
              }
            },
            help)
        ->type_name("TEXT");
  } else if constexpr (std::is_same_v<T, bool>) {
    return cmd.add_flag(flag, variable, help)->check(value_check<bool>());
  } else {
    return cmd.add_option(flag, variable, help)->check(value_check(&variable));
  }
}

// A comma-separated list flag ("5,10,20"): each item must pass `item` (by default its type's
// value_check), and no item may be empty (CLI11 alone drops the empty items of "5," and "5,,10").
// The list replaces `variable`'s default when the flag is given.
std::string list_problem(const std::string& text, const CLI::Validator& item);
template <class T>
CLI::Option* add_list(CLI::App& cmd, const std::string& flag, std::vector<T>& variable, const std::string& help,
                      CLI::Validator item = value_check<T>()) {
  std::string defaults;
  for (const T& v : variable) defaults += (defaults.empty() ? "" : ",") + CLI::detail::to_string(v);
  return cmd
      .add_option_function<std::string>(
          flag,
          [&variable](const std::string& text) {
            variable.clear();
            std::istringstream in(text);
            for (std::string word; std::getline(in, word, ',');) {
              T value{};
              CLI::detail::lexical_conversion<T, T>({word}, value);
              variable.push_back(value);
            }
          },
          help)
      ->check(CLI::Validator([item](std::string& input) { return list_problem(input, item); }, "", "LIST"))
      ->default_str(defaults);
}

// OpenMP's threads (libgomp) spin for 300,000 iterations after each parallel region before they
// sleep. Beside other work that costs dearly: the spinning thread holds a core its sibling needs, and
// every region waits for the one descheduled. The copy task's smoke preset, 60 steps beside one busy
// core, took 22.4 s on two threads (10.8 to 35.8) against 4.6 s on one; with 5,000 spins 6.4 s, and
// on an idle machine 2.7 s, as with 300,000 (docs/PERFORMANCE.md). The thread count, on which results depend,
// stays what --threads says. libgomp reads the setting once, as it loads: so, unless GOMP_SPINCOUNT
// or OMP_WAIT_POLICY is set already (the user's choice wins), the process starts again with
// GOMP_SPINCOUNT=5000 (execv of /proc/self/exe, the same arguments); where that fails it goes on as
// it is. Call first in main, before anything runs in parallel.
void bound_openmp_spinning(char** argv);

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
