#include "apps/app.h"

#include "core/error.h"
#include "train/trainer.h"

namespace tapestry::app {

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

int CommandLine::main(int argc, char** argv) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
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
