// The profiler (core/profiler.h): what it counts for a known graph, scopes, that it records nothing
// when off, its JSON and Chrome trace, and --profile on an app and a benchmark (train/profiling.h).

#include <chrono>
#include <string>
#include <thread>
#include <tuple>

#include "core/profiler.h"
#include "tests/testing.h"
#include "train/profiling.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// The row of `name` in `phase`; FAILs (and returns an empty row) when absent.
ProfileRow row_of(const std::vector<ProfileRow>& rows, const std::string& name, ProfilePhase phase) {
  for (const ProfileRow& row : rows)
    if (row.name == name && row.phase == phase) return row;
  FAIL("no row '" << name << "' in phase " << to_string(phase));
  return {};
}

bool has_row(const std::vector<ProfileRow>& rows, const std::string& name, ProfilePhase phase) {
  for (const ProfileRow& row : rows)
    if (row.name == name && row.phase == phase) return true;
  return false;
}

// sum(matmul(a, b)) and its backward, a (3, 4) and b (4, 5), in one session of `profiler`.
void matmul_step(Profiler& profiler) {
  Generator gen(1);
  const Tensor a = randn({3, 4}, gen).set_requires_grad(true), b = randn({4, 5}, gen).set_requires_grad(true);
  const ProfileSession on(profiler);
  sum(matmul(a, b)).backward();
}

struct Run {
  int code = -1;
  std::string out, err;
};

// Runs the built `tapestry` with `args` (shell words): exit code, stdout, stderr.
Run run_cli(const TempDir& dir, const std::string& args) {
  const auto result = run_shell(dir, std::string(TAPESTRY_CLI) + " " + args);
  return {std::get<0>(result), std::get<1>(result), std::get<2>(result)};
}

}  // namespace

TEST_CASE("profiler: matmul forward and backward with their calls, FLOPs 2·m·n·k per product, bytes, and rows that sum to the profiled time") {
  Profiler profiler;
  matmul_step(profiler);
  const ProfileReport report = profiler.report();
  CHECK(report.sessions == 1);
  const ProfileRow forward = row_of(report.rows, "matmul", ProfilePhase::Forward);
  CHECK(forward.calls == 1);
  CHECK(forward.flops == 2.0 * 3 * 4 * 5);
  CHECK(forward.bytes >= 3 * 5 * 4);  // its (3, 5) float output
  const ProfileRow backward = row_of(report.rows, "matmul", ProfilePhase::Backward);
  CHECK(backward.calls == 1);
  CHECK(backward.flops == 2 * (2.0 * 3 * 4 * 5));  // dA = dY·Bᵀ and dB = Aᵀ·dY
  CHECK(row_of(report.rows, "sum", ProfilePhase::Forward).calls == 1);
  CHECK(row_of(report.rows, "sum", ProfilePhase::Backward).calls == 1);
  CHECK(row_of(report.rows, "(autograd)", ProfilePhase::Backward).calls == 1);
  CHECK(row_of(report.rows, "(outside ops)", ProfilePhase::Outside).flops == 0);

  double total = 0;
  for (const ProfileRow& row : report.rows) total += row.seconds;
  CHECK(report.seconds > 0);
  CHECK(total == doctest::Approx(report.seconds).epsilon(1e-6));
  for (size_t i = 1; i < report.rows.size(); ++i) CHECK(report.rows[i - 1].seconds >= report.rows[i].seconds);

  matmul_step(profiler);  // a second session adds to the first
  CHECK(profiler.report().sessions == 2);
  CHECK(row_of(profiler.report().rows, "matmul", ProfilePhase::Forward).calls == 2);
}

