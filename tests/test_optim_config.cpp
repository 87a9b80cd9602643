// Optimizers and schedules chosen by a string (optim/config.h), and the config-text syntax they
// share with attention configs (core/config_text.h).
#include <cmath>
#include <functional>
#include <memory>

#include "core/config_text.h"
#include "optim/config.h"
#include "optim/adam.h"
#include "optim/radam.h"
#include "optim/sgd.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using optim::OptimizerConfig;
using optim::ScheduleConfig;

TEST_CASE("config text: the type, the items in order, and the syntax errors") {
  const ConfigText c = split_config("radam:lr=2e-4,beta2=0.98", "test");
  CHECK(c.type == "radam");
  REQUIRE(c.items.size() == 2);
  CHECK(c.items[0] == std::pair<std::string, std::string>{"lr", "2e-4"});
  CHECK(c.items[1] == std::pair<std::string, std::string>{"beta2", "0.98"});
  CHECK(split_config("constant", "test").items.empty());
  check_error([] { split_config("", "test"); }, {"test", "type name"});
  check_error([] { split_config(":lr=1", "test"); }, {"test", "type name"});
  check_error([] { split_config("adam:lr", "test"); }, {"test", "key=value", "'lr'"});
  check_error([] { split_config("adam:lr=", "test"); }, {"test", "key=value"});
  check_error([] { split_config("adam:=3", "test"); }, {"test", "key=value"});
  check_error([] { split_config("adam:lr=1,lr=2", "test"); }, {"test", "'lr' is given twice"});
  for (const char* text : {"full:", "clustered:clusters=5,", "adam:lr=1,,beta1=0.9", "adam:,lr=1"}) {
    CAPTURE(text);
    check_error([&] { split_config(text, "test"); }, {"test", "expected key=value, got ''"});
  }
  CHECK(parse_config_number("2e-4", "test", "lr") == 2e-4);
  check_error([] { parse_config_number("2e-4x", "test", "lr"); }, {"lr", "finite number", "'2e-4x'"});
  check_error([] { parse_config_number("inf", "test", "lr"); }, {"lr", "finite number"});
  check_error([] { parse_config_number("1e999", "test", "lr"); }, {"lr", "finite number"});
  // The shortest text that reads back exactly.
  CHECK(format_config_number(0.0002) == "0.0002");
  CHECK(format_config_number(1e-8) == "1e-08");
  CHECK(format_config_number(4000) == "4000");
  CHECK(format_config_number(0.1 + 0.2) == "0.30000000000000004");
  for (const double v : {1.0 / 3, 2e-4, 0.999, 123456.789, 5e-324})
    CHECK(std::strtod(format_config_number(v).c_str(), nullptr) == v);
}

TEST_CASE("optimizer config: every key printed with its default, round trip, the optimizer built") {
  CHECK(OptimizerConfig::parse("adam").to_string() ==
        "adam:lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0,amsgrad=0");
  CHECK(OptimizerConfig::parse("adamw").to_string() ==
        "adamw:lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0.01,amsgrad=0");
  CHECK(OptimizerConfig::parse("radam:pytorch=1").to_string() ==
        "radam:lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0,pytorch=1");
  CHECK(OptimizerConfig::parse("sgd:momentum=0.9,nesterov=1").to_string() ==
        "sgd:lr=0.01,momentum=0.9,weight_decay=0,nesterov=1");
  for (const char* text : {"radam:lr=2e-4", "adam:beta2=0.98,lr=3e-4", "sgd:lr=0.1", "adamw:weight_decay=0",
                           "adam:amsgrad=1", "radam:pytorch=1"}) {
    CAPTURE(text);
    const OptimizerConfig c = OptimizerConfig::parse(text);
    CHECK(OptimizerConfig::parse(c.to_string()) == c);
    CHECK(OptimizerConfig::parse(c.to_string()).to_string() == c.to_string());
  }
  const OptimizerConfig radam = OptimizerConfig::parse("radam:lr=2e-4,beta2=0.98");
  CHECK(radam.get("lr") == 2e-4);
  CHECK(radam.get("beta2") == 0.98);
  CHECK(radam.get("beta1") == 0.9);

  // The optimizer built from a config updates a parameter exactly as one built from its options.
  using Build = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const auto same_updates = [](const char* text, const Build& by_hand) {
    CAPTURE(text);
    Tensor a = uniform({5}, 1), b = clone(a);
    a.set_requires_grad(true);
    b.set_requires_grad(true);
    const auto x = optim::make_optimizer(OptimizerConfig::parse(text), {a});
    const auto y = by_hand({b});
    CHECK(std::string(x->name()) == y->name());
    for (int step = 0; step < 3; ++step)
      for (const auto& [p, opt] : {std::pair{a, x.get()}, std::pair{b, y.get()}}) {
        opt->zero_grad();
        sum(p * p * p).backward();
        opt->step();
      }
    check_close(a, b, 0, 0);
  };
  same_updates("sgd:lr=0.1,momentum=0.9,nesterov=1", [](std::vector<Tensor> p) {
    optim::SGDOptions o;
    o.lr = 0.1, o.momentum = 0.9, o.nesterov = optim::Nesterov::Yes;
    return std::make_unique<optim::SGD>(p, o);
  });
  same_updates("adam:lr=0.01,eps=1e-6", [](std::vector<Tensor> p) {
    optim::AdamOptions o;
    o.lr = 0.01, o.eps = 1e-6;
    return std::make_unique<optim::Adam>(p, o);
  });
  same_updates("adamw:lr=0.01,weight_decay=0.1", [](std::vector<Tensor> p) {
    optim::AdamWOptions o;
    o.lr = 0.01, o.weight_decay = 0.1;
    return std::make_unique<optim::AdamW>(p, o);
  });
  same_updates("radam:lr=0.01,beta2=0.98", [](std::vector<Tensor> p) {
    optim::RAdamOptions o;
    o.lr = 0.01, o.betas = {0.9, 0.98};
    return std::make_unique<optim::RAdam>(p, o);
  });
  same_updates("adam:lr=0.01,amsgrad=1", [](std::vector<Tensor> p) {
    optim::AdamOptions o;
    o.lr = 0.01, o.amsgrad = optim::AmsGrad::Yes;
    return std::make_unique<optim::Adam>(p, o);
  });
  same_updates("adamw:lr=0.01,amsgrad=1", [](std::vector<Tensor> p) {
    optim::AdamWOptions o;
    o.lr = 0.01, o.amsgrad = optim::AmsGrad::Yes;
    return std::make_unique<optim::AdamW>(p, o);
  });
  same_updates("radam:lr=0.01,beta2=0.98,pytorch=1", [](std::vector<Tensor> p) {
    optim::RAdamOptions o;
    o.lr = 0.01, o.betas = {0.9, 0.98}, o.convention = optim::RAdamConvention::PyTorch;
    return std::make_unique<optim::RAdam>(p, o);
  });
  // A config saved before amsgrad / pytorch existed parses to their defaults.
  CHECK(OptimizerConfig::parse("adam:lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0").get("amsgrad") == 0);
}

