// The benchmark programs (`tapestry bench ...`) run and write the JSON they promise. Tiny sizes and one
// repeat: this checks that they work, never how fast anything is (DESIGN §7: benchmarks are
// programs, not timed tests).
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "tests/testing.h"

#include "core/cpu_capability.h"
#include "ops/onednn_gemm.h"

namespace {

namespace fs = std::filesystem;

struct Run {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs the built `tapestry` binary with `args`, on the CPU with one thread (and `environment`, VAR=value ...).
Run tapestry_cli(const std::string& args, const fs::path& dir, const std::string& environment = "") {
  const fs::path log = dir / "output.txt";
  const std::string command = "OMP_NUM_THREADS=1 " + environment + " '" + std::string(TAPESTRY_CLI) + "' " + args +
                              " > '" + log.string() + "' 2>&1";
  const int status = std::system(command.c_str());
  Run run;
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(log);
  run.output.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return run;
}

// A fresh directory for one test case's files, removed at the end.
struct TempDir {
  TempDir() {
    path = fs::temp_directory_path() / ("tapestry-test-bench-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(counter++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  fs::path path;
  static inline int counter = 0;
};

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);  // throws (failing the test) when it does not parse
}

void check_document(const nlohmann::json& doc, const std::string& benchmark) {
  CHECK(doc["benchmark"] == benchmark);
  CHECK(doc["device"] == "cpu");
  for (const char* key : {"device_name", "commit", "date"}) {
    INFO(key);
    CHECK(doc[key].is_string());
    CHECK(!doc[key].get<std::string>().empty());
  }
  CHECK(doc["threads"].get<int>() == 1);
  CHECK(doc["cpu_float32_gemm"] == tapestry::to_string(tapestry::cpu_float32_gemm()));
  CHECK(doc["config"].is_object());
  CHECK(doc["rows"].is_array());
}

}  // namespace

TEST_CASE("bench attention: every attention type, two lengths, the JSON fields") {
  TempDir dir;
  const Run run = tapestry_cli("bench attention --device cpu --lengths 16,32 --repeats 1 --warmup 0 --json '" +
                                   (dir.path / "attention.json").string() + "'",
                               dir.path);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK(run.output.find("memory ×full") != std::string::npos);  // the table
  const nlohmann::json doc = read_json(dir.path / "attention.json");
  check_document(doc, "attention");
  CHECK(doc["config"]["d_model"] == 384);
  CHECK(doc["config"]["lengths"] == nlohmann::json({16, 32}));
  CHECK(doc["config"]["matmul_gflops_per_second"].get<double>() > 0);
  const nlohmann::json& rows = doc["rows"];
  REQUIRE(rows.size() == 8);
  // Full attention's FLOPs grow with N: its projections and feed-forward as N, its scores as N².
  CHECK(rows[4]["flops"].get<double>() > 2 * rows[0]["flops"].get<double>());
  for (const auto& row : rows) {
    INFO(row.dump());
    CHECK(row["status"] == "ok");
    for (const char* key : {"ms", "us_per_element", "peak_bytes", "bytes_per_element", "ms_vs_full", "memory_vs_full",
                            "flops", "bound_ms", "x_bound"}) {
      INFO(key);
      CHECK(row[key].is_number());
    }
    CHECK(row["peak_bytes"].get<double>() > 0);
    CHECK(row["flops"].get<double>() > 0);
    CHECK(row["x_bound"].get<double>() == doctest::Approx(row["ms"].get<double>() / row["bound_ms"].get<double>()));
    CHECK(row["us_per_element"].get<double>() ==
          doctest::Approx(row["ms"].get<double>() * 1000 / row["n"].get<double>()));
    if (row["type"] == "full") CHECK(row["ms_vs_full"].get<double>() == 1.0);
  }
  // §C.1's settings, and ⌈√N⌉ clusters for neural clustering.
  CHECK(rows[1]["attention"] == "clustered:clusters=100,bits=63,iterations=10");
  CHECK(rows[2]["attention"] == "improved-clustered:clusters=100,bits=63,iterations=10,topk=32");
  CHECK(rows[3]["attention"] == "neural-clustering:clusters=4,losses=cosine");
  CHECK(rows[7]["attention"] == "neural-clustering:clusters=6,losses=cosine");
}

TEST_CASE("bench ops: bandwidth rows and matmul against the direct BLAS call") {
  TempDir dir;
  const Run run = tapestry_cli("bench ops --device cpu --elements 4096 --matmul 8x16x4,3x5x7x2 --repeats 1 --warmup 0 "
                               "--json '" + (dir.path / "ops.json").string() + "'",
                               dir.path);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json doc = read_json(dir.path / "ops.json");
  check_document(doc, "ops");
  int matmuls = 0;
  for (const auto& row : doc["rows"]) {
    INFO(row.dump());
    CHECK(row["status"] == "ok");
    if (row["op"] == "matmul") {
      ++matmuls;
      CHECK(row["reference"] == "cblas_sgemm");
      for (const char* key : {"gflop_per_s", "reference_gflop_per_s", "time_vs_reference"}) CHECK(row[key].is_number());
    } else {
      CHECK(row["gb_per_s"].is_number());
      CHECK(row["fraction_of_copy"].is_number());
    }
  }
  CHECK(matmuls == 2);
  CHECK(doc["rows"][0]["op"] == "memcpy (reference)");
  CHECK(doc["rows"].back()["shape"] == nlohmann::json({3, 5, 7, 2}));
}

TEST_CASE("bench train: steps of the copy-task model") {
  TempDir dir;
  const Run run = tapestry_cli("bench train --device cpu --copy-lengths 3 --batch 2 --repeats 1 --warmup 0 --types "
                               "full,improved-clustered:clusters=2,topk=4,neural-clustering:clusters=2 --json '" +
                                   (dir.path / "train.json").string() + "'",
                               dir.path);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json doc = read_json(dir.path / "train.json");
  check_document(doc, "train");
  CHECK(doc["config"]["optimizer"] == "RAdam");
  const nlohmann::json& rows = doc["rows"];
  REQUIRE(rows.size() == 3);
  CHECK(rows[1]["type"] == "improved-clustered:clusters=2,topk=4");
  for (const auto& row : rows) {
    INFO(row.dump());
    CHECK(row["status"] == "ok");
    CHECK(row["n"] == 8);
    for (const char* key : {"ms", "tokens_per_s", "peak_bytes", "loss", "ms_vs_full", "flops", "bound_ms", "x_bound"})
      CHECK(row[key].is_number());
    CHECK(row["x_bound"].get<double>() > 1);  // no step beats its matrix products alone
    // What the forward keeps for the backward: something, and less than the step's peak.
    CHECK(row["activation_bytes"].get<double>() > 0);
    CHECK(row["activation_bytes"].get<double>() < row["peak_bytes"].get<double>());
  }
  CHECK(doc["config"]["matmul_gflops_per_second"].get<double>() > 0);
  // The full row's FLOPs, 2·m·n·k per product: 16 tokens through 4 layers of q, k, v, o (192 × 192)
  // and feed-forward (192 × 768 and back) plus the head (192 × 12) is 56,696,832 forward, twice that
  // backward (dX and dW); fused attention adds its tile products (about 1.4 million here).
  const double linear = 3.0 * 56696832;
  CHECK(rows[0]["flops"].get<double>() >= linear);
  CHECK(rows[0]["flops"].get<double>() <= linear + 2e6);
}

TEST_CASE("bench train: steps of the classifier's and the speech recogniser's models at their default presets") {
  TempDir dir;
  // Each model's linear FLOPs forward (2·m·n·k a product), from the presets (apps/classify.h,
  // apps/asr.h): the backward takes at least twice that (dX and dW), less the first layer's dX where
  // the input needs no gradient.
  //   classifier: 8 documents of 2048 tokens (m = 16384), 2 layers of D = 128: q, k, v, o (128 × 128)
  //               and feed-forward (128 × 256 and back); the head on 8 pooled vectors is negligible
  //   speech:     30 utterances of 65 positions (m = 1950), the input (160 → 64), 4 layers of D = 64
  //               with feed-forward 256, the output (64 → 51)
  const double classifier_forward = 2.0 * (8.0 * 16384 * 128 * 128 + 4.0 * 16384 * 128 * 256);
  const double speech_input = 2.0 * 1950 * 160 * 64;
  const double speech_forward =
      speech_input + 4.0 * (8.0 * 1950 * 64 * 64 + 4.0 * 1950 * 64 * 256) + 2.0 * 1950 * 64 * 51;
  const std::vector<std::tuple<std::string, const char*, double, double>> models = {
      {"classifier", "tokens_per_s", 2048, 3 * classifier_forward},
      {"speech", "frames_per_s", 260, 3 * speech_forward - speech_input}};
  for (const auto& [model, rate, n, least_flops] : models) {
    CAPTURE(model);
    const std::string json = (dir.path / (model + ".json")).string();
    const Run run = tapestry_cli("bench train --device cpu --model " + model + " --repeats 1 --warmup 0 --types "
                                 "full,improved-clustered:clusters=4,topk=8 --json '" + json + "'", dir.path);
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    const nlohmann::json doc = read_json(json);
    check_document(doc, "train");
    CHECK(doc["config"]["model"] == model);
    REQUIRE(doc["rows"].size() == 2);
    for (const auto& row : doc["rows"]) {
      INFO(row.dump());
      CHECK(row["status"] == "ok");
      CHECK(row["n"] == n);
      for (const char* key : {"ms", rate, "peak_bytes", "activation_bytes", "loss", "parameters", "flops", "bound_ms",
                              "x_bound"})
        CHECK(row[key].is_number());
      CHECK(std::isfinite(row["loss"].get<double>()));
      CHECK(row["flops"].get<double>() >= least_flops);
      CHECK(row["x_bound"].get<double>() > 1);
    }
  }
  const Run refused = tapestry_cli("bench train --model tagger", dir.path);
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("--model") != std::string::npos);
}

