#include "train/run_state.h"

#include <map>

#include "core/error.h"
#include "nn/attention/config.h"
#include "optim/config.h"
#include "optim/param_groups.h"

namespace tapestry::train {

namespace {

std::string setting_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// Settings added after checkpoints were first written, with the value every run had before they
// existed: a checkpoint that lacks one matches that value.
const std::map<std::string, nlohmann::json> kSettingsBefore = {{"param-groups", ""}, {"precision", "float32"}};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Whether `a` and `b` are the same value of setting `key`: equal, or, for a config (an attention —
// a key ending in "attention" —, optimizer, schedule or parameter-groups text), texts that parse to
// the same config: `adam:lr=4e-3` is `adam:lr=0.004,beta1=0.9,...`. Checkpoints of settings version
// 3 record the latter (to_string()), older ones and a RunSpec built by hand may hold the former.
bool same_setting(const std::string& key, const nlohmann::json& a, const nlohmann::json& b) {
  if (a == b) return true;
  if (!a.is_string() || !b.is_string()) return false;
  const std::string x = a.get<std::string>(), y = b.get<std::string>();
  try {
    if (ends_with(key, "attention")) return attention::AttentionConfig::parse(x) == attention::AttentionConfig::parse(y);
    if (key == "optimizer") return optim::OptimizerConfig::parse(x) == optim::OptimizerConfig::parse(y);
    if (key == "schedule") return optim::ScheduleConfig::parse(x) == optim::ScheduleConfig::parse(y);
    if (key == "param-groups") return optim::ParamGroupsConfig::parse(x) == optim::ParamGroupsConfig::parse(y);
  } catch (const Error&) {  // a text that does not parse is the same as no other
  }
  return false;
}

// Throws Error naming the first setting of `wanted` that `saved` lacks or holds with another value
// (same_setting). A setting that `saved` lacks matches the empty text or its value from before it
// existed (kSettingsBefore).
void check_settings(const std::string& path, const nlohmann::json& saved, const nlohmann::json& wanted,
                    const char* what) {
  for (const auto& [key, value] : wanted.items()) {
    const auto it = saved.find(key);
    const std::string flag = "--" + key;
    const auto before = kSettingsBefore.find(key);
    if (it == saved.end() && (value == "" || (before != kSettingsBefore.end() && value == before->second))) continue;
    TP_CHECK(it != saved.end(), "--resume", "'", path, "' does not record ", flag);
    TP_CHECK(same_setting(key, *it, value), "--resume", "'", path, "' holds a ", what, " with ", flag, " ",
             setting_text(*it), ", but this command line has ", flag, " ", setting_text(value),
             " (give the settings the checkpoint was trained with, e.g. the same --preset)");
  }
}

// The version of the recorded settings that save_run writes. Version 1 (no "settings_version"):
// checkpoints written before neural-clustering configs had the key `losses` and a default number of
// clusters of their own, whose attention texts meant other defaults (attention::with_legacy_defaults).
// Version 2 recorded config texts as the command line spelled them, version 3 as their to_string(),
// every key spelled out, since the options carry configs parsed; both compare alike (same_setting).
constexpr int64_t kSettingsVersion = 3;

// The settings of a version-1 checkpoint as they read today: each attention text (a key ending in
// "attention": attention, encoder-attention, ...) that names neural-clustering gets what its missing
// keys meant then spelled out (attention::with_legacy_defaults).
void upgrade_settings(nlohmann::json& metadata) {
  if (metadata.contains("settings_version")) return;
  for (const char* part : {"model", "training"}) {
    if (!metadata.contains(part) || !metadata[part].is_object()) continue;
    for (auto& [key, value] : metadata[part].items())
      if (ends_with(key, "attention") && value.is_string())
        value = attention::with_legacy_defaults(value.get<std::string>());
  }
}

Checkpoint load_run(const std::string& path) {
  Checkpoint checkpoint = load_checkpoint(path);
  upgrade_settings(checkpoint.metadata);
  return checkpoint;
}

}  // namespace

void save_run(const std::string& path, const RunIdentity& identity, const RunState& state) {
  Checkpoint ckpt;
  add_tensors(ckpt, "model.", state.model->state_dict());
  add_optimizer_state(ckpt, "optimizer", state.optimizer->state_dict());
  add_schedule_state(ckpt, "schedule", state.schedule->state_dict());
  add_generator_state(ckpt, "generator", *state.generator);
  ckpt.metadata["settings_version"] = kSettingsVersion;
  ckpt.metadata["task"] = identity.task;
  ckpt.metadata["step"] = state.step;
  ckpt.metadata["model"] = identity.model;
  ckpt.metadata["training"] = identity.training;
  ckpt.metadata["trainer"] = state.trainer;
  ckpt.metadata["data"] = state.data;
  save_checkpoint(path, ckpt);
}

RunIdentity read_identity(const std::string& path) {
  const Checkpoint checkpoint = load_run(path);
  const nlohmann::json& m = checkpoint.metadata;
  TP_CHECK(m.contains("task") && m["task"].is_string() && m.contains("model") && m["model"].is_object() &&
               m.contains("training") && m["training"].is_object(),
           "--resume", "'", path, "' is not a training checkpoint (its metadata lacks a task or its settings)");
  return {m["task"].get<std::string>(), m["model"], m["training"]};
}

ResumedRun::ResumedRun(const std::string& path, const RunIdentity& identity, Compare compare)
    : path_(path), checkpoint_(load_run(path)) {
  const nlohmann::json& task = entry("task", &nlohmann::json::is_string);
  TP_CHECK(task == identity.task, "--resume", "'", path, "' is a ", task.get<std::string>(), " checkpoint, not a ",
           identity.task, " one");
  check_settings(path, entry("model", &nlohmann::json::is_object), identity.model, "model");
  if (compare == Compare::ModelAndTraining)
    check_settings(path, entry("training", &nlohmann::json::is_object), identity.training, "training run");
  step_ = entry("step", &nlohmann::json::is_number_integer).get<int64_t>();
  TP_CHECK(step_ >= 0, "--resume", "'", path, "' records a negative step ", step_);
}

const nlohmann::json& ResumedRun::entry(const char* key, bool (nlohmann::json::*valid)() const noexcept) const {
  const auto it = checkpoint_.metadata.find(key);
  TP_CHECK(it != checkpoint_.metadata.end() && ((*it).*valid)(), "--resume", "'", path_, "' is not a ",
           "training checkpoint (its metadata has no valid \"", key, "\")");
  return *it;
}

void ResumedRun::restore_model(nn::Module& model) const {
  model.load_state_dict(tensors_with_prefix(checkpoint_, "model."));
}

void ResumedRun::restore_training(optim::Optimizer& optimizer, optim::Schedule& schedule, Generator& generator) const {
  optimizer.load_state_dict(optimizer_state(checkpoint_, "optimizer"));
  schedule.load_state_dict(schedule_state(checkpoint_, "schedule"));
  generator = generator_state(checkpoint_, "generator");
}

nlohmann::json ResumedRun::trainer_state() const {
  return checkpoint_.metadata.contains("trainer") ? entry("trainer", &nlohmann::json::is_object)
                                                  : nlohmann::json::object();
}

nlohmann::json ResumedRun::data_state() const {
  return checkpoint_.metadata.contains("data") ? entry("data", &nlohmann::json::is_object) : nlohmann::json::object();
}

}  // namespace tapestry::train
