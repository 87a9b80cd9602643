/// @file
/// The settings a saved model was built with, read from a training run's checkpoint
/// (train/run_state.h) by a command that uses the model outside a run, e.g. one that transcribes
/// files with it:
///
///   const nlohmann::json model = read_model_settings("m.ckpt", "asr", "--model");
///   model.at("layers");  // settings keyed by their flag without the dashes
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace tapestry::train {

/// The model settings ("model" of the metadata) that the checkpoint at `path`, written by a run of
/// `task`, records. Throws Error naming `flag`: with the loader's message for a file that is missing
/// or damaged, and "'PATH' is not a checkpoint of tapestry TASK" for one of another task or with no
/// model settings.
nlohmann::json read_model_settings(const std::string& path, const std::string& task, const char* flag);

}  // namespace tapestry::train