TEST_CASE("optimizer config: unknown types and keys, malformed and out-of-range values") {
  check_error([] { OptimizerConfig::parse("adamm"); }, {"optimizer config 'adamm'", "unknown optimizer", "radam"});
  check_error([] { OptimizerConfig::parse("adam:momentum=0.9"); },
              {"'momentum' is not a setting of adam", "beta1"});
  check_error([] { OptimizerConfig::parse("adam:lr=fast"); }, {"lr", "'fast'"});
  check_error([] { OptimizerConfig::parse("adam:lr=-1"); }, {"optimizer config 'adam:lr=-1'", "lr must be in [0, inf), got -1"});
  check_error([] { OptimizerConfig::parse("adam:beta1=1"); }, {"beta1 must be in [0, 1), got 1"});
  check_error([] { OptimizerConfig::parse("adam:eps=0"); }, {"eps must be in (0, inf), got 0"});
  check_error([] { OptimizerConfig::parse("sgd:nesterov=0.5"); }, {"nesterov", "non-negative integer"});
  check_error([] { OptimizerConfig::parse("sgd:nesterov=1"); }, {"nesterov=1 needs momentum > 0"});
  check_error([] { OptimizerConfig::parse("adam:amsgrad=2"); }, {"optimizer config 'adam:", "amsgrad must be in [0, 1], got 2"});
  check_error([] { OptimizerConfig::parse("radam:pytorch=0.5"); }, {"pytorch", "non-negative integer"});
  check_error([] { OptimizerConfig::parse("radam:amsgrad=1"); }, {"'amsgrad' is not a setting of radam", "pytorch"});
}

TEST_CASE("schedule config: the schedules, their defaults and checks, and plateau stepping on a metric") {
  CHECK(ScheduleConfig::parse("constant").to_string() == "constant");
  CHECK(ScheduleConfig::parse("inverse-sqrt").to_string() == "inverse-sqrt:warmup=4000");
  CHECK(ScheduleConfig::parse("cosine:warmup=10").to_string() == "cosine:total=0,min_lr=0,warmup=10");
  CHECK(ScheduleConfig::parse("plateau:patience=3").to_string() == "plateau:factor=0.1,patience=3,min_lr=0");
  CHECK(ScheduleConfig::parse("plateau").steps_on_metric());
  CHECK(!ScheduleConfig::parse("cosine").steps_on_metric());

  Tensor p = zeros({1});
  p.set_requires_grad(true);
  optim::SGD sgd({p}, optim::SGDOptions{});
  sgd.set_lr(1.0);
  // cosine with total = 0 runs over the run's steps: rate(1) = lr·(1 + cos(π/100))/2 for 100 steps.
  auto cosine = optim::make_schedule(ScheduleConfig::parse("cosine"), sgd, 100);
  CHECK(std::string(cosine->name()) == "CosineSchedule");
  CHECK(sgd.lr() == doctest::Approx((1 + std::cos(M_PI / 100)) / 2));
  sgd.set_lr(1.0);
  auto warm = optim::make_schedule(ScheduleConfig::parse("inverse-sqrt:warmup=4"), sgd, 100);
  CHECK(sgd.lr() == doctest::Approx(0.25));  // rate(1) = lr·1/4

  check_error([] { ScheduleConfig::parse("linear"); }, {"unknown schedule 'linear'", "cosine"});
  check_error([] { ScheduleConfig::parse("inverse-sqrt:warmup=-1"); }, {"warmup", "non-negative integer"});
  check_error([] { ScheduleConfig::parse("cosine:total=5,warmup=9"); }, {"total must exceed warmup"});
  check_error([] { ScheduleConfig::parse("cosine:min_lr=-1"); }, {"min_lr"});
  check_error([] { ScheduleConfig::parse("plateau:factor=2"); }, {"factor must be in (0, 1), got 2"});
  check_error([] { ScheduleConfig::parse("plateau:patience=1.5"); }, {"patience must be a non-negative integer, got '1.5'"});
  // Whole numbers in any notation, as before: a recorded "warmup=4e3" still reads.
  CHECK(ScheduleConfig::parse("inverse-sqrt:warmup=4e3").get("warmup") == 4000);
}
