/// @file
/// Checkpoints: named tensors + a free-form JSON metadata object in one file, saved atomically.
///
///   Checkpoint ckpt;
///   add_tensors(ckpt, "model.", model_state);             // std::map<std::string, Tensor>
///   add_optimizer_state(ckpt, "optimizer", adam.state_dict());  // optim/checkpoint.h
///   add_schedule_state(ckpt, "schedule", schedule.state_dict());
///   add_generator_state(ckpt, "generator", gen);
///   ckpt.metadata["step"] = step;
///   ckpt.metadata["config"] = {{"d_model", 256}, {"attention", "clustered:clusters=100"}};
///   save_checkpoint("run/last.ckpt", ckpt);
///
///   const Checkpoint loaded = load_checkpoint("run/last.ckpt");
///   adam.load_state_dict(optimizer_state(loaded, "optimizer"));
///   gen = generator_state(loaded, "generator");
///
/// ---- File format, version 1 (also in docs/CHECKPOINT.md) ----
///
/// All integers are little-endian. Offsets are in bytes from the start of the file unless noted.
///
///   offset     size  field
///   0          8     magic: the ASCII bytes "TAPESTRY"
///   8          4     u32 format version: 1
///   12         8     u64 H: length of the JSON header in bytes
///   20         H     JSON header, UTF-8 (see below)
///   20 + H     P     zero bytes up to D = the next multiple of 64 (P < 64)
///   D          S     data region: the tensors' bytes (S is the header's "data_size")
///   D + S      4     u32 CRC-32 (zlib's crc32, the gzip/PNG polynomial) of bytes [0, D + S)
///
/// so the file is exactly D + S + 4 bytes long. The header is one JSON object:
///
///   {"data_size": S,
///    "tensors": [{"name": "model.w", "dtype": "float32", "shape": [2, 3], "offset": 0, "length": 24},
///                ...],
///    "metadata": {...}}
///
///   - dtype is one of "float32", "float64", "int32", "int64", "bool" (bool: one byte, 0 or 1);
///   - shape is a list of non-negative integers ([] for a 0-d tensor);
///   - offset is relative to D and a multiple of 64, so every tensor starts 64-byte aligned in the
///     file; length = numel × element size; [offset, offset + length) lies inside [0, S), and
///     the ranges of different tensors do not overlap; names are unique;
///   - each tensor's bytes are its elements in row-major (C) order, little-endian; the bytes
///     between tensors (alignment padding) are zeros;
///   - metadata is a free-form JSON object (step, generator states, optimizer/schedule scalars,
///     the model's config, ...). JSON cannot hold NaN or infinities: save_checkpoint refuses them,
///     and the helpers below write such doubles as the strings "nan", "inf", "-inf".
///
/// Readers ignore header keys they do not know, and refuse a version they do not know: version 1
/// readers refuse version ≥ 2.
///
/// ---- Guarantees ----
///
/// save_checkpoint writes "<path>.tmp.<pid>" in the same directory, fsyncs it, renames it over
/// `path` and fsyncs the directory: a save that is interrupted (crash, SIGKILL, power loss) leaves
/// the previous file at `path` intact. A process killed mid-save may leave its temporary file
/// behind; a later save by a process with the same pid overwrites it, and it is safe to delete.
/// Two threads of one process must not save to the same path at once (they share the temporary
/// name). `path` itself is replaced: a symbolic link there is replaced, not followed.
/// load_checkpoint refuses a header longer than 64 MiB or holding a NUL byte before reading on.
/// load_checkpoint checks everything (structure, every header entry against the file's size, the
/// checksum, bool bytes) before it returns anything, and reads no length from the file into an
/// allocation before checking it against the file's size. Both throw tapestry::Error naming the path
/// and what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/random.h"
#include "core/tensor.h"

