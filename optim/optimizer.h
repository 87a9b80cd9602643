/// @file
/// The optimizer base class: a list of parameters, their per-parameter state, one update per step().
///
///   optim::Adam adam(model_parameters, {/*lr=*/3e-4});
///   for (...) {
///     adam.zero_grad();
///     loss(batch).backward();
///     adam.step();
///   }
///
/// Parameters are float32 / float64 leaf tensors that require grad, contiguous, each listed once.
/// step() updates every parameter whose grad() is defined, in place, with one fused pass over its
/// elements (optim/update_rules.h); a parameter whose grad() is undefined (zero_grad() dropped it and
/// no backward reached it since) is skipped: its values, state buffers and step count stay as they
/// are, as in PyTorch. Updates write the parameter's memory directly: they are not recorded on the
/// tape and they bump the storage version, so a backward through a graph that saved a parameter
/// before the step refuses to run (rather than differentiate stale data).
///
/// Parameters may live on any device (one kernel launch per parameter on a GPU, queued on its
/// stream; step() does not wait for it). On the CPU the passes of all parameters run as one parallel
/// loop over their elements, after every parameter's has been queued (optim/apply_rule.h: CpuUpdates).
///
/// Parameter groups (PyTorch's `param_groups`, optim/param_groups.h) give some parameters their own
/// learning rate, weight decay and clipping:
///
///   optim::Adam adam(model.parameters(), {/*lr=*/3e-4});
///   std::vector<std::string> names;  // of the same parameters, in the same order
///   for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
///   adam.set_param_groups(optim::ParamGroupsConfig::parse("*.w_c:lr=1e-3;*.bias:weight_decay=0"), names);
///
/// Group 0 is the default group: the parameters no group matches, with the constructor's learning
/// rate and weight decay. Each step updates a parameter with its group's learning rate and weight
/// decay, and by its group's rule (the optimizer's, or plain SGD for a group with rule=sgd); without
/// groups every parameter is in group 0 and the update is the constructor's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "optim/param_groups.h"

namespace tapestry::optim {

class CpuUpdates;  // optim/apply_rule.h

/// Everything step() changes, for checkpoints: restoring it into an optimizer built with the same
/// parameters (shapes, dtypes, order) and options continues the run bit for bit. Hyperparameters other
/// than the learning rate are the constructor's and are not part of the state.
struct OptimizerState {
  std::string optimizer;                  ///< name() of the optimizer that saved it
  double lr = 0.0;                        ///< the default group's learning rate in force (schedules change it)
  /// Groups 1, 2, ...: each one's text (ParamGroupSpec::to_string), so that a state is loaded only into
  /// an optimizer with the same groups; empty without groups (and in states saved before groups existed).
  std::vector<std::string> groups;
  std::vector<double> group_lrs;          ///< groups 1, 2, ...: each one's learning rate in force
  std::vector<int64_t> steps;             ///< per parameter: the updates it has received
  std::map<std::string, Tensor> buffers;  ///< "<buffer>.<parameter index>", e.g. "exp_avg.3"; present
                                          ///< for every parameter with steps > 0, copies of the data
};

/// One parameter group of an optimizer (see the top of this file).
struct ParamGroup {
  std::string label;           ///< "" for the default group, else its text (ParamGroupSpec::to_string)
  std::vector<size_t> params;  ///< its parameters: indices into Optimizer::parameters(), ascending
  double lr = 0.0;             ///< its learning rate in force (schedules change it)
  double weight_decay = 0.0;   ///< its weight decay, in the optimizer's form (L2, or AdamW's decoupled)
  GroupClip clip;              ///< how its gradients are clipped (optim/clip.h: clip_grad_norm_by_group)
  GroupRule rule = GroupRule::Optimizer;  ///< the optimizer's update, or plain SGD (optim/sgd.h: sgd_step)
};

/// The base of every optimizer (see the top of this file): it owns the parameter list, the parameter
/// groups with their learning rates and the per-parameter state buffers; a subclass supplies the update rule.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (see the top of this file).
  void step();
  /// Drops every parameter's gradient (Tensor::zero_grad): the next backward assigns fresh ones.
  void zero_grad();