TEST_CASE("profiler: memory at the peak, charged to the ops whose blocks were held then; memory from before the session not counted") {
  constexpr int64_t kib4 = 1024 * 4;  // one (1024) float32 tensor
  const Tensor x = ones({1024});     // before the session
  Profiler profiler;
  {
    const ProfileSession on(profiler);
    const Tensor a = exp(x);  // held to the end
    {
      const Tensor b = add(a, a);
      const Tensor c = mul(b, b);  // a, b and c held: the peak
    }
    const Tensor d = neg(a);  // a and d held: below the peak
  }
  const ProfileReport report = profiler.report();
  CHECK(report.peak_bytes == 3 * kib4);
  CHECK(row_of(report.rows, "exp", ProfilePhase::Forward).peak_bytes == kib4);
  CHECK(row_of(report.rows, "add", ProfilePhase::Forward).peak_bytes == kib4);
  CHECK(row_of(report.rows, "mul", ProfilePhase::Forward).peak_bytes == kib4);
  CHECK(row_of(report.rows, "neg", ProfilePhase::Forward).peak_bytes == 0);

  {  // a lower peak in a later session leaves the account of the highest one
    const ProfileSession on(profiler);
    const Tensor e = neg(x);
  }
  CHECK(profiler.report().peak_bytes == 3 * kib4);
  CHECK(row_of(profiler.report().rows, "neg", ProfilePhase::Forward).peak_bytes == 0);
  CHECK(to_json(profiler.report())["peak_bytes"] == 3 * kib4);
  CHECK(to_table(profiler.report()).find("MiB peak") != std::string::npos);
}

TEST_CASE("profiler: a backward pass's peak is charged to the closures that allocated it") {
  Generator gen(3);
  const Tensor a = randn({64, 64}, gen).set_requires_grad(true), b = randn({64, 64}, gen).set_requires_grad(true);
  Profiler profiler;
  {
    const ProfileSession on(profiler);
    sum(matmul(a, b)).backward();
  }
  const ProfileReport report = profiler.report();
  int64_t charged = 0;
  for (const ProfileRow& row : report.rows) charged += row.peak_bytes;
  CHECK(report.peak_bytes > 0);
  CHECK(charged == report.peak_bytes);  // every byte at the peak has its row
}

TEST_CASE("profiler: linear's GEMM and output are charged to linear, not to the views it takes and returns") {
  Generator gen(2);
  const Tensor x = randn({2, 3, 4}, gen), w = randn({6, 4}, gen).set_requires_grad(true), b = randn({6}, gen);
  Profiler profiler;
  {
    const ProfileSession on(profiler);
    linear(x, w, b);
  }
  const ProfileReport report = profiler.report();
  const ProfileRow row = row_of(report.rows, "linear", ProfilePhase::Forward);
  CHECK(row.flops == 2.0 * 6 * 4 * 6);
  CHECK(row.bytes >= 6 * 6 * 4);  // its output, allocated before the views it reads and returns
  CHECK(!has_row(report.rows, "view", ProfilePhase::Forward));  // views end no interval
  for (const ProfileRow& row : report.rows)
    if (row.name != "linear") CHECK(row.flops == 0);
}

TEST_CASE("profiler: off, nothing is recorded; a second session on one thread is refused") {
  Profiler profiler;
  Generator gen(3);
  const Tensor a = randn({3, 4}, gen).set_requires_grad(true), b = randn({4, 2}, gen);
  sum(matmul(a, b)).backward();  // no session
  profile_flops(1e9);
  { const ProfileScope scope("nothing"); }
  ProfileReport report = profiler.report();
  CHECK(report.rows.empty());
  CHECK(report.scopes.empty());
  CHECK(report.sessions == 0);

  {
    const ProfileSession on(profiler);
    Profiler other;
    check_error([&] { ProfileSession again(other); }, {"ProfileSession", "already active"});
  }
  matmul(a, b);  // after the session: not counted
  report = profiler.report();
  CHECK(!has_row(report.rows, "matmul", ProfilePhase::Forward));
  CHECK(report.sessions == 1);
}

