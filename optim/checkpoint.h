/// @file
/// Optimizer and schedule states in a checkpoint (the format: core/checkpoint.h).
///
///   add_optimizer_state(ckpt, "optimizer", adam.state_dict());
///   add_schedule_state(ckpt, "schedule", schedule.state_dict());
///   ...
///   adam.load_state_dict(optimizer_state(loaded, "optimizer"));
///
/// Each add_* refuses (Error) a `prefix` the checkpoint already uses; each getter throws Error naming
/// the checkpoint entry when it is missing or malformed.
#pragma once

#include <string>

#include "core/checkpoint.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace tapestry {

/// The optimizer's scalars go to metadata[prefix] = {"optimizer", "lr", "steps", "buffers"}, with
/// parameter groups also {"groups", "group_lrs"} (OptimizerState); each buffer to the tensor
/// "<prefix>.<buffer key>", e.g. "optimizer.exp_avg.3".
void add_optimizer_state(Checkpoint& checkpoint, const std::string& prefix, const optim::OptimizerState& state);
/// The optimizer state that add_optimizer_state stored under `prefix`; a record without groups (also
/// one written before groups existed) is a state without groups.
optim::OptimizerState optimizer_state(const Checkpoint& checkpoint, const std::string& prefix);

/// metadata[prefix] = {"schedule", "steps", "base_lr", "lr", "best", "bad_steps"}, with parameter
/// groups also {"group_base_lrs", "group_lrs"} (ScheduleState).
void add_schedule_state(Checkpoint& checkpoint, const std::string& prefix, const optim::ScheduleState& state);
/// The schedule state that add_schedule_state stored under `prefix` (without groups when the record has
/// none).
optim::ScheduleState schedule_state(const Checkpoint& checkpoint, const std::string& prefix);

}  // namespace tapestry
