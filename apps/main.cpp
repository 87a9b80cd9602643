// The `tapestry` command line. Each app is a subcommand; exit codes are in apps/app.h.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "apps/app.h"
#include "apps/bench.h"
#include "apps/copy_task.h"
#include "tapestry.h"

int main(int argc, char** argv) {
  CLI::App app{"Tapestry: a C++17/CUDA deep-learning framework built around clustered attention"};
  app.require_subcommand(1);

  CLI::App* version = app.add_subcommand("version", "Print the version and the devices this build can use");
  version->callback([] {
    std::cout << "tapestry " << TAPESTRY_VERSION << "\n"
              << "cuda: " << (tapestry::cuda::is_available() ? "available" : "not available (" + tapestry::cuda::unavailable_reason() + ")")
              << "\n"
              << "best device: " << tapestry::Device::best() << "\n";
  });
  tapestry::app::add_bench(app);

  // Apps run after the whole command line has parsed, so a parse error never leaves work half done.
  const std::vector<std::pair<std::string, std::function<int()>>> apps = {
      {"copy-task", tapestry::app::add_copy_task_command(app)},
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and succeeds; anything else is a bad command line, whatever CLI11's own code.
    const int code = app.exit(e);
    return code == 0 ? 0 : tapestry::app::kExitUsage;
  } catch (const tapestry::Error& e) {
    std::cerr << "tapestry: " << e.what() << "\n";
    return tapestry::app::kExitError;
  }
  for (const auto& [name, run] : apps)
    if (app.got_subcommand(name)) return run();
  return 0;
}
