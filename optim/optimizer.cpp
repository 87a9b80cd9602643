#include "optim/optimizer.h"

#include <cmath>
#include <set>

#include "core/autograd.h"
#include "ops/common.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "optim/apply_rule.h"
#include "optim/sgd.h"

namespace tapestry::optim {

namespace detail {

void check_lr(const char* op, double lr) {
  TP_CHECK(std::isfinite(lr) && lr >= 0, op, "learning rate must be finite and >= 0, got ", lr);
}

void check_unit_interval(const char* op, const char* what, double value) {
  TP_CHECK(value >= 0 && value < 1, op, what, " must be in [0, 1), got ", value);
}

void check_non_negative(const char* op, const char* what, double value) {
  TP_CHECK(std::isfinite(value) && value >= 0, op, what, " must be finite and >= 0, got ", value);
}

void check_positive(const char* op, const char* what, double value) {
  TP_CHECK(std::isfinite(value) && value > 0, op, what, " must be finite and > 0, got ", value);
}

}  // namespace detail

namespace {

std::string describe(const Tensor& t) {
  return tapestry::detail::concat("shape ", to_string(t.shape()), ", ", t.dtype(), ", ", t.device());
}

// Group texts as the config that made them, "'*.w_c:lr=0.001;*.bias:weight_decay=0'", or "none".
std::string describe_groups(const std::vector<std::string>& labels) {
  std::string out;
  for (const std::string& label : labels) out += (out.empty() ? "" : ";") + label;
  return labels.empty() ? "none" : "'" + out + "'";
}

}  // namespace

Optimizer::Optimizer(const char* name, std::vector<Tensor> params, double lr, double weight_decay,
                     std::vector<std::string> buffer_names)
    : name_(name), params_(std::move(params)), buffer_names_(std::move(buffer_names)) {
  detail::check_lr(name_, lr);
  TP_CHECK(!params_.empty(), name_, "got an empty parameter list");
  std::set<const TensorImpl*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    TP_CHECK(p.defined(), name_, "parameter ", i, " is an undefined tensor");
    TP_CHECK(is_floating(p.dtype()), name_, "parameter ", i, " (", describe(p),
             ") must be a float32 or float64 tensor");
    TP_CHECK(p.requires_grad(), name_, "parameter ", i, " (", describe(p),
             ") does not require grad; call set_requires_grad(true) on it or leave it out");
    TP_CHECK(p.is_leaf(), name_, "parameter ", i, " (", describe(p),
             ") is not a leaf (an op computed it); optimise the leaf it was computed from");
    TP_CHECK(p.is_contiguous(), name_, "parameter ", i, " (", describe(p),
             ") is not contiguous; make the parameter a contiguous tensor");
    TP_CHECK(seen.insert(&p.impl()).second, name_, "parameter ", i, " (", describe(p),
             ") is listed more than once");
  }
  steps_.assign(params_.size(), 0);
  buffers_.resize(params_.size());
  ParamGroup all{"", {}, lr, weight_decay, {}};
  for (size_t i = 0; i < params_.size(); ++i) all.params.push_back(i);
  groups_ = {std::move(all)};
  group_of_.assign(params_.size(), 0);
}

void Optimizer::set_group_lr(size_t group, double lr) {
  TP_CHECK(group < groups_.size(), name_, "parameter group ", group, " is out of range for ", groups_.size(),
           " groups");
  detail::check_lr(name_, lr);
  groups_[group].lr = lr;
}

void Optimizer::set_param_groups(const ParamGroupsConfig& config, const std::vector<std::string>& names) {
  TP_CHECK(names.size() == params_.size(), name_, "got ", names.size(), " parameter names for ", params_.size(),
           " parameters");
  const std::vector<size_t> group_of = config.assign(names);
  const ParamGroup& fallback = groups_[0];
  std::vector<ParamGroup> groups{{"", {}, fallback.lr, fallback.weight_decay, {}}};
  for (const ParamGroupSpec& spec : config.groups) {
    ParamGroup group{spec.to_string(), {}, spec.lr.value_or(fallback.lr),
                     spec.weight_decay.value_or(fallback.weight_decay), spec.clip, spec.rule};
    detail::check_lr(name_, group.lr);
    detail::check_non_negative(name_, "weight_decay", group.weight_decay);
    if (group.clip.policy == ClipPolicy::Own) detail::check_positive(name_, "clip", group.clip.max_norm);
    groups.push_back(std::move(group));
  }
  for (size_t i = 0; i < params_.size(); ++i) groups[group_of[i]].params.push_back(i);
  groups_ = std::move(groups);
  group_of_ = group_of;
}

int64_t Optimizer::steps(size_t i) const {
  TP_CHECK(i < steps_.size(), name_, "parameter index ", i, " is out of range for ", steps_.size(),
           " parameters");
  return steps_[i];
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.zero_grad();
}