namespace tapestry {

/// The checkpoint format version this build writes, and the newest it reads.
constexpr uint32_t kCheckpointVersion = 1;

/// A checkpoint's content: named tensors and a JSON metadata object.
struct Checkpoint {
  /// Written in name order. Any device, dtype, layout; load_checkpoint returns contiguous CPU tensors
  /// that do not require grad. Two names that view the same storage are written twice.
  std::map<std::string, Tensor> tensors;
  /// Must be a JSON object (null counts as empty) without NaN or infinite numbers.
  nlohmann::json metadata = nlohmann::json::object();
};

/// Saves atomically (see the top of this file). Throws Error naming the path on an undefined tensor,
/// metadata that is not an object or holds a non-finite number, and on any OS error (with strerror).
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);

/// Loads and fully validates a checkpoint; throws Error naming the path and the problem.
Checkpoint load_checkpoint(const std::string& path);

// ---- Helpers: putting states into a Checkpoint and getting them back ----
//
// Each add_* refuses (Error) a `prefix` / `name` the checkpoint already uses; each getter throws
// Error naming the checkpoint entry when it is missing or malformed.

/// Every tensor of `tensors` as "<prefix><name>" (a module state dict with prefix "model.").
void add_tensors(Checkpoint& checkpoint, const std::string& prefix, const std::map<std::string, Tensor>& tensors);
/// The tensors whose names start with `prefix`, with the prefix removed.
std::map<std::string, Tensor> tensors_with_prefix(const Checkpoint& checkpoint, const std::string& prefix);

/// metadata[name] = {"seed", "offset"}; generator_state returns a Generator in that state.
void add_generator_state(Checkpoint& checkpoint, const std::string& name, const Generator& generator);
/// The Generator that add_generator_state stored as `name`.
Generator generator_state(const Checkpoint& checkpoint, const std::string& name);

// ---- Building blocks for the records of higher layers (optim/checkpoint.h, ...) ----
//
// The format knows nothing of optimizers or schedules; the layers that own such states write them
// with these, so that every record is claimed, encoded and checked the same way.

/// Refuses (Error from `op`) an empty key, or one the checkpoint's metadata already has.
void claim_metadata_key(Checkpoint& checkpoint, const std::string& key, const char* op);
/// Adds `tensor` as `name`; refuses (Error from `op`) an undefined tensor or a name in use.
void add_checkpoint_tensor(Checkpoint& checkpoint, const std::string& name, const Tensor& tensor, const char* op);
/// x as JSON: a number, or for NaN and infinities (which JSON cannot hold) "nan", "inf", "-inf".
nlohmann::json encode_double(double x);

/// The metadata object checkpoint.metadata[key], read field by field. Every failure throws Error
/// from `op` naming the record as "<what> \"<key>\"" and the field.
class MetadataRecord {
 public:
  /// Throws Error when checkpoint.metadata[key] is missing or not an object.
  MetadataRecord(const Checkpoint& checkpoint, const std::string& key, const char* op, const char* what);

  /// Field `key`, any JSON value.
  const nlohmann::json& get(const char* key) const;
  /// Whether the record has field `key` (for fields that later versions added).
  bool has(const char* key) const;
  /// Field `key`, which must be a string.
  std::string string(const char* key) const;
  /// Field `key`, which must be an integer.
  int64_t int64(const char* key) const;
  /// Field `key`, which must be a non-negative integer.
  uint64_t uint64(const char* key) const;
  double real(const char* key) const;  ///< a number, or one encode_double wrote
  /// Field `key`, which must be an array of integers.
  std::vector<int64_t> int64_list(const char* key) const;
  /// Field `key`, which must be an array of strings.
  std::vector<std::string> string_list(const char* key) const;
  /// Field `key`, which must be an array of numbers (or values encode_double wrote).
  std::vector<double> real_list(const char* key) const;

 private:
  [[noreturn]] void wrong(const char* key, const char* expected) const;
  int64_t to_int64(const nlohmann::json& v, const char* key) const;
  double to_real(const nlohmann::json& v, const char* key, const char* expected) const;

  const char* op_;
  std::string where_;
  const nlohmann::json* object_ = nullptr;
};

}  // namespace tapestry
