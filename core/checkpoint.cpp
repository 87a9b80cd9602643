// The checkpoint format (spec at the top of core/checkpoint.h and in docs/CHECKPOINT.md).
#include "core/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "core/creation.h"

// Tensor bytes go between memory and the file unchanged, so the host must be little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the checkpoint code assumes a little-endian host");

namespace tapestry {

namespace {

using json = nlohmann::json;

constexpr char kMagic[8] = {'T', 'A', 'P', 'E', 'S', 'T', 'R', 'Y'};
constexpr uint64_t kPrefixBytes = 20;   // magic, version, header length
constexpr uint64_t kChecksumBytes = 4;  // the trailing CRC-32
constexpr uint64_t kAlignment = 64;
// JSON nesting the loader accepts (the parser is iterative, but a user walking the metadata
// recursively is not); the header's own structure takes one level, metadata the rest.
constexpr int kMaxHeaderDepth = 256;
constexpr int kMaxMetadataDepth = kMaxHeaderDepth - 1;
constexpr size_t kChunk = size_t(1) << 20;  // buffer size for streaming I/O
// The longest JSON header the loader reads. A model's header is kilobytes (names, shapes, run
// state); a length beyond this is corruption, refused before anything is allocated or read.
constexpr uint64_t kMaxHeaderBytes = uint64_t(64) << 20;
// A header that does not parse is reported as corruption when the file's checksum fails, which
// takes reading the whole file: done only for files up to this size, so that a huge (e.g. sparse)
// file with a bad header is refused at once.
constexpr uint64_t kMaxChecksumOnError = uint64_t(256) << 20;

uint64_t align_up(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
uint64_t get_u64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

uint32_t crc_update(uint32_t crc, const void* data, size_t n) {
  if (n == 0) return crc;  // zlib returns 0 for a null buffer, which an empty tensor may have
  return static_cast<uint32_t>(crc32_z(crc, static_cast<const Bytef*>(data), n));
}

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// A JSON value for an error message, cut short.
std::string excerpt(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::optional<DType> parse_dtype(const std::string& name) {
  for (DType d : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool, DType::BFloat16})
    if (name == dtype_name(d)) return d;
  return std::nullopt;
}

// ---- saving ----

[[noreturn]] void save_fail(const std::string& path, const std::string& what) {
  fail("save_checkpoint", "'", path, "': ", what);
}

// Refuses what JSON cannot hold (NaN, infinities: nlohmann would write them as null) and nesting
// deeper than the loader accepts. Iterative, so that no metadata can exhaust the stack.
void check_metadata(const std::string& path, const json& metadata) {
  struct Item {
    const json* value;
    std::string where;  // a JSON pointer
    int depth;
  };
  std::vector<Item> stack{{&metadata, "", 1}};
  while (!stack.empty()) {
    const Item item = std::move(stack.back());
    stack.pop_back();
    const json& v = *item.value;
    const std::string where = item.where.size() <= 80 ? item.where : item.where.substr(0, 77) + "...";
    if (v.is_number_float() && !std::isfinite(v.get<double>()))
      save_fail(path, "metadata" + where + " is " + std::to_string(v.get<double>()) +
                          ", which JSON cannot hold; store it as a string");
    if (!v.is_structured()) continue;
    if (item.depth > kMaxMetadataDepth)
      save_fail(path, "metadata" + where + " nests deeper than " + std::to_string(kMaxMetadataDepth) + " levels");
    if (v.is_object()) {
      for (const auto& [key, child] : v.items()) stack.push_back({&child, item.where + "/" + key, item.depth + 1});
    } else {
      for (size_t i = 0; i < v.size(); ++i)
        stack.push_back({&v[i], item.where + "/" + std::to_string(i), item.depth + 1});
    }
  }
}

// Removes the temporary file unless the save got as far as renaming it.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) {}
  ~TempFile() {
    if (!committed_) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }
  void commit() { committed_ = true; }

 private:
  std::string path_;
  bool committed_ = false;
};

// Buffered writes with a running CRC-32; every OS error throws, naming both files.
class Writer {
 public:
  Writer(const std::string& target, const std::string& temp) : target_(target), temp_(temp) {
    fd_ = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) fail_os("cannot create the temporary file");
    buffer_.reserve(kChunk);
  }
  ~Writer() {
    if (fd_ >= 0) ::close(fd_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  void write(const void* data, size_t n) {
    crc_ = crc_update(crc_, data, n);
    if (buffer_.size() + n <= kChunk) {
      const char* p = static_cast<const char*>(data);
      buffer_.insert(buffer_.end(), p, p + n);
      return;
    }
    flush();
    write_all(data, n);
  }
  void write_zeros(size_t n) {
    static const char zeros[kAlignment] = {};
    while (n > 0) {
      const size_t k = std::min<size_t>(n, kAlignment);
      write(zeros, k);
      n -= k;
    }
  }
  // Appends the checksum of everything written, then flushes, fsyncs and closes the file.
  void finish() {
    unsigned char crc[kChecksumBytes];
    put_u32(crc, crc_);
    flush();
    write_all(crc, sizeof crc);
    if (::fsync(fd_) != 0) fail_os("cannot fsync");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail_os("cannot close");
  }

 private:
  [[noreturn]] void fail_os(const std::string& what, int err = errno) {
    save_fail(target_, what + " '" + temp_ + "': " + std::strerror(err));
  }
  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  void write_all(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t written = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
      if (written < 0) {
        if (errno == EINTR) continue;
        fail_os("cannot write");
      }
      if (written == 0) fail_os("short write to", ENOSPC);
      p += written;
      n -= static_cast<size_t>(written);
    }
  }

  std::string target_, temp_;
  int fd_ = -1;
  std::vector<char> buffer_;
  uint32_t crc_ = 0;
};

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Makes the rename durable. File systems that cannot fsync a directory say EINVAL; that is not an
// error of the save.
void sync_directory(const std::string& path) {
  const std::string dir = directory_of(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    save_fail(path, "written, but cannot open its directory '" + dir + "' to sync it: " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL)
    save_fail(path, "written, but cannot fsync its directory '" + dir + "': " + std::strerror(err));
}

// ---- loading ----

// A problem with the file's content, found while checking it; load_checkpoint adds the path and,
// where it helps, whether the checksum matches.
struct Invalid {
  std::string what;
};

[[noreturn]] void invalid(const std::string& what) { throw Invalid{what}; }

[[noreturn]] void load_fail(const std::string& path, const std::string& what) {
  fail("load_checkpoint", "'", path, "': ", what);
}

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO must not hang; it is refused below as not a regular file.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd_ < 0) load_fail(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st;
    std::string problem;
    if (::fstat(fd_, &st) != 0) problem = std::string("cannot stat: ") + std::strerror(errno);
    else if (S_ISDIR(st.st_mode)) problem = "is a directory, not a checkpoint file";
    else if (!S_ISREG(st.st_mode)) problem = "is not a regular file";
    if (!problem.empty()) {
      ::close(fd_);  // the destructor does not run for a constructor that throws
      load_fail(path, problem);
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~Reader() { ::close(fd_); }
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  uint64_t size() const { return size_; }

  void read(uint64_t offset, void* data, size_t n) const {
    char* p = static_cast<char*>(data);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, p, std::min<size_t>(n, size_t(1) << 30), static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR) continue;
        load_fail(path_, std::string("cannot read: ") + std::strerror(errno));
      }
      if (got == 0) load_fail(path_, "the file became shorter while it was read (another process writing it?)");
      p += got;
      n -= static_cast<size_t>(got);
      offset += static_cast<uint64_t>(got);
    }
  }

