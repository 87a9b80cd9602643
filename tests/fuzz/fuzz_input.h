// What the libFuzzer targets share: the fuzzer's bytes as a file for the readers that take a path,
// and the rule that a tapestry::Error is the expected answer to bad input. Anything else escaping
// a target (another exception, a crash, a sanitizer report, a leak) is a finding.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "core/error.h"

namespace tapestry::fuzz {

// A folder of this process's own under the system's temporary folder, made once and removed when the
// process exits normally (a crash leaves it, with the input that caused it).
class WorkFolder {
 public:
  WorkFolder() : path_(std::filesystem::temp_directory_path() / ("tapestry-fuzz-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
  }
  ~WorkFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  WorkFolder(const WorkFolder&) = delete;
  WorkFolder& operator=(const WorkFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline const std::filesystem::path& work_folder() {
  static const WorkFolder folder;
  return folder.path();
}

// Writes `size` bytes to `name` in the work folder and returns its path.
inline std::string write_file(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (work_folder() / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

// Runs `body`; a tapestry::Error is a refusal, the right outcome for most inputs.
template <class Body>
void refusing(Body&& body) {
  try {
    body();
  } catch (const Error&) {
  }
}

}  // namespace tapestry::fuzz
