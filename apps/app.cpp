#include "apps/app.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

#include "core/error.h"
#include "train/trainer.h"

namespace tapestry::app {

void bound_openmp_spinning(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
  if (::setenv("GOMP_SPINCOUNT", "5000", 1) != 0) return;
  ::execv("/proc/self/exe", argv);  // returns only when it fails: go on with libgomp's default
  ::unsetenv("GOMP_SPINCOUNT");
}

void DeviceOption::add_to(CLI::App& app) {
  app.add_option("--device", text, "auto, cpu, cuda or cuda:N (auto: the GPU when present)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& input) -> std::string {
            try {  // only the spelling here; whether the device is present is resolve()'s business
              Device::parse(input);
              return "";
            } catch (const Error& e) {
              return e.what();
            }
          },
          "", "a device"));
}

Device DeviceOption::resolve() const { return train::resolve_device(text); }

std::string number_problem(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  std::strtod(begin, &end);
  const bool whole = !text.empty() && !std::isspace(static_cast<unsigned char>(text[0])) && end == begin + text.size();
  if (whole && errno != ERANGE) return "";
  const std::string shown = text.size() > 24 ? text.substr(0, 21) + "..." : text;
  return "'" + shown + (whole ? "' is out of a double's range" : "' is not a number (e.g. 0.1 or 1e-3)");
}

std::string switch_problem(const std::string& text) {
  for (const char* word : {"true", "false", "1", "0", "yes", "no", "on", "off"})
    if (text == word) return "";
  const std::string shown = text.size() > 24 ? text.substr(0, 21) + "..." : text;
  return "'" + shown + "' is not true or false (a switch: --flag, --flag=true, --flag=false)";
}

std::string list_problem(const std::string& text, const CLI::Validator& item) {
  if (text.empty() || text.back() == ',') return "'" + text + "' has an empty item (give N or N,M,...)";
  std::istringstream in(text);
  for (std::string word; std::getline(in, word, ',');) {
    if (word.empty()) return "'" + text + "' has an empty item (give N or N,M,...)";
    const std::string problem = CLI::Validator(item)(word);
    if (!problem.empty()) return "item '" + word + "': " + problem;
  }
  return "";
}

CommandLine::CommandLine(const std::string& description) : app_(description) { app_.require_subcommand(1); }

CLI::App* CommandLine::add(const std::string& name, const std::string& description, const Setup& setup,
                           CLI::App* parent) {
  CLI::App* command = (parent ? parent : &app_)->add_subcommand(name, description);
  commands_.emplace_back(command, setup(*command));
  return command;
}

CLI::App* CommandLine::add_group(const std::string& name, const std::string& description) {
  CLI::App* group = app_.add_subcommand(name, description);
  group->require_subcommand(1);
  return group;
}

namespace {

// The first word of argv that is not a command of the group it follows ("frobnicate" in
// `tapestry frobnicate`, "nope" in `tapestry bench nope`), with the commands that group has; empty
// when the words before the first flag all name commands.
std::pair<std::string, std::string> unknown_command(const CLI::App& top, int argc, char** argv) {
  const CLI::App* at = &top;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const auto commands = at->get_subcommands([](const CLI::App*) { return true; });
    if (word.empty() || word[0] == '-' || commands.empty()) break;
    const CLI::App* next = nullptr;
    std::string names;
    for (const CLI::App* c : commands) {
      if (c->get_name() == word) next = c;
      names += (names.empty() ? "" : ", ") + c->get_name();
    }
    if (!next) return {word, names};
    at = next;
  }
  return {};
}

}  // namespace

int CommandLine::main(int argc, char** argv) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 says "A subcommand is required" for a misspelt command: name it instead.
    const auto [word, commands] = unknown_command(app_, argc, argv);
    if (!word.empty() && e.get_exit_code() != 0) {
      std::fprintf(stderr, "tapestry: unknown command '%s' (commands: %s)\nRun with --help for more information.\n",
                   word.c_str(), commands.c_str());
      return kExitUsage;
    }
    // --help prints and succeeds; anything else is a bad command line, whatever CLI11's own code.
    const int code = app_.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  // A subcommand is registered after its parent and both count as parsed: the last one parsed is
  // the one named (`classify sweep` runs sweep, not classify).
  for (auto it = commands_.rbegin(); it != commands_.rend(); ++it)
    if (it->first->parsed()) return it->second();
  return 0;
}

}  // namespace tapestry::app
