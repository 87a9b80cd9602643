/// @file
/// Parameter groups, as PyTorch's optimizers have them (`param_groups`): parameters chosen by name get
/// their own learning rate, weight decay and gradient clipping. Their text form, parsed once (the
/// command line's `--param-groups`):
///
///   *.w_c|*.centroids:lr=1e-3,clip=1;*.bias|*norm*:weight_decay=0
///
/// Groups are separated by ';', a group's name patterns by '|', and its settings follow a ':' as
/// key=value items separated by ',' (core/config_text.h). A pattern matches a parameter's whole name
/// as nn::Module::named_parameters() gives it ("encoder.layers.0.w_c"): '*' stands for any run of
/// characters, dots included, '?' for exactly one, every other character for itself. The settings:
///
///   lr=X             the group's learning rate (finite, ≥ 0); left out: the optimizer's
///   weight_decay=X   the group's weight decay λ (finite, ≥ 0), in the optimizer's own form (L2 for
///                    SGD, Adam and RAdam, decoupled for AdamW); left out: the optimizer's
///   clip=global      the group's gradients join the global-norm clip (--clip); the default
///   clip=X           they are clipped by their own norm to X > 0, and left out of the global norm
///   clip=none        they are not clipped, and left out of the global norm
///   rule=sgd         the group is updated by plain SGD, θ ← θ − lr·(g + λθ), whatever the optimizer
///                    (with Adam, the clustering parameters' steps then scale with their gradient and
///                    so with µ and ν, where Adam's steps are about lr whatever the gradient's size);
///                    its parameters' state buffers stay zero. rule=optimizer: the optimizer's own
///                    rule, the default. PyTorch needs a second optimizer for this.
///
/// Parameters that no group matches form the default group, with the optimizer's own learning rate
/// and weight decay, joining the global clip. A parameter matched by two groups, and a group that
/// matches no parameter, are errors (ParamGroupsConfig::assign). The empty text means no groups: every
/// parameter is in the default group, and training is exactly what it is without this config.
/// to_string() writes the settings given, in the order lr, weight_decay, clip, rule (clip only when it
/// is not global, rule only when it is sgd), so parse(to_string(c)) == c; it is what checkpoints record.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tapestry::optim {

/// How a group's gradients are clipped.
enum class ClipPolicy {
  Global,  ///< they join the global gradient-norm clip (the default)
  Own,     ///< they are clipped by their own norm, to GroupClip::max_norm, outside the global norm
  None,    ///< they are not clipped, and stay out of the global norm
};

/// A group's clipping: the policy and, for ClipPolicy::Own, its max norm.
struct GroupClip {
  ClipPolicy policy = ClipPolicy::Global;  ///< see ClipPolicy
  double max_norm = 0.0;                   ///< ClipPolicy::Own: the group's max norm, > 0
  /// Same policy (and, for Own, the same max norm).
  bool operator==(const GroupClip& other) const {
    return policy == other.policy && (policy != ClipPolicy::Own || max_norm == other.max_norm);
  }
};

/// Which rule updates a group's parameters.
enum class GroupRule {
  Optimizer,  ///< the optimizer's own (the default)
  Sgd,        ///< plain SGD, θ ← θ − lr·(g + λθ) (optim/sgd.h: sgd_step)
};

/// One group as written: the patterns that choose its parameters and the settings it overrides.
struct ParamGroupSpec {
  std::vector<std::string> patterns;  ///< name patterns ('*', '?'), at least one, none empty
  std::optional<double> lr;            ///< the group's learning rate; none: the optimizer's
  std::optional<double> weight_decay;  ///< the group's weight decay; none: the optimizer's
  GroupClip clip;                      ///< the group's clipping
  GroupRule rule = GroupRule::Optimizer;  ///< the group's update rule

  /// "pattern|pattern:lr=...,weight_decay=...,clip=...,rule=sgd" with the settings given (see the top of this file).
  std::string to_string() const;
  /// Whether `name` matches one of the patterns.
  bool matches(const std::string& name) const;
};

/// The groups of a `--param-groups` text (see the top of this file), in the order written.
struct ParamGroupsConfig {
  std::vector<ParamGroupSpec> groups;  ///< group k of an optimizer is groups[k − 1]; group 0 is the default

  /// Throws Error naming the text and the group: an empty group or pattern, a pattern with a space or
  /// a control character, an unknown or repeated key, a malformed or out-of-range value.
  static ParamGroupsConfig parse(const std::string& text);
  /// The text that parses back to this config; "" without groups.
  std::string to_string() const;
  /// Whether there are no groups.
  bool empty() const { return groups.empty(); }
  /// Same groups, patterns and settings.
  bool operator==(const ParamGroupsConfig& other) const { return to_string() == other.to_string(); }

  /// The group of each parameter named in `names`: 0 for the default group (no pattern matches it),
  /// k for groups[k − 1]. Throws Error naming the config for a parameter that two groups match (the
  /// parameter and both groups), and for a group that matches no parameter (with a few of the names
  /// there are, to write a pattern from).
  std::vector<size_t> assign(const std::vector<std::string>& names) const;
};

/// Whether `pattern` matches all of `name`: '*' any run of characters (also none), '?' exactly one.
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace tapestry::optim
