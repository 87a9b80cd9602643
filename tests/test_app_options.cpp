// The option table (apps/options.h): one table gives the command line, the checks and the settings
// a checkpoint records.
#include <algorithm>
#include <string>
#include <vector>

#include "apps/options.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::app;
using namespace tapestry::testing;

namespace {

struct Toy {
  int64_t layers = 2;
  double dropout = 0.1;
  std::string attention = "full";
  std::string eval_attention;
  train::TrainOptions train;
};

OptionTable<Toy> toy_table() {
  Toy big;
  big.layers = 6;
  OptionTable<Toy> t({{"small", Toy()}, {"big", big}});
  t.add("--layers", &Toy::layers, "layers", between(1, 8), Recorded::Model);
  t.add("--dropout", &Toy::dropout, "dropout", in_range(0, 1, Bounds::HighOpen), Recorded::Training);
  add_attention_options(t, &Toy::attention, &Toy::eval_attention);
  add_train_options(t, &Toy::train);
  return t;
}

// Parses `args` (after the program name) with the table's flags; returns the options.
Toy parse(OptionTable<Toy>& table, std::vector<std::string> args) {
  CLI::App app("toy");
  table.add_to(app);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
  app.parse(args);
  return table.parsed();
}

}  // namespace

TEST_CASE("option table: presets, flags that override them, the last of a repeated flag") {
  OptionTable<Toy> t = toy_table();
  CHECK(parse(t, {}).layers == 2);
  t = toy_table();
  CHECK(parse(t, {"--preset", "big"}).layers == 6);
  t = toy_table();
  const Toy o = parse(t, {"--preset", "big", "--layers", "3", "--dropout", "0.5", "--layers", "4", "--seed", "7",
                          "--optimizer", "radam:lr=2e-4", "--eval-only"});
  CHECK(o.layers == 4);
  CHECK(o.dropout == 0.5);
  CHECK(o.train.seed == 7);
  CHECK(o.train.optimizer == "radam:lr=2e-4");
  CHECK(o.train.eval_only);
  t = toy_table();
  CHECK_THROWS_AS(parse(t, {"--preset", "huge"}), CLI::ValidationError);
  t = toy_table();
  CHECK_THROWS_AS(parse(t, {"--layers", "two"}), CLI::ParseError);
  t = toy_table();
  CHECK_THROWS_AS(parse(t, {"--bogus"}), CLI::ParseError);
}

TEST_CASE("option table: --help shows each flag's range and the presets' values") {
  OptionTable<Toy> t = toy_table();
  CLI::App app("toy");
  t.add_to(app);
  const std::string help = app.help();
  CHECK(help.find("(in [1, 8]) [small: 2, big: 6]") != std::string::npos);
  CHECK(help.find("[default: 0.1]") != std::string::npos);
  CHECK(help.find("--eval-attention") != std::string::npos);
  CHECK(help.find("--preset") != std::string::npos);
  CHECK(help.find("--save-best") != std::string::npos);
}

TEST_CASE("option table: checks name the flag; settings are keyed by flag") {
  const OptionTable<Toy> t = toy_table();
  Toy o;
  t.check(o);
  o.layers = 9;
  check_error([&] { t.check(o); }, {"--layers", "must lie in [1, 8], got 9"});
  o = Toy();
  o.dropout = 1;
  check_error([&] { t.check(o); }, {"--dropout", "must lie in [0, 1)", "got 1"});
  o = Toy();
  o.attention = "clustred";
  check_error([&] { t.check(o); }, {"--attention", "unknown attention type"});
  o = Toy();
  o.eval_attention = "clustered:clusters=x";
  check_error([&] { t.check(o); }, {"--eval-attention", "clusters"});
  o = Toy();
  CHECK(t.settings(o, Recorded::Model) == nlohmann::json{{"layers", 2}, {"attention", "full"}});
  CHECK(t.settings(o, Recorded::Training) == nlohmann::json{{"dropout", 0.1},
                                                            {"optimizer", o.train.optimizer},
                                                            {"schedule", "constant"},
                                                            {"clip", 0.0},
                                                            {"param-groups", ""},
                                                            {"seed", 0}});
}

TEST_CASE("attentions: --eval-attention defaults to the training one; a ClusterFormer only with its own") {
  const Attentions same = attentions("clustered:clusters=4", "");
  CHECK(same.eval == same.train);
  CHECK(same.train.to_string() == "clustered:clusters=4,bits=63,iterations=10");
  CHECK(attentions("full", "improved-clustered:clusters=3").eval.to_string().rfind("improved-clustered", 0) == 0);
  check_error([] { attentions("neural-clustering:clusters=2", "full"); }, {"--eval-attention", "ClusterFormer"});
  check_error([] { attentions("full", "neural-clustering:clusters=2"); }, {"--eval-attention", "neural-clustering"});
  check_error([] { attentions("ful", ""); }, {"--attention", "unknown attention type 'ful'"});
}