void Optimizer::step() {
  // Every gradient is checked before any parameter changes, so a bad one leaves all of them intact.
  NoGradGuard no_grad;
  std::vector<Tensor> grads(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    TP_CHECK(g.shape() == p.shape() && g.dtype() == p.dtype() && g.device() == p.device(), name_,
             "the gradient of parameter ", i, " (", describe(g), ") does not match the parameter (",
             describe(p), ")");
    grads[i] = contiguous(g);
  }
  CpuUpdates cpu;  // every CPU parameter's update, run as one loop after this one (optim/apply_rule.h)
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!grads[i].defined()) continue;
    const Tensor& p = params_[i];
    if (steps_[i] == 0) {
      buffers_[i].clear();
      for (size_t k = 0; k < buffer_names_.size(); ++k) buffers_[i].push_back(zeros_like(p));
    }
    ++steps_[i];
    const ParamGroup& group = groups_[group_of_[i]];
    if (group.rule == GroupRule::Sgd) {
      sgd_step(p, grads[i], group.lr, group.weight_decay, &cpu);  // its buffers stay zero
    } else {
      update(p, grads[i], buffers_[i], steps_[i], group, cpu);
    }
    p.storage().bump_version();
  }
  cpu.run();
}

OptimizerState Optimizer::state_dict() const {
  NoGradGuard no_grad;
  OptimizerState state;
  state.optimizer = name_;
  state.lr = groups_[0].lr;
  for (size_t k = 1; k < groups_.size(); ++k) {
    state.groups.push_back(groups_[k].label);
    state.group_lrs.push_back(groups_[k].lr);
  }
  state.steps = steps_;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (steps_[i] == 0) continue;
    for (size_t k = 0; k < buffer_names_.size(); ++k)
      state.buffers[buffer_names_[k] + "." + std::to_string(i)] = clone(buffers_[i][k]);
  }
  return state;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  NoGradGuard no_grad;
  TP_CHECK(state.optimizer == name_, name_, "cannot load a state saved by ",
           state.optimizer.empty() ? std::string("(unnamed)") : state.optimizer);
  detail::check_lr(name_, state.lr);
  std::vector<std::string> labels;
  for (size_t k = 1; k < groups_.size(); ++k) labels.push_back(groups_[k].label);
  TP_CHECK(state.groups == labels, name_, "the state was saved with parameter groups ", describe_groups(state.groups),
           ", this optimizer has ", describe_groups(labels));
  TP_CHECK(state.group_lrs.size() == state.groups.size(), name_, "the state has ", state.group_lrs.size(),
           " group learning rates for ", state.groups.size(), " parameter groups");
  for (double lr : state.group_lrs) detail::check_lr(name_, lr);
  TP_CHECK(state.steps.size() == params_.size(), name_, "the state is for ", state.steps.size(),
           " parameters, this optimizer has ", params_.size());
  // Check everything first; then build the new buffers, so that a bad state changes nothing.
  size_t expected = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    TP_CHECK(state.steps[i] >= 0, name_, "negative step count ", state.steps[i], " for parameter ", i);
    if (state.steps[i] == 0) continue;
    for (const std::string& buffer : buffer_names_) {
      const std::string key = buffer + "." + std::to_string(i);
      const auto it = state.buffers.find(key);
      TP_CHECK(it != state.buffers.end(), name_, "the state lacks buffer \"", key, "\" of parameter ",
               i, ", which has taken ", state.steps[i], " steps");
      const Tensor& saved = it->second;
      TP_CHECK(saved.defined() && saved.shape() == params_[i].shape() &&
                   saved.dtype() == params_[i].dtype(),
               name_, "buffer \"", key, "\" (", saved.defined() ? describe(saved) : "undefined",
               ") does not match parameter ", i, " (", describe(params_[i]), ")");
      ++expected;
    }
  }
  TP_CHECK(state.buffers.size() == expected, name_, "the state has ", state.buffers.size(),
           " buffers, expected ", expected, " (one of each of ", buffer_names_.size(),
           " kinds per parameter that has taken steps)");

  std::vector<std::vector<Tensor>> buffers(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (state.steps[i] == 0) continue;
    for (const std::string& buffer : buffer_names_) {
      Tensor copy = empty_like(params_[i]);
      copy_(copy, state.buffers.at(buffer + "." + std::to_string(i)));
      buffers[i].push_back(copy);
    }
  }
  groups_[0].lr = state.lr;
  for (size_t k = 1; k < groups_.size(); ++k) groups_[k].lr = state.group_lrs[k - 1];
  steps_ = state.steps;
  buffers_ = std::move(buffers);
}

}  // namespace tapestry::optim