  // CRC-32 of bytes [begin, end), continuing from `crc`.
  uint32_t checksum(uint64_t begin, uint64_t end, uint32_t crc) const {
    if (begin >= end) return crc;
    std::vector<unsigned char> buffer(std::min<uint64_t>(kChunk, end - begin));
    while (begin < end) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), end - begin));
      read(begin, buffer.data(), n);
      crc = crc_update(crc, buffer.data(), n);
      begin += n;
    }
    return crc;
  }

  // Whether the trailing CRC-32 matches the rest of the file (which must hold at least 4 bytes).
  bool checksum_matches() const {
    unsigned char stored[kChecksumBytes];
    read(size_ - kChecksumBytes, stored, sizeof stored);
    return checksum(0, size_ - kChecksumBytes, 0) == get_u32(stored);
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t offset, length;  // in the data region
};

struct Header {
  uint64_t data_size = 0;
  std::vector<Entry> entries;  // sorted by (offset, length)
  json metadata;
};

json parse_json(const std::string& text) {
  // nlohmann's parser takes a NUL byte for the end of the input and ignores what follows it.
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) invalid("the header holds a NUL byte at offset " + std::to_string(nul));
  const json::parser_callback_t limit_depth = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxHeaderDepth) invalid("the JSON header nests deeper than " + std::to_string(kMaxHeaderDepth) + " levels");
    return true;
  };
  try {
    return json::parse(text, limit_depth);
  } catch (const json::exception& e) {
    invalid(std::string("the header is not valid JSON: ") + e.what());
  }
}

