// Helpers shared by the test suites.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <sstream>
#include <system_error>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/datasets.h"
#include "tapestry.h"

namespace tapestry::testing {

// Whether the CI variable is set (to anything but "", "0" or "false").
inline bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && *ci && std::string(ci) != "false" && std::string(ci) != "0";
}

// Whether `make data` has prepared the set `name`; otherwise one line says that `app`'s test was
// skipped (outside CI), or the test fails (in CI).
inline bool dataset_ready(const std::string& name, const std::string& app) {
  if (data::dataset_prepared(name)) return true;
  if (in_ci()) {
    FAIL_CHECK("data set '" << name << "' is not prepared in " << data::data_directory() << "; CI runs `make data` first");
  } else {
    std::cout << app << ": skipped a test on " << name << ": not prepared in " << data::data_directory()
              << " (`make data` prepares it)" << std::endl;
  }
  return false;
}

// A float64 tensor of `shape` with values uniform in [lo, hi), from a fixed seed.
inline Tensor uniform(const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Generator gen(seed);
  return rand(shape, gen, {DType::Float64}) * (hi - lo) + lo;
}

// Values of a and b agree within atol + rtol·|b| everywhere (and shapes match).
inline void check_close(const Tensor& a, const Tensor& b, double atol = 1e-10, double rtol = 1e-10) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i << ": " << x[i] << " vs " << y[i]);
    CHECK(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]));
  }
}

// gradcheck that reports its worst element on failure.
inline void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                            const std::vector<Tensor>& inputs, GradcheckOptions options = {}) {
  const GradcheckResult result = gradcheck(fn, inputs, options);
  INFO(result.report);
  CHECK(result.ok);
}

// `call` throws tapestry::Error whose message contains every one of `parts`.
template <class Call>
void check_error(Call&& call, const std::vector<std::string>& parts) {
  try {
    call();
    FAIL("expected tapestry::Error");
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const auto& part : parts) {
      INFO("message: " << message << "\nexpected to contain: " << part);
      CHECK(message.find(part) != std::string::npos);
    }
  }
}

// A fresh directory under $TMPDIR (or /tmp), removed with its contents at the end of the scope.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/tapestry-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // The names in the directory, sorted.
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

// The bytes of the file at `path` ("" when it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `command` in the shell (a list or a pipeline, captured whole) with its stdout and stderr in
// the files `out` and `err` of `dir`: {exit status, stdout, stderr}. A program the shell ran that
// dies of signal S gives 128 + S; the status is -1 when the shell itself is killed, which
// WEXITSTATUS alone would read as 0.
inline std::tuple<int, std::string, std::string> run_shell(const TempDir& dir, const std::string& command) {
  const int status = std::system(("{ " + command + "\n} >" + dir.file("out") + " 2>" + dir.file("err")).c_str());
  const int code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return {code, read_text(dir.file("out")), read_text(dir.file("err"))};
}

// The records of a JSON-lines training log (--log) whose "event" is `event`, in order.
inline std::vector<nlohmann::json> log_records(const std::string& path, const std::string& event) {
  std::ifstream in(path);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json record = nlohmann::json::parse(line);
    if (record.value("event", std::string()) == event) records.push_back(std::move(record));
  }
  return records;
}

// Checks what `tapestry inspect` needs of a logged inspection (the schema of docs/INSPECT.md in
// brief): the losses, `layers` layers each with gradients, clusters, and no attention maps.
inline void check_logged_inspection(const nlohmann::json& inspection, size_t layers, size_t losses) {
  CHECK(inspection.at("losses").size() == losses);
  REQUIRE(inspection.at("layers").size() == layers);
  for (const nlohmann::json& layer : inspection.at("layers")) {
    CHECK_FALSE(layer.at("gradients").empty());
    CHECK_FALSE(layer.at("clusters").empty());
  }
  CHECK_FALSE(inspection.contains("maps"));
}

}  // namespace tapestry::testing