TEST_CASE("bench: bad arguments are refused before anything runs") {
  TempDir dir;
  for (const char* args : {"bench attention --types fast", "bench attention --lengths 0", "bench ops --matmul 4x4",
                           "bench train --repeats 0", "bench attention --device cuda:99",
                           "bench ops --precision bf16"}) {
    const Run run = tapestry_cli(args, dir.path);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code != 0);
    CHECK(run.output.find("median of") == std::string::npos);  // no banner: nothing ran
  }
}

TEST_CASE("bench translate: steps of the translation model at the smoke preset's sizes") {
  TempDir dir;
  const Run run = tapestry_cli("bench translate --device cpu --preset smoke --batch 2 --source-length 5 "
                               "--target-length 3 --repeats 1 --warmup 0 --types "
                               "full,improved-clustered:clusters=2,topk=4,neural-clustering:clusters=2 --json '" +
                                   (dir.path / "translate.json").string() + "'",
                               dir.path);
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  const nlohmann::json doc = read_json(dir.path / "translate.json");
  check_document(doc, "translate");
  const nlohmann::json& config = doc["config"];
  CHECK(config["preset"] == "smoke");
  CHECK(config["d_model"] == 64);  // the smoke preset: 4 heads of 16
  CHECK(config["optimizer"].get<std::string>().rfind("adam:", 0) == 0);
  for (const char* key : {"vocabulary", "d_ff", "encoder_layers", "decoder_layers", "dropout", "label_smoothing",
                          "lr", "beta1", "beta2", "eps", "weight_decay"}) {
    INFO(key);
    CHECK(config[key].is_number());
  }
  const nlohmann::json& rows = doc["rows"];
  REQUIRE(rows.size() == 3);
  CHECK(rows[1]["type"] == "improved-clustered:clusters=2,topk=4");
  for (const auto& row : rows) {
    INFO(row.dump());
    CHECK(row["status"] == "ok");
    CHECK(row["batch"] == 2);
    CHECK(row["source_length"] == 5);
    CHECK(row["target_length"] == 3);
    for (const char* key : {"ms", "tokens_per_s", "peak_bytes", "activation_bytes", "loss", "ms_vs_full", "parameters",
                            "flops", "bound_ms", "x_bound"})
      CHECK(row[key].is_number());
    CHECK(std::isfinite(row["loss"].get<double>()));
    CHECK(row["activation_bytes"].get<double>() > 0);
  }
  // The same model apart from the encoder's attention: full and improved-clustered have one parameter
  // count, neural-clustering adds its centroids.
  CHECK(rows[0]["parameters"] == rows[1]["parameters"]);
  CHECK(rows[2]["parameters"].get<int64_t>() > rows[0]["parameters"].get<int64_t>());
}