const json& field(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) invalid(where + " has no \"" + key + "\"");
  return *it;
}

uint64_t unsigned_field(const json& object, const char* key, const std::string& where) {
  const json& v = field(object, key, where);
  if (!v.is_number_unsigned()) invalid(where + " \"" + key + "\" must be a non-negative integer, got " + excerpt(v));
  return v.get<uint64_t>();
}

Entry parse_entry(const json& e, size_t index, uint64_t data_size) {
  std::string where = "tensor entry " + std::to_string(index);
  if (!e.is_object()) invalid(where + " is not an object: " + excerpt(e));
  const json& name = field(e, "name", where);
  if (!name.is_string()) invalid(where + " \"name\" is not a string: " + excerpt(name));
  Entry entry;
  entry.name = name.get<std::string>();
  where = "tensor '" + entry.name + "'";

  const json& dtype = field(e, "dtype", where);
  const std::optional<DType> parsed = dtype.is_string() ? parse_dtype(dtype.get<std::string>()) : std::nullopt;
  if (!parsed) invalid(where + " has an unknown dtype " + excerpt(dtype));
  entry.dtype = *parsed;

  // numel, and the product of the sizes with zeros counted as ones (the largest stride an empty
  // tensor's layout computes), must both fit: a shape such as (0, 2^62, 2^62) is refused too.
  const json& shape = field(e, "shape", where);
  if (!shape.is_array()) invalid(where + " \"shape\" is not a list: " + excerpt(shape));
  uint64_t numel = 1, extent = 1;
  const uint64_t int64_max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (const json& size : shape) {
    if (!size.is_number_unsigned() || size.get<uint64_t>() > int64_max)
      invalid(where + " has a size that is not a non-negative integer in its shape " + excerpt(shape));
    const uint64_t s = size.get<uint64_t>();
    if (__builtin_mul_overflow(numel, s, &numel) || __builtin_mul_overflow(extent, std::max<uint64_t>(s, 1), &extent) ||
        extent > int64_max)
      invalid(where + " has a shape too large to exist: " + excerpt(shape));
    entry.shape.push_back(static_cast<int64_t>(s));
  }

  entry.offset = unsigned_field(e, "offset", where);
  entry.length = unsigned_field(e, "length", where);
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel, static_cast<uint64_t>(element_size(entry.dtype)), &nbytes))
    invalid(where + " has a shape too large to exist: " + excerpt(shape));
  if (nbytes != entry.length)
    invalid(where + " (" + dtype_name(entry.dtype) + ", shape " + to_string(entry.shape) + ") takes " +
            std::to_string(nbytes) + " bytes, but its entry says " + std::to_string(entry.length));
  if (entry.offset % kAlignment != 0)
    invalid(where + " starts at offset " + std::to_string(entry.offset) + ", not a multiple of " +
            std::to_string(kAlignment));
  if (entry.offset > data_size || entry.length > data_size - entry.offset)
    invalid(where + " lies at bytes [" + std::to_string(entry.offset) + ", +" + std::to_string(entry.length) +
            ") outside the data region of " + std::to_string(data_size) + " bytes");
  return entry;
}

