#include "optim/config.h"

#include <cmath>
#include <type_traits>

#include "core/config_text.h"
#include "ops/creation.h"
#include "core/error.h"
#include "optim/adam.h"
#include "optim/radam.h"
#include "optim/sgd.h"

namespace tapestry::optim {

namespace {

using Values = std::vector<std::pair<std::string, double>>;

// A key, its default, and whether it must be an integer (checked at parse).
struct Key {
  const char* name;
  double fallback;
  bool integer = false;
};

struct TypeKeys {
  const char* type;
  std::vector<Key> keys;
};

template <class O>
std::vector<Key> adam_keys(const O& o) {
  return {{"lr", o.lr}, {"beta1", o.betas.first}, {"beta2", o.betas.second}, {"eps", o.eps},
          {"weight_decay", o.weight_decay}};
}

// adam_keys and a 0 / 1 switch: amsgrad for Adam and AdamW, pytorch (the convention) for RAdam.
template <class O>
std::vector<Key> adam_keys(const O& o, const char* flag, bool on) {
  std::vector<Key> keys = adam_keys(o);
  keys.push_back({flag, on ? 1.0 : 0.0, true});
  return keys;
}

// The defaults come from the optimizers' and schedules' own option structs.
const std::vector<TypeKeys>& optimizer_types() {
  static const std::vector<TypeKeys> all{
      {"sgd", {{"lr", SGDOptions{}.lr}, {"momentum", SGDOptions{}.momentum},
               {"weight_decay", SGDOptions{}.weight_decay}, {"nesterov", 0, true}}},
      {"adam", adam_keys(AdamOptions{}, "amsgrad", AdamOptions{}.amsgrad == AmsGrad::Yes)},
      {"adamw", adam_keys(AdamWOptions{}, "amsgrad", AdamWOptions{}.amsgrad == AmsGrad::Yes)},
      {"radam", adam_keys(RAdamOptions{}, "pytorch", RAdamOptions{}.convention == RAdamConvention::PyTorch)},
  };
  return all;
}

const std::vector<TypeKeys>& schedule_types() {
  static const std::vector<TypeKeys> all{
      {"constant", {}},
      {"inverse-sqrt", {{"warmup", 4000, true}}},
      {"cosine", {{"total", 0, true}, {"min_lr", 0}, {"warmup", 0, true}}},
      {"plateau", {{"factor", ReduceOnPlateauOptions{}.factor}, {"patience", double(ReduceOnPlateauOptions{}.patience), true},
                   {"min_lr", ReduceOnPlateauOptions{}.min_lr}}},
  };
  return all;
}

std::string names(const std::vector<TypeKeys>& types) {
  std::string out;
  for (const auto& t : types) out += (out.empty() ? "" : ", ") + std::string(t.type);
  return out;
}

std::string names(const std::vector<Key>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out.empty() ? "none" : out;
}

// Every key of the type, given or default, in the type's order. Range checks are the optimizers' and
// schedules' own, run here on a throwaway instance so that a bad config fails when it is parsed.
std::pair<std::string, Values> parse(const std::string& text, const char* what, const std::vector<TypeKeys>& types) {
  const std::string op = std::string(what) + " config '" + text + "'";
  const ConfigText config = split_config(text, op);
  const TypeKeys* type = nullptr;
  for (const auto& t : types)
    if (config.type == t.type) type = &t;
  TP_CHECK(type, op, "unknown ", what, " '", config.type, "' (known: ", names(types), ")");
  Values values;
  for (const Key& key : type->keys) values.emplace_back(key.name, key.fallback);
  for (const auto& [name, text_value] : config.items) {
    size_t i = 0;
    while (i < type->keys.size() && name != type->keys[i].name) ++i;
    TP_CHECK(i < type->keys.size(), op, "'", name, "' is not a setting of ", type->type, " (settings: ",
             names(type->keys), ")");
    const double value = parse_config_number(text_value, op, name);
    TP_CHECK(!type->keys[i].integer || (value >= 0 && value <= 1e15 && value == std::floor(value)), op, name,
             " must be a non-negative integer, got '", text_value, "'");
    values[i].second = value;
  }
  return {type->type, values};
}

// One parameter for a throwaway optimizer that runs the option checks of a config being parsed.
std::vector<Tensor> probe_parameters() {
  Tensor p = zeros({1});
  p.set_requires_grad(true);
  return {p};
}

// A 0 / 1 key as a bool.
bool flag(const OptimizerConfig& c, const char* key) {
  const double value = c.get(key);
  TP_CHECK(value == 0 || value == 1, "optimizer config '" + c.to_string() + "'", key, " must be 0 or 1, got ", value);
  return value == 1;
}

template <class O>
O adam_options(const OptimizerConfig& c) {
  O o;
  o.lr = c.get("lr");
  o.betas = {c.get("beta1"), c.get("beta2")};
  o.eps = c.get("eps");
  o.weight_decay = c.get("weight_decay");
  if constexpr (std::is_same_v<O, RAdamOptions>)
    o.convention = flag(c, "pytorch") ? RAdamConvention::PyTorch : RAdamConvention::Paper;
  else
    o.amsgrad = flag(c, "amsgrad") ? AmsGrad::Yes : AmsGrad::No;
  return o;
}

}  // namespace

std::string KeyedConfig::to_string() const {
  std::string out = type;
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? "," : ":") + values[i].first + "=" + format_config_number(values[i].second);
  return out;
}

