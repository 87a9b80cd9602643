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
/// stream; step() does not wait for it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapestry::optim {

/// Everything step() changes, for checkpoints: restoring it into an optimizer built with the same
/// parameters (shapes, dtypes, order) and options continues the run bit for bit. Hyperparameters other
/// than the learning rate are the constructor's and are not part of the state.
struct OptimizerState {
  std::string optimizer;                  ///< name() of the optimizer that saved it
  double lr = 0.0;                        ///< the learning rate in force (schedules change it)
  std::vector<int64_t> steps;             ///< per parameter: the updates it has received
  std::map<std::string, Tensor> buffers;  ///< "<buffer>.<parameter index>", e.g. "exp_avg.3"; present
                                          ///< for every parameter with steps > 0, copies of the data
};

/// The base of every optimizer (see the top of this file): it owns the parameter list, the learning
/// rate and the per-parameter state buffers; a subclass supplies the update rule.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (see the top of this file).
  void step();
  /// Drops every parameter's gradient (Tensor::zero_grad): the next backward assigns fresh ones.
  void zero_grad();

  /// The learning rate the next step uses.
  double lr() const { return lr_; }
  /// Throws when lr is negative or not finite.
  void set_lr(double lr);

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
  /// Checks `params` (naming `name` and the offending parameter's index, shape and dtype) and lr.
  /// `buffer_names` are the per-parameter state tensors the update keeps, allocated as zeros of the
  /// parameter's shape before its first update.
  Optimizer(const char* name, std::vector<Tensor> params, double lr, std::vector<std::string> buffer_names);

  /// Applies the update to `param` (contiguous) from `grad` (contiguous, same shape, dtype and
  /// device), with this parameter's buffers (in buffer_names order) and its step count t ≥ 1.
  virtual void update(const Tensor& param, const Tensor& grad, const std::vector<Tensor>& buffers,
                      int64_t t) = 0;

 private:
  const char* name_;
  std::vector<Tensor> params_;
  double lr_;
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