// Checks the header against the file; throws Invalid, or Error for a file of the wrong size.
Header parse_header(const std::string& text, uint64_t data_start, uint64_t file_size, const std::string& path) {
  json root = parse_json(text);
  if (!root.is_object()) invalid("the header is not a JSON object: " + excerpt(root));
  Header header;
  header.data_size = unsigned_field(root, "data_size", "the header");

  // The file size follows from the header: a shorter file was cut off.
  if (header.data_size > std::numeric_limits<uint64_t>::max() - data_start - kChecksumBytes)
    invalid("the header claims a data region of " + std::to_string(header.data_size) + " bytes");
  const uint64_t expected = data_start + header.data_size + kChecksumBytes;
  if (file_size < expected)
    load_fail(path, "truncated: expected " + std::to_string(expected) + " bytes, found " + std::to_string(file_size));
  if (file_size > expected)
    load_fail(path, "expected " + std::to_string(expected) + " bytes, found " + std::to_string(file_size) +
                        ": trailing bytes after the checksum, or a corrupt header");

  const json& tensors = field(root, "tensors", "the header");
  if (!tensors.is_array()) invalid("the header's \"tensors\" is not a list: " + excerpt(tensors));
  for (size_t i = 0; i < tensors.size(); ++i) header.entries.push_back(parse_entry(tensors[i], i, header.data_size));

  std::vector<const Entry*> by_name;
  for (const Entry& e : header.entries) by_name.push_back(&e);
  std::sort(by_name.begin(), by_name.end(), [](const Entry* a, const Entry* b) { return a->name < b->name; });
  for (size_t i = 1; i < by_name.size(); ++i)
    if (by_name[i]->name == by_name[i - 1]->name) invalid("tensor '" + by_name[i]->name + "' is listed twice");

  // Disjoint byte ranges: the tensors' allocations then add up to at most the file's size.
  std::sort(header.entries.begin(), header.entries.end(), [](const Entry& a, const Entry& b) {
    return std::make_pair(a.offset, a.length) < std::make_pair(b.offset, b.length);
  });
  for (size_t i = 1; i < header.entries.size(); ++i) {
    const Entry &a = header.entries[i - 1], &b = header.entries[i];
    if (a.offset + a.length > b.offset) invalid("tensors '" + a.name + "' and '" + b.name + "' overlap");
  }

  json& metadata = root["metadata"];
  if (!metadata.is_object()) invalid("the header's \"metadata\" is missing or not an object");
  header.metadata = std::move(metadata);
  return header;
}

}  // namespace

// ---- save ----

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  TP_CHECK(!path.empty(), "save_checkpoint", "got an empty path");
  const json metadata = checkpoint.metadata.is_null() ? json::object() : checkpoint.metadata;
  if (!metadata.is_object())
    save_fail(path, std::string("metadata must be a JSON object, got ") + metadata.type_name());
  check_metadata(path, metadata);

  json entries = json::array();
  uint64_t data_size = 0;
  for (const auto& [name, tensor] : checkpoint.tensors) {
    if (!tensor.defined()) save_fail(path, "tensor '" + name + "' is undefined");
    const uint64_t length = static_cast<uint64_t>(tensor.numel()) * element_size(tensor.dtype());
    entries.push_back({{"name", name},
                       {"dtype", dtype_name(tensor.dtype())},
                       {"shape", tensor.shape()},
                       {"offset", data_size},
                       {"length", length}});
    data_size = align_up(data_size + length);
  }
  std::string text;
  try {
    text = json{{"data_size", data_size}, {"tensors", std::move(entries)}, {"metadata", metadata}}.dump();
  } catch (const json::exception& e) {
    save_fail(path, std::string("tensor names and metadata strings must be valid UTF-8: ") + e.what());
  }

  unsigned char prefix[kPrefixBytes];
  std::memcpy(prefix, kMagic, sizeof kMagic);
  put_u32(prefix + 8, kCheckpointVersion);
  put_u64(prefix + 12, text.size());
  const uint64_t data_start = align_up(kPrefixBytes + text.size());

  TempFile temp(path + ".tmp." + std::to_string(::getpid()));
  {
    Writer out(path, temp.path());
    out.write(prefix, sizeof prefix);
    out.write(text.data(), text.size());
    out.write_zeros(data_start - kPrefixBytes - text.size());
    uint64_t written = 0;
    for (const auto& [name, tensor] : checkpoint.tensors) {
      const Tensor host = host_contiguous(tensor);  // one at a time: at most one extra copy in memory
      const uint64_t length = static_cast<uint64_t>(host.numel()) * element_size(host.dtype());
      out.write(host.raw_data(), length);
      out.write_zeros(align_up(written + length) - written - length);
      written = align_up(written + length);
    }
    out.finish();
  }
  if (::rename(temp.path().c_str(), path.c_str()) != 0)
    save_fail(path, "cannot rename '" + temp.path() + "' over it: " + std::strerror(errno));
  temp.commit();
  sync_directory(path);
}

// ---- load ----

