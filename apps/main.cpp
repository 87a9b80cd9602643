// The `tapestry` command line. Each app is a subcommand.
#include <CLI/CLI.hpp>

#include <iostream>

#include "apps/bench.h"
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const tapestry::Error& e) {
    std::cerr << "tapestry: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
