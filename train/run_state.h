/// @file
/// A training run's checkpoint: the model, the optimizer, the schedule, the training generator, the
/// step, and what the run is (task, model and training settings), so that --resume continues it
/// exactly and --eval-only evaluates it, and a checkpoint of another model is refused by name.
///
/// Metadata written (core/checkpoint.h for the file format):
///   "task"      the app that wrote it ("copy-task")
///   "step"      optimizer steps taken
///   "model"     {setting: value}: what the model's shape depends on; must match to load the weights
///   "training"  {setting: value}: what the training run depends on; must match to resume it
///   "trainer"   the trainer's own state (best metric so far, evaluations since)
///   "data"      the task's data position (epoch-based readers), a JSON object
/// plus "optimizer", "schedule" and "generator" (optim/, core/checkpoint.h), and tensors
/// `"model.*"` and `"optimizer.*"`. Settings are keyed by their command-line flag without the dashes
/// ("layers"), so a mismatch names the flag to change.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "core/checkpoint.h"
#include "optim/checkpoint.h"
#include "nn/module.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"

namespace tapestry::train {

/// What a run is: its task and settings, recorded in its checkpoint and checked against it.
struct RunIdentity {
  std::string task;  ///< the app that wrote it ("copy-task")
  /// {setting: value}: what the model's shape depends on.
  nlohmann::json model = nlohmann::json::object();
  /// {setting: value}: what the training run depends on.
  nlohmann::json training = nlohmann::json::object();
};

/// What a run checkpoint saves besides the identity (the pointed-to objects are not owned).
struct RunState {
  const nn::Module* model = nullptr;  ///< the model, saved as tensors `"model.*"`
  const optim::Optimizer* optimizer = nullptr;  ///< the optimizer and its state
  const optim::Schedule* schedule = nullptr;  ///< the learning-rate schedule
  const Generator* generator = nullptr;  ///< the training generator
  int64_t step = 0;  ///< optimizer steps taken
  /// The trainer's own state (best metric so far, evaluations since).
  nlohmann::json trainer = nlohmann::json::object();
  nlohmann::json data = nlohmann::json::object();  ///< the task's data position (epoch-based readers)
};

/// Writes the run atomically (core/checkpoint.h: save_checkpoint).
void save_run(const std::string& path, const RunIdentity& identity, const RunState& state);

/// The task and settings recorded in the run checkpoint at `path`, e.g. to build its model without
/// repeating its flags. Throws Error naming the path when it is not a run checkpoint.
RunIdentity read_identity(const std::string& path);

/// What ResumedRun checks against the checkpoint, besides the task.
enum class Compare {
  ModelOnly,  ///< the model settings (to evaluate the checkpoint)
  ModelAndTraining  ///< the model and the training settings (to continue the run)
};

/// A loaded run checkpoint whose task and settings agree with `identity` (the training settings too
/// with ModelAndTraining). Throws Error naming the path and the first setting that differs, as
/// "--resume: 'run.ckpt' holds a model with --layers 1, but this command line has --layers 2".
/// A setting the checkpoint does not record agrees with an empty text: a flag added after the
/// checkpoint was written (--param-groups) is then at the value every run had before it existed.
class ResumedRun {
 public:
  /// Loads the run checkpoint at `path` and checks it against `identity` (see above).
  ResumedRun(const std::string& path, const RunIdentity& identity, Compare compare);

  int64_t step() const { return step_; }  ///< the optimizer steps the run had taken
  /// Loads the checkpoint's weights into `model`.
  void restore_model(nn::Module& model) const;
  /// The optimizer, schedule and generator of the run (after restore_model).
  void restore_training(optim::Optimizer& optimizer, optim::Schedule& schedule, Generator& generator) const;
  ///@{
  /// metadata["trainer"] / ["data"]; empty objects when the checkpoint has none.
  nlohmann::json trainer_state() const;
  nlohmann::json data_state() const;
  ///@}

 private:
  const nlohmann::json& entry(const char* key, bool (nlohmann::json::*valid)() const noexcept) const;
  std::string path_;
  Checkpoint checkpoint_;
  int64_t step_ = 0;
};

}  // namespace tapestry::train