namespace {

// The loader; load_checkpoint adds the path to an allocation failure.
Checkpoint load_checked(const std::string& path) {
  const Reader file(path);
  const uint64_t size = file.size();

  // The fixed prefix: magic, version, header length.
  unsigned char prefix[kPrefixBytes];
  const size_t have = static_cast<size_t>(std::min<uint64_t>(size, kPrefixBytes));
  file.read(0, prefix, have);
  if (std::memcmp(prefix, kMagic, std::min(have, sizeof kMagic)) != 0)
    load_fail(path, "not a Tapestry checkpoint (bad magic)");
  const uint64_t minimum = kPrefixBytes + kChecksumBytes;
  if (size < minimum)
    load_fail(path, "truncated: expected at least " + std::to_string(minimum) + " bytes, found " + std::to_string(size));
  const uint32_t version = get_u32(prefix + 8);
  if (version > kCheckpointVersion)
    load_fail(path, "written in checkpoint format version " + std::to_string(version) +
                        ", newer than this build reads (version " + std::to_string(kCheckpointVersion) +
                        "): update Tapestry to load it");
  if (version == 0) load_fail(path, "unknown checkpoint format version 0: the file is corrupt");
  const uint64_t header_length = get_u64(prefix + 12);
  if (header_length > size - minimum)
    load_fail(path, "header length " + std::to_string(header_length) + " does not fit in a file of " +
                        std::to_string(size) + " bytes: truncated or corrupt");
  if (header_length > kMaxHeaderBytes)
    load_fail(path, "header length " + std::to_string(header_length) + " exceeds the limit of " +
                        std::to_string(kMaxHeaderBytes) + " bytes: corrupt");
  const uint64_t data_start = align_up(kPrefixBytes + header_length);

  // The header, checked against the file before anything is allocated from it. A bad header in a
  // file whose checksum fails is reported as corruption.
  Header header;
  std::string text(static_cast<size_t>(header_length), '\0');
  file.read(kPrefixBytes, text.data(), text.size());
  try {
    header = parse_header(text, data_start, size, path);
  } catch (const Invalid& problem) {
    if (size <= kMaxChecksumOnError && !file.checksum_matches())
      load_fail(path, "checksum mismatch: the file is corrupt (" + problem.what + ")");
    load_fail(path, problem.what);
  }

  // The data, read in file order with the checksum running over every byte.
  uint32_t crc = crc_update(0, prefix, sizeof prefix);
  crc = crc_update(crc, text.data(), text.size());
  crc = file.checksum(kPrefixBytes + header_length, data_start, crc);
  Checkpoint checkpoint;
  uint64_t position = 0;  // in the data region
  for (const Entry& entry : header.entries) {
    crc = file.checksum(data_start + position, data_start + entry.offset, crc);
    Tensor tensor = empty(entry.shape, {entry.dtype, Device::cpu()});
    file.read(data_start + entry.offset, tensor.raw_data(), static_cast<size_t>(entry.length));
    crc = crc_update(crc, tensor.raw_data(), static_cast<size_t>(entry.length));
    position = std::max(position, entry.offset + entry.length);
    checkpoint.tensors.emplace(entry.name, std::move(tensor));
  }
  crc = file.checksum(data_start + position, data_start + header.data_size, crc);
  unsigned char stored[kChecksumBytes];
  file.read(data_start + header.data_size, stored, sizeof stored);
  if (get_u32(stored) != crc)
    load_fail(path, "checksum mismatch (stored " + hex32(get_u32(stored)) + ", computed " + hex32(crc) +
                        "): the file is corrupt");

  // A bool byte other than 0 or 1 is not a valid C++ bool; only a faulty writer makes one.
  for (const auto& [name, tensor] : checkpoint.tensors) {
    if (tensor.dtype() != DType::Bool) continue;
    const unsigned char* bytes = static_cast<const unsigned char*>(tensor.raw_data());
    for (int64_t i = 0; i < tensor.numel(); ++i)
      if (bytes[i] > 1)
        load_fail(path, "bool tensor '" + name + "' holds the byte " + std::to_string(bytes[i]) + " at element " +
                            std::to_string(i) + " (only 0 and 1 are valid)");
  }
  checkpoint.metadata = std::move(header.metadata);
  return checkpoint;
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  // Every size is checked against the file before it is allocated, so this is a real shortage;
  // the message still names the file.
  try {
    return load_checked(path);
  } catch (const std::bad_alloc&) {
    load_fail(path, "out of memory while loading it");
  }
}

// ---- building blocks ----

void claim_metadata_key(Checkpoint& checkpoint, const std::string& key, const char* op) {
  TP_CHECK(!key.empty(), op, "needs a non-empty name");
  if (checkpoint.metadata.is_null()) checkpoint.metadata = json::object();
  TP_CHECK(checkpoint.metadata.is_object(), op, "the checkpoint's metadata is not a JSON object");
  TP_CHECK(!checkpoint.metadata.contains(key), op, "the checkpoint's metadata already has \"", key, "\"");
}

void add_checkpoint_tensor(Checkpoint& checkpoint, const std::string& name, const Tensor& tensor, const char* op) {
  TP_CHECK(tensor.defined(), op, "tensor '", name, "' is undefined");
  TP_CHECK(checkpoint.tensors.emplace(name, tensor).second, op, "the checkpoint already has a tensor '", name, "'");
}

// nlohmann writes a number in the shortest form that reads back to the same double.
json encode_double(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

MetadataRecord::MetadataRecord(const Checkpoint& checkpoint, const std::string& key, const char* op, const char* what)
    : op_(op), where_(std::string(what) + " \"" + key + "\"") {
  const json& metadata = checkpoint.metadata;
  const auto it = metadata.is_object() ? metadata.find(key) : metadata.end();
  if (!metadata.is_object() || it == metadata.end()) fail(op_, "the checkpoint has no ", where_);
  if (!it->is_object()) fail(op_, "the checkpoint's ", where_, " is not an object: ", excerpt(*it));
  object_ = &*it;
}

const json& MetadataRecord::get(const char* key) const {
  const auto it = object_->find(key);
  if (it == object_->end()) fail(op_, "the checkpoint's ", where_, " has no \"", key, "\"");
  return *it;
}

bool MetadataRecord::has(const char* key) const { return object_->contains(key); }

void MetadataRecord::wrong(const char* key, const char* expected) const {
  fail(op_, "the checkpoint's ", where_, " \"", key, "\" is not ", expected, ": ", excerpt(get(key)));
}

std::string MetadataRecord::string(const char* key) const {
  if (!get(key).is_string()) wrong(key, "a string");
  return get(key).get<std::string>();
}

int64_t MetadataRecord::int64(const char* key) const { return to_int64(get(key), key); }

uint64_t MetadataRecord::uint64(const char* key) const {
  if (!get(key).is_number_unsigned()) wrong(key, "a non-negative integer");
  return get(key).get<uint64_t>();
}

double MetadataRecord::real(const char* key) const { return to_real(get(key), key, "a number"); }

std::vector<double> MetadataRecord::real_list(const char* key) const {
  if (!get(key).is_array()) wrong(key, "a list of numbers");
  std::vector<double> out;
  for (const json& v : get(key)) out.push_back(to_real(v, key, "a list of numbers"));
  return out;
}

double MetadataRecord::to_real(const json& v, const char* key, const char* expected) const {
  if (v.is_number()) return v.get<double>();
  if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  wrong(key, expected);
}

std::vector<int64_t> MetadataRecord::int64_list(const char* key) const {
  if (!get(key).is_array()) wrong(key, "a list of integers");
  std::vector<int64_t> out;
  for (const json& v : get(key)) out.push_back(to_int64(v, key));
  return out;
}

std::vector<std::string> MetadataRecord::string_list(const char* key) const {
  if (!get(key).is_array()) wrong(key, "a list of strings");
  std::vector<std::string> out;
  for (const json& v : get(key)) {
    if (!v.is_string()) wrong(key, "a list of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

int64_t MetadataRecord::to_int64(const json& v, const char* key) const {
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
    wrong(key, "a 64-bit integer");
  return v.get<int64_t>();
}

// ---- helpers ----

void add_tensors(Checkpoint& checkpoint, const std::string& prefix, const std::map<std::string, Tensor>& tensors) {
  for (const auto& [name, tensor] : tensors) add_checkpoint_tensor(checkpoint, prefix + name, tensor, "add_tensors");
}

std::map<std::string, Tensor> tensors_with_prefix(const Checkpoint& checkpoint, const std::string& prefix) {
  std::map<std::string, Tensor> out;
  for (auto it = checkpoint.tensors.lower_bound(prefix);
       it != checkpoint.tensors.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    out.emplace(it->first.substr(prefix.size()), it->second);
  return out;
}

void add_generator_state(Checkpoint& checkpoint, const std::string& name, const Generator& generator) {
  claim_metadata_key(checkpoint, name, "add_generator_state");
  checkpoint.metadata[name] = {{"seed", generator.seed()}, {"offset", generator.offset()}};
}

Generator generator_state(const Checkpoint& checkpoint, const std::string& name) {
  const MetadataRecord record(checkpoint, name, "generator_state", "generator state");
  Generator generator;
  generator.set_state(record.uint64("seed"), record.uint64("offset"));
  return generator;
}

}  // namespace tapestry
