#include "train/saved_model.h"

#include "core/checkpoint.h"
#include "core/error.h"

namespace tapestry::train {

nlohmann::json read_model_settings(const std::string& path, const std::string& task, const char* flag) {
  Checkpoint checkpoint;
  try {
    checkpoint = load_checkpoint(path);
  } catch (const Error& e) {
    fail(flag, e.what());
  }
  const nlohmann::json& m = checkpoint.metadata;
  TP_CHECK(m.is_object() && m.value("task", std::string()) == task && m.contains("model") && m["model"].is_object(),
           flag, "'", path, "' is not a checkpoint of tapestry ", task);
  return m["model"];
}

}  // namespace tapestry::train
