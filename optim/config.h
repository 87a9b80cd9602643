/// @file
/// Choosing an optimizer and a learning-rate schedule by a string, the way attentions are chosen:
///
///   sgd:lr=0.01,momentum=0,weight_decay=0,nesterov=0
///   adam:lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0,amsgrad=0
///   adamw:lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0.01,amsgrad=0
///   radam:lr=0.001,beta1=0.9,beta2=0.999,eps=1e-08,weight_decay=0,pytorch=0
///
/// amsgrad=1 is AmsGrad::Yes (optim/adam.h); pytorch=1 is RAdamConvention::PyTorch (optim/radam.h).
/// A config text saved before these keys existed parses to their defaults (0).
///
///   constant
///   inverse-sqrt:warmup=4000
///   cosine:total=0,min_lr=0,warmup=0      (total = 0: the run's number of steps)
///   plateau:factor=0.1,patience=10,min_lr=0
///
/// Keys left out take the defaults above (the optimizers' and schedules' own, optim/*.h). Each type
/// declares its keys once, with their ranges and help, in the key grammar that attention configs
/// share (core/config_text.h: ConfigKey); parsing checks them, so a config that parses builds. to_string()
/// prints every key of the type, so parse(to_string(c)) == c; it is what checkpoints record. Parameter
/// groups, with their own lr, weight decay and clipping, have a text of their own
/// (optim/param_groups.h: ParamGroupsConfig).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace tapestry::optim {

/// A type and the value of each of its keys (all of them, in the type's order).
struct KeyedConfig {
  std::string type;  ///< "sgd", "adam", ... or "constant", "cosine", ...
  std::vector<std::pair<std::string, double>> values;  ///< each key of the type with its value

  /// The config as text, every key spelled out ("adam:lr=0.001,beta1=0.9,...").
  std::string to_string() const;
  /// Throws Error when the type has no such key.
  double get(const std::string& key) const;
  /// Same type and values.
  bool operator==(const KeyedConfig& other) const { return to_string() == other.to_string(); }
};

/// An optimizer config, e.g. "radam:lr=2e-4" (the README lists the types and keys).
struct OptimizerConfig : KeyedConfig {
  /// Throws Error naming the text: unknown type or key, a malformed or out-of-range value.
  static OptimizerConfig parse(const std::string& text);
};

/// A learning-rate schedule config, e.g. "inverse-sqrt:warmup=4000".
struct ScheduleConfig : KeyedConfig {
  /// Throws Error naming the text: unknown type or key, a malformed or out-of-range value.
  static ScheduleConfig parse(const std::string& text);
  /// plateau is stepped with an evaluation metric (Trainer: after each evaluation), the others once per
  /// optimizer step.
  bool steps_on_metric() const { return type == "plateau"; }
};

///@{
/// Every optimizer (schedule) with its keys' defaults on one line, "sgd:lr=0.01,...; adam:...", for
/// --help; and on lines of their own, each key with its default, range and help.
std::string optimizers_help();
std::string describe_optimizers();
std::string schedules_help();
std::string describe_schedules();
///@}

/// The optimizer `config` names, over `params`, all in its default group (parameter groups are set
/// on it after: Optimizer::set_param_groups).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, const std::vector<Tensor>& params);

/// `total_steps` replaces cosine's total = 0. The schedule sets the optimizer's lr at once.
std::unique_ptr<Schedule> make_schedule(const ScheduleConfig& config, Optimizer& optimizer, int64_t total_steps);

}  // namespace tapestry::optim
