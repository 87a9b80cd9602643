// `tapestry reverse`, the smallest app on the training harness: it learns (far above chance), and its
// command line is the harness's.

#include <cmath>
#include <cstdlib>
#include <tuple>

#include "apps/reverse.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

TEST_CASE("reverse: learns to write 8 symbols backwards (chance: 0.1 per token)") {
  app::ReverseOptions o;
  o.length = 8;
  o.train.steps = 200;
  o.train.threads = 1;
  o.train.progress = false;
  const train::Report r = app::run_reverse(o);
  CHECK(r.steps == 200);
  CHECK(r.metric("token_accuracy") >= 0.9);
  CHECK(r.metric("sequence_accuracy") >= 0.5);
  CHECK(r.best_metric == "token_accuracy");
}

TEST_CASE("reverse: every attention kind trains a few steps") {
  for (const attention::Kind* kind : attention::kinds()) {
    CAPTURE(kind->name());
    app::ReverseOptions o;
    o.length = 6;
    o.train.steps = 2;
    o.train.threads = 1;
    o.train.progress = false;
    o.attention = attention::AttentionConfig::parse(kind->name());
    const train::Report r = app::run_reverse(o);
    CHECK(r.steps == 2);
    CHECK(std::isfinite(r.metric("loss")));
  }
}

TEST_CASE("reverse command line: --help, --json, a bad flag") {
  TempDir dir;
  const auto run = [&](const std::string& args) { return run_shell(dir, std::string(TAPESTRY_CLI) + " " + args); };
  auto [code, out, err] = run("reverse --help");
  CHECK(code == 0);
  CHECK(out.find("--save-best") != std::string::npos);
  std::tie(code, out, err) = run("reverse --length 4 --layers 1 --steps 3 --batch 2 --eval-batches 1 --device cpu --json");
  CHECK(code == 0);
  const nlohmann::json result = nlohmann::json::parse(out);
  CHECK(result["task"] == "reverse");
  CHECK(result["steps"] == 3);
  CHECK(result.contains("token_accuracy"));
  CHECK(err.find("reverse: N = 4, step 3, full: token accuracy") != std::string::npos);
  std::tie(code, out, err) = run("reverse --symbols 1");
  CHECK(code == 2);
  CHECK(err.find("--symbols") != std::string::npos);
}
