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

// The command of `group` named `word`, or null.
const CLI::App* command_named(const CLI::App& group, const std::string& word) {
  for (const CLI::App* c : group.get_subcommands([](const CLI::App*) { return true; }))
    if (c->get_name() == word) return c;
  return nullptr;
}

// A word before the command that a group needs: one that names no command of the group it follows
// ("frobnicate" in `tapestry frobnicate`, "nope" in `tapestry bench nope`), or a flag the group does
// not take (`tapestry --bogus`, `tapestry asr --bogus train`), with the commands that group has. CLI11
// says "A subcommand is required" or "not expected" for these, naming no command. Empty when the words
// before the first flag all name commands.
struct MisplacedWord {
  std::string word, commands;
  bool flag = false;
};
MisplacedWord misplaced_word(const CLI::App& top, int argc, char** argv) {
  const CLI::App* at = &top;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    const auto commands = at->get_subcommands([](const CLI::App*) { return true; });
    if (word.empty() || commands.empty()) break;
    std::string names;
    for (const CLI::App* c : commands) names += (names.empty() ? "" : ", ") + c->get_name();
    if (word[0] == '-') {
      const bool group = at->get_require_subcommand_min() > 0;  // its only flag is --help
      if (group && !at->get_option_no_throw(word.substr(0, word.find('=')))) return {word, names, true};
      break;
    }
    const CLI::App* next = command_named(*at, word);
    if (!next) return {word, names};
    at = next;
  }
  return {};
}

// The first `--flag=` of argv with nothing after the '=' (or, for a switch, `--flag={}`, CLI11's
// spelling of no value), and whether the flag is a switch; an empty flag when there is none. CLI11
// gives such a switch its default, true (`--json=` printed JSON), and an option the next word as its
// value (`--save= --json` saved the checkpoint as a file named --json).
std::pair<std::string, bool> flag_without_value(const CLI::App& top, int argc, char** argv) {
  const CLI::App* at = &top;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;  // positionals follow
    if (const CLI::App* command = word.empty() || word[0] == '-' ? nullptr : command_named(*at, word)) {
      at = command;
      continue;
    }
    const size_t equals = word.find('=');
    if (word.rfind("--", 0) != 0 || equals == std::string::npos) continue;
    const CLI::Option* option = at->get_option_no_throw(word.substr(0, equals));
    if (!option) continue;  // an unknown flag, which CLI11 names
    const bool is_switch = option->get_items_expected_max() == 0;
    const std::string value = word.substr(equals + 1);
    if (value.empty() || (is_switch && value == "{}")) return {word.substr(0, equals), is_switch};
  }
  return {};
}

}  // namespace

int CommandLine::main(int argc, char** argv) {
  if (const auto [flag, is_switch] = flag_without_value(app_, argc, argv); !flag.empty()) {
    if (is_switch)
      std::fprintf(stderr, "tapestry: %s: given no value after '=' (a switch: %s, %s=true, %s=false)\n", flag.c_str(),
                   flag.c_str(), flag.c_str(), flag.c_str());
    else
      std::fprintf(stderr, "tapestry: %s: given no value after '=' (give %s=VALUE or %s VALUE)\n", flag.c_str(),
                   flag.c_str(), flag.c_str());
    std::fprintf(stderr, "Run with --help for more information.\n");
    return kExitUsage;
  }
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 says "A subcommand is required" for a misspelt command or a flag before one: name it instead.
    const MisplacedWord misplaced = misplaced_word(app_, argc, argv);
    if (!misplaced.word.empty() && e.get_exit_code() != 0) {
      if (misplaced.flag)
        std::fprintf(stderr, "tapestry: unknown flag '%s' before a command (commands: %s; their flags follow them)\n",
                     misplaced.word.c_str(), misplaced.commands.c_str());
      else
        std::fprintf(stderr, "tapestry: unknown command '%s' (commands: %s)\n", misplaced.word.c_str(),
                     misplaced.commands.c_str());
      std::fprintf(stderr, "Run with --help for more information.\n");
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
