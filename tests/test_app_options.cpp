// The option table (apps/options.h): one table gives the command line, the checks and the settings
// a checkpoint records.
#include <algorithm>
#include <optional>
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
  attention::AttentionConfig attention;
  std::optional<attention::AttentionConfig> eval_attention;
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
  CHECK(o.train.optimizer == optim::OptimizerConfig::parse("radam:lr=2e-4"));
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
  CHECK(t.settings(o, Recorded::Model) == nlohmann::json{{"layers", 2}, {"attention", "full"}});
  CHECK(t.settings(o, Recorded::Training) == nlohmann::json{{"dropout", 0.1},
                                                            {"optimizer", "adam:lr=0.001,beta1=0.9,beta2=0.999,"
                                                                          "eps=1e-08,weight_decay=0,amsgrad=0"},
                                                            {"schedule", "constant"},
                                                            {"clip", 0.0},
                                                            {"param-groups", ""},
                                                            {"precision", "float32"},
                                                            {"seed", 0}});
}

TEST_CASE("option table: configs are parsed once, as the command line is read, and carried typed") {
  OptionTable<Toy> t = toy_table();
  const Toy o = parse(t, {"--attention", "clustered:clusters=4", "--eval-attention", "full", "--optimizer",
                          "radam:lr=2e-4", "--schedule", "inverse-sqrt:warmup=10", "--param-groups", "*.bias:lr=0.1"});
  CHECK(o.attention.name() == "clustered");
  CHECK(o.attention.get("clusters") == 4);
  REQUIRE(o.eval_attention.has_value());
  CHECK(o.eval_attention->name() == "full");
  CHECK(o.train.optimizer.type == "radam");
  CHECK(o.train.optimizer.get("lr") == 2e-4);
  CHECK(o.train.schedule.get("warmup") == 10);
  REQUIRE(o.train.param_groups.groups.size() == 1);
  // Checkpoints record every config as its to_string(), every key spelled out.
  CHECK(t.settings(o, Recorded::Model).at("attention") == "clustered:clusters=4,bits=63,iterations=10");
  CHECK(t.settings(o, Recorded::Training).at("optimizer") == o.train.optimizer.to_string());
  // A recorded text reads back into the typed field.
  Toy recorded;
  t.apply(recorded, {{"attention", "improved-clustered:topk=8"}, {"optimizer", "sgd"}});
  CHECK(recorded.attention.get("topk") == 8);
  CHECK(recorded.train.optimizer.type == "sgd");
  check_error([&] { t.apply(recorded, {{"attention", "clustred"}}); }, {"--attention", "unknown attention type"});
  // --eval-attention '' is no evaluation attention: the training one.
  t = toy_table();
  CHECK_FALSE(parse(t, {"--eval-attention", ""}).eval_attention.has_value());

  // A text its parser refuses is a bad command line naming the flag and the parser's reason.
  const auto refused = [](std::vector<std::string> args, std::vector<std::string> parts) {
    OptionTable<Toy> table = toy_table();
    try {
      parse(table, args);
      FAIL("accepted " << args[0] << " " << args[1]);
    } catch (const CLI::ValidationError& e) {
      for (const std::string& part : parts) CHECK_MESSAGE(std::string(e.what()).find(part) != std::string::npos, e.what());
    }
  };
  refused({"--attention", "clustred"}, {"--attention", "unknown attention type 'clustred'"});
  refused({"--eval-attention", "clustered:clusters=x"}, {"--eval-attention", "clusters"});
  refused({"--optimizer", "adamm"}, {"--optimizer", "unknown optimizer 'adamm'"});
  refused({"--optimizer", "adam:lr=x"}, {"--optimizer", "lr", "'x'"});
  refused({"--optimizer", "adam:beta1=1"}, {"--optimizer", "beta1"});
  refused({"--schedule", "inverse-sqrt:warmup=1.5"}, {"--schedule", "warmup"});
  refused({"--param-groups", "*.bias:lr=x"}, {"--param-groups", "lr"});
}

TEST_CASE("attentions: --eval-attention defaults to the training one; a ClusterFormer only with its own") {
  using attention::AttentionConfig;
  const AttentionConfig neural = AttentionConfig::parse("neural-clustering:clusters=2");
  const Attentions same = attentions(AttentionConfig::parse("clustered:clusters=4"), std::nullopt);
  CHECK(same.eval == same.train);
  CHECK(same.train.to_string() == "clustered:clusters=4,bits=63,iterations=10");
  CHECK(attentions(AttentionConfig(), AttentionConfig::parse("improved-clustered:clusters=3")).eval.name() ==
        "improved-clustered");
  CHECK(attentions(neural, neural).eval == neural);
  check_error([&] { attentions(neural, AttentionConfig()); }, {"--eval-attention", "ClusterFormer"});
  check_error([&] { attentions(AttentionConfig(), neural); }, {"--eval-attention", "neural-clustering"});
}

TEST_CASE("option table: numbers, switches and lists are read whole; '' is no number") {
  for (const std::string bad : {"", " 1", "1 ", "0.1x", "x", "1e999", "--"}) {
    CAPTURE(bad);
    CHECK(!number_problem(bad).empty());
  }
  for (const std::string good : {"0", "-2.5", "1e-3", "0x1p-2", ".5"}) CHECK(number_problem(good).empty());
  for (const std::string bad : {"2", "-1", "", "maybe", "TRUE"}) CHECK(!switch_problem(bad).empty());
  for (const std::string good : {"true", "false", "1", "0", "yes", "no", "on", "off"}) CHECK(switch_problem(good).empty());
  const CLI::Validator item = integer_check<int64_t>(1);
  CHECK(list_problem("5,10,20", item).empty());
  CHECK(list_problem("5,", item).find("empty item") != std::string::npos);
  CHECK(list_problem("5,,10", item).find("empty item") != std::string::npos);
  CHECK(list_problem("", item).find("empty item") != std::string::npos);
  CHECK(list_problem("5,0", item).find("item '0'") != std::string::npos);

  // Through the table: every flag of a number type is checked the same way.
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--dropout", ""}, {"--dropout", "0.1x"}, {"--eval-only=2"}, {"--clip", ""}, {"--clip", "nan0"}}) {
    CAPTURE(args[0]);
    OptionTable<Toy> t = toy_table();
    CHECK_THROWS_AS(parse(t, args), CLI::ParseError);
  }
  OptionTable<Toy> t = toy_table();
  CHECK(parse(t, {"--eval-only=false", "--dropout", "1e-1"}).dropout == 0.1);
}

TEST_CASE("option table: a command takes a chosen set of its flags, and knows which were given") {
  OptionTable<Toy> t = toy_table();
  CLI::App app("toy");
  t.add_to(app, {"--dropout", "--resume"});
  const std::string help = app.help();
  CHECK(help.find("--dropout") != std::string::npos);
  CHECK(help.find("--layers") == std::string::npos);
  CHECK(help.find("--preset") == std::string::npos);
  std::vector<std::string> args = {"0.2", "--dropout"};  // reversed, as CLI11 takes them
  app.parse(args);
  CHECK(t.given("--dropout"));
  CHECK(!t.given("--layers"));
  CHECK(t.parsed().dropout == 0.2);
  std::vector<std::string> layers = {"3", "--layers"};
  CLI::App other("toy");
  OptionTable<Toy> u = toy_table();
  u.add_to(other, {"--dropout"});
  CHECK_THROWS_AS(other.parse(layers), CLI::ParseError);
  CLI::App misspelt("toy");
  CHECK_THROWS_AS(toy_table().add_to(misspelt, {"--dropuot"}), Error);
}