TEST_CASE("profiler: scopes nest; time in a scope that no op reports is charged to its name") {
  Generator gen(4);
  const Tensor x = randn({2}, gen);
  Profiler profiler;
  {
    const ProfileSession on(profiler);
    const ProfileScope outer("outer");
    {
      const ProfileScope inner("inner");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    profile_flops(7);
    add(x, x);
  }
  const ProfileReport report = profiler.report();
  const ProfileRow outer = row_of(report.scopes, "outer", ProfilePhase::Outside);
  const ProfileRow inner = row_of(report.scopes, "inner", ProfilePhase::Outside);
  CHECK(outer.calls == 1);
  CHECK(inner.calls == 1);
  CHECK(inner.seconds >= 0.005);
  CHECK(outer.seconds >= inner.seconds);
  CHECK(row_of(report.rows, "inner", ProfilePhase::Outside).seconds >= 0.005);
  CHECK(!has_row(report.rows, "outer", ProfilePhase::Forward));
  CHECK(row_of(report.rows, "add", ProfilePhase::Forward).flops == 7);  // the flops reported before it
}

TEST_CASE("profiler: the table, JSON and Chrome trace files, and an unwritable path refused naming it") {
  TempDir dir;
  const train::ProfileOutputs outputs{dir.file("profile.txt"), dir.file("profile.json"), dir.file("trace.json")};
  const std::unique_ptr<Profiler> profiler = train::make_profiler(outputs, Device());
  REQUIRE(profiler);
  matmul_step(*profiler);
  train::write_profile(outputs, *profiler);

  const std::string table = read_text(outputs.table);
  CHECK(table.find("matmul") != std::string::npos);
  CHECK(table.find("GFLOP/s") != std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(read_text(outputs.json));
  bool found = false;
  for (const auto& row : json.at("rows"))
    if (row.at("name") == "matmul" && row.at("phase") == "backward") found = row.at("flops") == 240.0;
  CHECK(found);
  const nlohmann::json trace = nlohmann::json::parse(read_text(outputs.trace));
  bool traced = false;
  for (const auto& event : trace.at("traceEvents")) {
    CHECK(event.at("ph") == "X");
    CHECK(event.at("dur").get<double>() >= 0);
    traced = traced || (event.at("name") == "matmul" && event.at("cat") == "forward");
  }
  CHECK(traced);

  CHECK(train::make_profiler({}, Device()) == nullptr);  // no file asked for: no profiling
  const std::string missing = dir.file("no-such-folder/profile.txt");
  check_error([&] { train::make_profiler({missing, "", ""}, Device()); }, {"--profile", missing});
  check_error([&] { train::make_profiler({"", "", missing}, Device()); }, {"--profile-trace", missing});
}

TEST_CASE("copy-task --profile: the table names matmul and linear; an unwritable --profile exits 1 naming the path") {
  TempDir dir;
  const std::string app =
      "copy-task --preset smoke --length 5 --layers 1 --batch 4 --steps 2 --eval-every 0 --attention clustered:clusters=3 ";
  const Run run = run_cli(dir, app + "--profile " + dir.file("p.txt") + " --profile-json " + dir.file("p.json"));
  INFO("stderr: " << run.err);
  REQUIRE(run.code == 0);
  const std::string table = read_text(dir.file("p.txt"));
  CHECK(table.find("matmul") != std::string::npos);
  CHECK(table.find("linear") != std::string::npos);
  CHECK(table.find("optimizer") != std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(read_text(dir.file("p.json")));
  CHECK(json.at("sessions") == 2);  // one per training step; evaluation is not profiled

  const std::string missing = dir.file("missing/p.txt");
  const Run bad = run_cli(dir, app + "--profile " + missing);
  CHECK(bad.code == 1);
  CHECK(bad.err.find(missing) != std::string::npos);
  CHECK(bad.err.find("--profile") != std::string::npos);
}

TEST_CASE("classify and cluster refuse --profile where it would profile nothing or several runs into one file") {
  TempDir dir;
  const Run bow = run_cli(dir, "classify --baseline bow --profile " + dir.file("p.txt"));
  CHECK(bow.code == 2);
  CHECK(bow.err.find("--profile") != std::string::npos);
  const Run folds = run_cli(dir, "classify --folds 3 --profile-json " + dir.file("p.json"));
  CHECK(folds.code == 2);  // checked with the command line
  CHECK(folds.err.find("--folds") != std::string::npos);
  const Run kmeans = run_cli(dir, "cluster --method kmeans --profile-trace " + dir.file("t.json"));
  CHECK(kmeans.code == 2);
  CHECK(kmeans.err.find("--profile-trace") != std::string::npos);
}

TEST_CASE("bench train --profile: the timed steps are profiled, the warm-up is not") {
  TempDir dir;
  const Run run = run_cli(dir, "bench train --copy-lengths 3 --types full --batch 2 --repeats 2 --warmup 1 "
                               "--profile-json " + dir.file("p.json"));
  INFO("stderr: " << run.err);
  REQUIRE(run.code == 0);
  const nlohmann::json json = nlohmann::json::parse(read_text(dir.file("p.json")));
  CHECK(json.at("sessions") == 2);
  bool linear = false;
  for (const auto& row : json.at("rows")) linear = linear || (row.at("name") == "linear" && row.at("flops") > 0);
  CHECK(linear);
}