double KeyedConfig::get(const std::string& key) const {
  for (const auto& [name, value] : values)
    if (name == key) return value;
  fail(type, " has no setting '", key, "'");
}

OptimizerConfig OptimizerConfig::parse(const std::string& text) {
  auto [type, values] = optim::parse(text, "optimizer", optimizer_types());
  OptimizerConfig config;
  config.type = type;
  config.values = values;
  make_optimizer(config, probe_parameters());  // the optimizer's own range checks
  return config;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, const std::vector<Tensor>& params) {
  if (c.type == "sgd") {
    SGDOptions o;
    o.lr = c.get("lr");
    o.momentum = c.get("momentum");
    o.weight_decay = c.get("weight_decay");
    o.nesterov = c.get("nesterov") != 0 ? Nesterov::Yes : Nesterov::No;
    return std::make_unique<SGD>(params, o);
  }
  if (c.type == "adam") return std::make_unique<Adam>(params, adam_options<AdamOptions>(c));
  if (c.type == "adamw") return std::make_unique<AdamW>(params, adam_options<AdamWOptions>(c));
  if (c.type == "radam") return std::make_unique<RAdam>(params, adam_options<RAdamOptions>(c));
  fail("make_optimizer", "unknown optimizer '", c.type, "' (known: ", names(optimizer_types()), ")");
}

ScheduleConfig ScheduleConfig::parse(const std::string& text) {
  auto [type, values] = optim::parse(text, "schedule", schedule_types());
  ScheduleConfig config;
  config.type = type;
  config.values = values;
  if (config.type == "cosine") {
    // The rest (min_lr ≤ lr, total > warmup when total is the run's) is checked when it is built.
    const std::string op = "schedule config '" + text + "'";
    TP_CHECK(config.get("min_lr") >= 0, op, "min_lr must be >= 0, got ", config.get("min_lr"));
    TP_CHECK(config.get("total") == 0 || config.get("total") > config.get("warmup"), op,
             "total must exceed warmup (or be 0: the run's steps), got total ", config.get("total"), " and warmup ",
             config.get("warmup"));
  } else {
    SGD probe(probe_parameters(), SGDOptions{});  // the schedule's own range checks
    make_schedule(config, probe, 1);
  }
  return config;
}

std::unique_ptr<Schedule> make_schedule(const ScheduleConfig& c, Optimizer& optimizer, int64_t total_steps) {
  if (c.type == "constant") return std::make_unique<ConstantSchedule>(optimizer);
  if (c.type == "inverse-sqrt") return std::make_unique<InverseSqrtSchedule>(optimizer, int64_t(c.get("warmup")));
  if (c.type == "cosine") {
    const int64_t total = c.get("total") > 0 ? int64_t(c.get("total")) : total_steps;
    return std::make_unique<CosineSchedule>(optimizer, total, c.get("min_lr"), int64_t(c.get("warmup")));
  }
  if (c.type == "plateau") {
    ReduceOnPlateauOptions o;
    o.factor = c.get("factor");
    o.patience = int64_t(c.get("patience"));
    o.min_lr = c.get("min_lr");
    return std::make_unique<ReduceOnPlateau>(optimizer, o);
  }
  fail("make_schedule", "unknown schedule '", c.type, "' (known: ", names(schedule_types()), ")");
}

}  // namespace tapestry::optim
