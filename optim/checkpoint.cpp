#include "optim/checkpoint.h"

namespace tapestry {

namespace {

nlohmann::json encode_doubles(const std::vector<double>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (double x : values) out.push_back(encode_double(x));
  return out;
}

}  // namespace

void add_optimizer_state(Checkpoint& checkpoint, const std::string& prefix, const optim::OptimizerState& state) {
  const char* op = "add_optimizer_state";
  claim_metadata_key(checkpoint, prefix, op);
  nlohmann::json buffers = nlohmann::json::array();
  for (const auto& [key, tensor] : state.buffers) {
    TP_CHECK(tensor.defined(), op, "buffer \"", key, "\" is undefined");
    TP_CHECK(!checkpoint.tensors.count(prefix + "." + key), op, "the checkpoint already has a tensor '",
             prefix + "." + key, "'");
    buffers.push_back(key);
  }
  for (const auto& [key, tensor] : state.buffers) add_checkpoint_tensor(checkpoint, prefix + "." + key, tensor, op);
  checkpoint.metadata[prefix] = {{"optimizer", state.optimizer},
                                 {"lr", encode_double(state.lr)},
                                 {"steps", state.steps},
                                 {"buffers", std::move(buffers)}};
  if (state.groups.empty() && state.group_lrs.empty()) return;  // the record as it was before groups
  checkpoint.metadata[prefix]["groups"] = state.groups;
  checkpoint.metadata[prefix]["group_lrs"] = encode_doubles(state.group_lrs);
}

optim::OptimizerState optimizer_state(const Checkpoint& checkpoint, const std::string& prefix) {
  const char* op = "optimizer_state";
  const MetadataRecord record(checkpoint, prefix, op, "optimizer state");
  optim::OptimizerState state;
  state.optimizer = record.string("optimizer");
  state.lr = record.real("lr");
  state.steps = record.int64_list("steps");
  if (record.has("groups")) state.groups = record.string_list("groups");
  if (record.has("group_lrs")) state.group_lrs = record.real_list("group_lrs");
  for (const std::string& key : record.string_list("buffers")) {
    const auto it = checkpoint.tensors.find(prefix + "." + key);
    TP_CHECK(it != checkpoint.tensors.end(), op, "the checkpoint lacks tensor '", prefix + "." + key,
             "' of optimizer state \"", prefix, "\"");
    state.buffers[key] = it->second;
  }
  return state;
}

void add_schedule_state(Checkpoint& checkpoint, const std::string& prefix, const optim::ScheduleState& state) {
  claim_metadata_key(checkpoint, prefix, "add_schedule_state");
  checkpoint.metadata[prefix] = {{"schedule", state.schedule},         {"steps", state.steps},
                                 {"base_lr", encode_double(state.base_lr)}, {"lr", encode_double(state.lr)},
                                 {"best", encode_double(state.best)},       {"bad_steps", state.bad_steps}};
  if (state.group_base_lrs.empty() && state.group_lrs.empty()) return;  // the record as it was before groups
  checkpoint.metadata[prefix]["group_base_lrs"] = encode_doubles(state.group_base_lrs);
  checkpoint.metadata[prefix]["group_lrs"] = encode_doubles(state.group_lrs);
}

optim::ScheduleState schedule_state(const Checkpoint& checkpoint, const std::string& prefix) {
  const MetadataRecord record(checkpoint, prefix, "schedule_state", "schedule state");
  optim::ScheduleState state;
  state.schedule = record.string("schedule");
  state.steps = record.int64("steps");
  state.base_lr = record.real("base_lr");
  state.lr = record.real("lr");
  state.best = record.real("best");
  state.bad_steps = record.int64("bad_steps");
  if (record.has("group_base_lrs")) state.group_base_lrs = record.real_list("group_base_lrs");
  if (record.has("group_lrs")) state.group_lrs = record.real_list("group_lrs");
  return state;
}

}  // namespace tapestry