TEST_CASE("bench translate: a bad preset or size is a usage error naming the flag") {
  TempDir dir;
  for (const char* flag : {"--preset huge", "--batch 0", "--source-length 0", "--target-length -3",
                           "--types fast", "--repeats 0"}) {
    const Run run = tapestry_cli(std::string("bench translate --device cpu ") + flag, dir.path);
    INFO(flag << "\n" << run.output);
    CHECK(run.exit_code == 2);
    const std::string name(flag, std::string(flag).find(' '));
    CHECK(run.output.find(name) != std::string::npos);
    CHECK(run.output.find("median of") == std::string::npos);  // no banner: nothing ran
  }
}

TEST_CASE("tapestry version names the CPU kernels' capability and what computes float32 and bfloat16 products; "
          "TAPESTRY_CPU_CAPABILITY lowers the capability, TAPESTRY_CPU_GEMM chooses the library, or each is refused") {
  TempDir dir;
  const std::string supported = tapestry::to_string(tapestry::cpu_capability_supported());
  const Run plain = tapestry_cli("version", dir.path);
  CHECK(plain.exit_code == 0);
  CHECK(plain.output.find("cpu kernels: " + supported + " (this CPU has " + supported) != std::string::npos);
  CHECK(plain.output.find(std::string("cpu bfloat16 products: ") +
                          (tapestry::cpu_bf16_gemm_available() ? "oneDNN" : "in float32")) != std::string::npos);
  CHECK(plain.output.find(std::string("cpu float32 products: ") +
                          (tapestry::cpu_onednn_available() ? "onednn" : "openblas")) != std::string::npos);
  const Run openblas = tapestry_cli("version", dir.path, "TAPESTRY_CPU_GEMM=openblas");
  CHECK(openblas.exit_code == 0);
  CHECK(openblas.output.find("cpu float32 products: openblas") != std::string::npos);
  const Run unknown_gemm = tapestry_cli("version", dir.path, "TAPESTRY_CPU_GEMM=mkl");
  CHECK(unknown_gemm.exit_code == 2);
  CHECK(unknown_gemm.output.find("tapestry: TAPESTRY_CPU_GEMM: expected openblas or onednn, got 'mkl'") !=
        std::string::npos);
  const Run lowered = tapestry_cli("version", dir.path, "TAPESTRY_CPU_CAPABILITY=baseline");
  CHECK(lowered.exit_code == 0);
  CHECK(lowered.output.find("cpu kernels: baseline (this CPU has " + supported) != std::string::npos);
  const Run unknown = tapestry_cli("version", dir.path, "TAPESTRY_CPU_CAPABILITY=sse9");
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.output.find("tapestry: TAPESTRY_CPU_CAPABILITY: expected baseline, avx2 or avx512, got 'sse9'") !=
        std::string::npos);
}
