#include "data/datasets.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace tapestry::data {

std::string data_directory() {
  const char* explicit_directory = std::getenv("TAPESTRY_DATA");
  if (explicit_directory && *explicit_directory) return explicit_directory;
  const char* home = std::getenv("HOME");
  TP_CHECK(home && *home, "data directory", "neither TAPESTRY_DATA nor HOME is set");
  return std::string(home) + "/.cache/tapestry/data";
}

bool dataset_prepared(const std::string& name) {
  std::error_code ignored;
  return std::filesystem::is_regular_file(data_directory() + "/" + name + "/.stamp", ignored);
}

std::string dataset_directory(const std::string& name) {
  const std::string directory = data_directory() + "/" + name;
  TP_CHECK(dataset_prepared(name), "data directory", "the data set '", name, "' is not prepared in ",
           directory, " (`make data` or scripts/setup-data prepares it; TAPESTRY_DATA moves it)");
  return directory;
}

}  // namespace tapestry::data
