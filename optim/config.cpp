#include "optim/config.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "core/config_text.h"
#include "core/error.h"
#include "optim/adam.h"
#include "optim/radam.h"
#include "optim/sgd.h"

namespace tapestry::optim {

namespace {

// A type's keys (the grammar of core/config_text.h), and a check of what one key's range cannot say
// (how two keys relate), run when a text is parsed so that a bad config fails there.
struct TypeKeys {
  const char* type;
  std::vector<ConfigKey> keys;
  void (*check)(const KeyedConfig& config, const std::string& op) = nullptr;
};

constexpr double kInf = std::numeric_limits<double>::infinity();
// Integer keys count steps: far above any run, low enough to stay exact as a double.
constexpr double kMaxCount = 1e15;

ConfigKey lr_key(double lr) { return number_key("lr", lr, 0, kInf, Ends::Closed, "the learning rate"); }
ConfigKey decay_key(double decay) {
  return number_key("weight_decay", decay, 0, kInf, Ends::Closed, "weight decay (decoupled in adamw)");
}
ConfigKey switch_key(const char* key, bool on, const char* help) { return {key, on ? 1.0 : 0.0, 0, 1, help}; }

// The keys of Adam, AdamW and RAdam, and a 0 / 1 switch: amsgrad for Adam and AdamW, pytorch (the
// convention) for RAdam.
template <class O>
std::vector<ConfigKey> adam_keys(const O& o, ConfigKey flag) {
  return {lr_key(o.lr),
          number_key("beta1", o.betas.first, 0, 1, Ends::HighOpen, "decay of the gradient's running mean"),
          number_key("beta2", o.betas.second, 0, 1, Ends::HighOpen, "decay of the squared gradient's running mean"),
          number_key("eps", o.eps, 0, kInf, Ends::LowOpen, "added to the denominator"),
          decay_key(o.weight_decay),
          std::move(flag)};
}

void check_nesterov(const KeyedConfig& c, const std::string& op) {
  TP_CHECK(c.get("nesterov") == 0 || c.get("momentum") > 0, op, "nesterov=1 needs momentum > 0, got momentum=",
           format_config_number(c.get("momentum")));
}

// The rest (min_lr ≤ lr, total > warmup when total is the run's) is checked when it is built.
void check_cosine(const KeyedConfig& c, const std::string& op) {
  TP_CHECK(c.get("total") == 0 || c.get("total") > c.get("warmup"), op,
           "total must exceed warmup (or be 0: the run's steps), got total ", c.get("total"), " and warmup ",
           c.get("warmup"));
}

// The defaults come from the optimizers' and schedules' own option structs.
const std::vector<TypeKeys>& optimizer_types() {
  const SGDOptions sgd;
  static const std::vector<TypeKeys> all{
      {"sgd",
       {lr_key(sgd.lr), number_key("momentum", sgd.momentum, 0, 1, Ends::HighOpen, "momentum"), decay_key(sgd.weight_decay),
        switch_key("nesterov", sgd.nesterov == Nesterov::Yes, "1: Nesterov momentum")},
       check_nesterov},
      {"adam", adam_keys(AdamOptions{}, switch_key("amsgrad", AdamOptions{}.amsgrad == AmsGrad::Yes, "1: AMSGrad"))},
      {"adamw", adam_keys(AdamWOptions{}, switch_key("amsgrad", AdamWOptions{}.amsgrad == AmsGrad::Yes, "1: AMSGrad"))},
      {"radam", adam_keys(RAdamOptions{}, switch_key("pytorch", RAdamOptions{}.convention == RAdamConvention::PyTorch,
                                                     "1: PyTorch's convention for the un-rectified steps"))},
  };
  return all;
}

const std::vector<TypeKeys>& schedule_types() {
  const ReduceOnPlateauOptions plateau;
  const ConfigKey warmup{"warmup", 0, 0, kMaxCount, "steps of linear warmup"};
  const ConfigKey min_lr = number_key("min_lr", 0, 0, kInf, Ends::Closed, "the lowest learning rate");
  static const std::vector<TypeKeys> all{
      {"constant", {}},
      {"inverse-sqrt", {{"warmup", 4000, 0, kMaxCount, "steps of linear warmup, then lr·√(warmup/step)"}}},
      {"cosine", {{"total", 0, 0, kMaxCount, "steps to decay over (0: the run's)"}, min_lr, warmup}, check_cosine},
      {"plateau",
       {number_key("factor", plateau.factor, 0, 1, Ends::Open, "lr multiplier after `patience` evaluations without a new best"),
        {"patience", double(plateau.patience), 0, kMaxCount, "evaluations without a new best before lowering lr"},
        number_key("min_lr", plateau.min_lr, 0, kInf, Ends::Closed, "the lowest learning rate")}},
  };
  return all;
}

std::string names(const std::vector<TypeKeys>& types) {
  std::vector<std::string> out;
  for (const auto& t : types) out.push_back(t.type);
  return join_names(out);
}

// Every key of the type, given or default, in the type's order; ranges are the key table's, and
// the type's own check relates its keys.
template <class Config>
Config parse(const std::string& text, const char* what, const std::vector<TypeKeys>& types) {
  const std::string op = std::string(what) + " config '" + text + "'";
  const ConfigText items = split_config(text, op);
  const TypeKeys* type = nullptr;
  for (const auto& t : types)
    if (items.type == t.type) type = &t;
  TP_CHECK(type, op, "unknown ", what, " '", items.type, "' (known: ", names(types), ")");
  const std::vector<double> values = parse_config_values(type->keys, items, op);
  Config config;
  config.type = type->type;
  for (size_t i = 0; i < values.size(); ++i) config.values.emplace_back(type->keys[i].key, values[i]);
  if (type->check) type->check(config, op);
  return config;
}

// "type:key=default,...; ..." for help text.
std::string types_help(const std::vector<TypeKeys>& types) {
  std::string out;
  for (const auto& t : types) {
    const std::string keys = config_defaults(t.keys);
    out += (out.empty() ? "" : "; ") + std::string(t.type) + (keys.empty() ? "" : ":" + keys);
  }
  return out;
}

// Each type, then one line per key: its default, range and help.
std::string describe(const std::vector<TypeKeys>& types) {
  std::string out;
  for (const auto& t : types) out += std::string(t.type) + "\n" + config_keys_help(t.keys, "  ");
  return out;
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
  return optim::parse<OptimizerConfig>(text, "optimizer", optimizer_types());
}

std::string optimizers_help() { return types_help(optimizer_types()); }
std::string describe_optimizers() { return describe(optimizer_types()); }

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
  return optim::parse<ScheduleConfig>(text, "schedule", schedule_types());
}

std::string schedules_help() { return types_help(schedule_types()); }
std::string describe_schedules() { return describe(schedule_types()); }

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
