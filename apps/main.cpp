// The `tapestry` command line. Each app is a subcommand; exit codes are in apps/app.h.
#include <omp.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "apps/app.h"
#include "apps/asr.h"
#include "apps/bench.h"
#include "apps/classify.h"
#include "apps/cluster.h"
#include "apps/copy_task.h"
#include "apps/inspect.h"
#include "apps/reverse.h"
#include "apps/translate.h"
#include "ops/onednn_gemm.h"
#include "tapestry.h"
#include "tapestry_commit.h"  // TAPESTRY_COMMIT, the commit built (CMakeLists.txt)

namespace {

// How OpenMP's idle threads wait, as the environment sets it (app::bound_openmp_spinning).
std::string openmp_wait() {
  if (const char* policy = std::getenv("OMP_WAIT_POLICY")) return std::string("as OMP_WAIT_POLICY=") + policy;
  if (const char* spins = std::getenv("GOMP_SPINCOUNT")) return std::string("GOMP_SPINCOUNT=") + spins;
  return "as libgomp's default (300,000 spins)";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tapestry;
  app::bound_openmp_spinning(argv);
  try {
    cpu_capability();    // a bad TAPESTRY_CPU_CAPABILITY is refused before any command runs
    cpu_float32_gemm();  // and a bad TAPESTRY_CPU_GEMM
  } catch (const Error& e) {
    std::cerr << "tapestry: " << e.what() << "\n";
    return app::kExitUsage;
  }
  app::CommandLine cli("Tapestry: a C++17/CUDA deep-learning framework built around clustered attention");
  cli.add("version", "Print the version, the commit built and the devices this build can use", [](CLI::App&) {
    return [] {
      std::cout << "tapestry " << TAPESTRY_VERSION << " (commit " << TAPESTRY_COMMIT << ")\n"
                << "cuda: " << (cuda::is_available() ? "available" : "not available (" + cuda::unavailable_reason() + ")")
                << "\n"
                << "best device: " << Device::best() << "\n"
                << "cpu threads: " << omp_get_max_threads() << " (OpenMP); idle ones wait " << openmp_wait() << "\n"
                << "cpu kernels: " << to_string(cpu_capability()) << " (this CPU has "
                << to_string(cpu_capability_supported()) << "; TAPESTRY_CPU_CAPABILITY lowers it)\n"
                << "cpu float32 products: " << to_string(cpu_float32_gemm())
                << (cpu_onednn_available() ? " (this build has onednn and openblas; TAPESTRY_CPU_GEMM chooses)"
                                           : " (this build has no onednn)")
                << "\n"
                << "cpu bfloat16 products: "
                << (cpu_bf16_gemm_available() ? "oneDNN, on this CPU's bfloat16 instructions (at avx512)"
                                              : "in float32 (this build has no oneDNN, or this CPU no AVX-512 BF16)")
                << "\n";
      return 0;
    };
  });
  cli.add("attentions", "List the attention kinds that --attention takes: each with what it is, its settings (default, "
          "range, meaning) and whether a decoder may use it", [](CLI::App&) {
    return [] {
      std::cout << attention::describe_kinds();
      return 0;
    };
  });
  cli.add("optimizers", "List the optimizers that --optimizer takes and the schedules that --schedule takes: each "
          "with its settings (default, range, meaning)", [](CLI::App&) {
    return [] {
      std::cout << "optimizers (--optimizer):\n" << optim::describe_optimizers() << "schedules (--schedule):\n"
                << optim::describe_schedules();
      return 0;
    };
  });
  app::add_asr(cli);
  app::add_classify(cli);
  app::add_cluster(cli);
  app::add_copy_task(cli);
  app::add_inspect(cli);
  app::add_reverse(cli);
  app::add_translate(cli);
  app::add_bench(cli);
  return cli.main(argc, argv);
}
