// The key grammar every config shares (core/config_text.h): a type's keys generate its parsing,
// printing, range checks and help text. Attention, optimizer and schedule configs are tested on it
// in tests/test_attention.cpp and tests/test_optim_config.cpp.
#include <cmath>
#include <limits>

#include "core/config_text.h"
#include "nn/attention/config.h"
#include "optim/config.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A type of each kind of key: an integer, a number with open ends, a named value.
const std::vector<ConfigKey>& keys() {
  static const std::vector<ConfigKey> k{
      {"clusters", 15, 1, 100, "C, query clusters"},
      number_key("lr", 1e-3, 0, kInf, Ends::LowOpen, "the learning rate"),
      number_key("beta", 0.9, 0, 1, Ends::HighOpen, "a decay"),
      {"losses", 2, 0, 0, "the losses' form", {"projected", "printed", "cosine"}},
  };
  return k;
}

std::vector<double> parse(const std::string& text) {
  return parse_config_values(keys(), split_config(text, "test config"), "test config '" + text + "'");
}

}  // namespace

TEST_CASE("config keys: defaults, given values in any order, names by index") {
  CHECK(parse("t") == std::vector<double>{15, 1e-3, 0.9, 2});
  CHECK(parse("t:losses=printed,clusters=7,lr=2e-4") == std::vector<double>{7, 2e-4, 0.9, 1});
  CHECK(parse("t:clusters=1e1")[0] == 10);  // a whole number in any notation
  CHECK(find_config_key(keys(), "beta") == 2);
  CHECK(find_config_key(keys(), "gamma") == -1);
}

TEST_CASE("config keys: printing reads back, and skips what `shown` refuses") {
  const std::vector<double> v = parse("t:lr=0.0002,losses=projected");
  const std::string text = print_config("t", keys(), v);
  CHECK(text == "t:clusters=15,lr=0.0002,beta=0.9,losses=projected");
  CHECK(parse(text) == v);
  const auto integers_only = [](const ConfigKey& k, double) { return k.key == "clusters"; };
  CHECK(print_config("t", keys(), v, integers_only) == "t:clusters=15");
  CHECK(print_config("t", {}, {}) == "t");
}

TEST_CASE("config keys: ranges with open and closed ends, and help text") {
  CHECK(config_range(keys()[0]) == "[1, 100]");
  CHECK(config_range(keys()[1]) == "(0, inf)");
  CHECK(config_range(keys()[2]) == "[0, 1)");
  CHECK(config_range(keys()[3]) == "projected, printed, cosine");
  CHECK(config_defaults(keys()) == "clusters=15,lr=0.001,beta=0.9,losses=cosine");
  const std::string help = config_keys_help(keys(), "  ");
  CHECK(help.find("  clusters=15  ([1, 100]) C, query clusters\n") != std::string::npos);
  CHECK(help.find("  lr=0.001  ((0, inf)) the learning rate\n") != std::string::npos);
  CHECK(help.find("  losses=cosine  (projected, printed, cosine) the losses' form\n") != std::string::npos);
  CHECK(join_names({}) == "none");
}

TEST_CASE("config keys: clear errors for an unknown key, a bad value and one out of range") {
  check_error([] { parse("t:topk=3"); }, {"test config 't:topk=3'", "'topk' is not a setting of t",
                                          "(settings: clusters, lr, beta, losses)"});
  check_error([] { parse("t:clusters=many"); }, {"clusters must be a non-negative integer, got 'many'"});
  check_error([] { parse("t:clusters=1.5"); }, {"clusters must be a non-negative integer, got '1.5'"});
  check_error([] { parse("t:clusters=-2"); }, {"clusters must be a non-negative integer, got '-2'"});
  check_error([] { parse("t:clusters=0"); }, {"clusters must be in [1, 100], got 0"});
  check_error([] { parse("t:clusters=101"); }, {"clusters must be in [1, 100], got 101"});
  check_error([] { parse("t:lr=0"); }, {"lr must be in (0, inf), got 0"});
  check_error([] { parse("t:lr=fast"); }, {"lr must be a finite number, got 'fast'"});
  check_error([] { parse("t:lr=inf"); }, {"lr must be a finite number"});
  check_error([] { parse("t:beta=1"); }, {"beta must be in [0, 1), got 1"});
  check_error([] { parse("t:losses=exact"); }, {"losses must be one of projected, printed, cosine, got 'exact'"});
  check_error([] { check_config_value(keys()[0], 2.5, "op"); }, {"op", "clusters must be in [1, 100], got 2.5"});
  check_error([] { check_config_value(keys()[3], 3, "op"); }, {"losses must be one of"});
}

TEST_CASE("config keys: attention kinds, optimizers and schedules share the grammar and its help") {
  // One message shape for an out-of-range key, whichever config it is in.
  check_error([] { attention::AttentionConfig::parse("clustered:clusters=0"); }, {"clusters must be in [1, 65536], got 0"});
  check_error([] { optim::OptimizerConfig::parse("sgd:momentum=1"); }, {"momentum must be in [0, 1), got 1"});
  check_error([] { optim::ScheduleConfig::parse("cosine:min_lr=-1"); }, {"min_lr must be in [0, inf), got -1"});
  // Help text comes from the key tables.
  CHECK(optim::optimizers_help().find("radam:lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0,pytorch=0") !=
        std::string::npos);
  CHECK(optim::schedules_help() == "constant; inverse-sqrt:warmup=4000; cosine:total=0,min_lr=0,warmup=0; "
                                   "plateau:factor=0.1,patience=10,min_lr=0");
  CHECK(optim::describe_optimizers().find("  beta2=0.999  ([0, 1))") != std::string::npos);
  CHECK(optim::describe_schedules().find("  factor=0.1  ((0, 1))") != std::string::npos);
}