  /// The learning rate the next step uses for the default group (group 0).
  double lr() const { return groups_[0].lr; }
  /// Sets the default group's learning rate; throws when lr is negative or not finite.
  void set_lr(double lr) { set_group_lr(0, lr); }
  /// Sets group `group`'s learning rate; throws for a group out of range or an lr < 0 or not finite.
  void set_group_lr(size_t group, double lr);

  /// Splits the parameters into the default group and the groups of `config` (PyTorch's
  /// `param_groups`): names[i] is the name of parameters()[i] (nn::Module::named_parameters()), and
  /// ParamGroupsConfig::assign chooses each one's group, throwing its errors. A group without its own
  /// lr or weight decay takes the default group's (the constructor's, unless set_lr changed it). The
  /// parameters' state (steps, buffers) is kept. It replaces the groups, learning rates included; set
  /// them before a schedule is built over this optimizer (the schedule takes each group's rate then).
  /// An empty config leaves one group, the default, as constructed.
  void set_param_groups(const ParamGroupsConfig& config, const std::vector<std::string>& names);
  /// Group 0 (the default) and then the config's groups in order.
  const std::vector<ParamGroup>& param_groups() const { return groups_; }

  const char* name() const { return name_; }  ///< "sgd", "adam", "adamw" or "radam"
  /// The parameters it updates, in the order given.
  const std::vector<Tensor>& parameters() const { return params_; }
  /// Updates parameter i has received.
  int64_t steps(size_t i) const;

  /// A deep copy of the state (buffers are cloned, so later steps do not change it).
  OptimizerState state_dict() const;
  /// Replaces the state with a copy of `state`, after checking that it was saved by this kind of
  /// optimizer over parameters of the same number, shapes and dtypes. Buffers may come from another
  /// device; they are copied to their parameter's.
  void load_state_dict(const OptimizerState& state);

 protected:
  /// Checks `params` (naming `name` and the offending parameter's index, shape and dtype), lr and
  /// weight_decay, which become the default group's. `buffer_names` are the per-parameter state
  /// tensors the update keeps, allocated as zeros of the parameter's shape before its first update.
  Optimizer(const char* name, std::vector<Tensor> params, double lr, double weight_decay,
            std::vector<std::string> buffer_names);

  /// Applies the update to `param` (contiguous) from `grad` (contiguous, same shape, dtype and
  /// device), with this parameter's buffers (in buffer_names order), its step count t ≥ 1, and the
  /// learning rate and weight decay of its group. On the CPU the work goes into `cpu`, which step()
  /// runs once every parameter's update is in it (optim/apply_rule.h: apply_rule).
  virtual void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers, int64_t t,
                      const ParamGroup& group, CpuUpdates& cpu) = 0;

 private:
  const char* name_;
  std::vector<Tensor> params_;
  std::vector<ParamGroup> groups_;     ///< group 0 the default; never empty
  std::vector<size_t> group_of_;       ///< [parameter]: its group
  std::vector<std::string> buffer_names_;
  std::vector<int64_t> steps_;
  std::vector<std::vector<Tensor>> buffers_;  ///< [parameter][buffer], empty until the first update
};

namespace detail {
/// Option checks shared by the optimizers and schedules; each throws Error naming `op`, the option and
/// its value. NaN fails every one of them.
void check_lr(const char* op, double lr);                                   ///< finite, ≥ 0
void check_unit_interval(const char* op, const char* what, double value);  ///< 0 ≤ value < 1
void check_non_negative(const char* op, const char* what, double value);   ///< finite, ≥ 0
void check_positive(const char* op, const char* what, double value);       ///< finite, > 0
}  // namespace detail

}  // namespace tapestry::optim
