#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <sstream>
#include <system_error>

#include "core/creation.h"
#include "core/error.h"

namespace tapestry::data {

namespace {

constexpr const char* kReader = "idx";

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << (shape.size() == 1 ? ",)" : ")");
  return out.str();
}

const char* dtype_name(int dtype) {
  switch (dtype) {
    case 0x08: return "unsigned byte";
    case 0x09: return "int8";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

// Reads up to `size` bytes from the (possibly gzip) stream; returns how many it got. Corrupt
// compressed data is an error with zlib's message.
size_t read_bytes(gzFile file, uint8_t* out, size_t size, const std::string& path) {
  size_t total = 0;
  while (total < size) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(size - total, size_t{1} << 24));
    const int n = gzread(file, out + total, chunk);
    int code = Z_OK;
    const char* message = gzerror(file, &code);
    TP_CHECK(n >= 0 && (code == Z_OK || code == Z_BUF_ERROR), kReader, path, ": corrupt gzip data (", message, ")");
    if (n == 0) break;
    total += static_cast<size_t>(n);
  }
  return total;
}

}  // namespace

IdxArray read_idx(const std::string& path) {
  std::error_code ec;
  TP_CHECK(std::filesystem::exists(path, ec), kReader, path, ": no such file");
  TP_CHECK(!std::filesystem::is_directory(path, ec), kReader, path, ": is a folder, not an IDX file");
  errno = 0;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), &gzclose);
  TP_CHECK(file, kReader, path, ": cannot open: ", errno ? std::strerror(errno) : "out of memory");

  uint8_t magic[4];
  const size_t got = read_bytes(file.get(), magic, 4, path);
  TP_CHECK(got > 0, kReader, path, ": empty file");
  TP_CHECK(got == 4, kReader, path, ": ", got, " bytes, too short for an IDX header");
  TP_CHECK(magic[0] == 0 && magic[1] == 0, kReader, path, ": not an IDX file (its first two bytes are not zero)");
  TP_CHECK(magic[2] == 0x08, kReader, path, ": dtype 0x", std::hex, int(magic[2]), std::dec, " (",
           dtype_name(magic[2]), ") is not supported; only 0x08 (unsigned byte) is read");
  const int dims = magic[3];
  TP_CHECK(dims >= 1 && dims <= kMaxIdxDims, kReader, path, ": header says ", dims,
           " dimensions; expected 1 to ", kMaxIdxDims);

  uint8_t header[4 * kMaxIdxDims];
  const size_t header_bytes = 4 * static_cast<size_t>(dims);
  TP_CHECK(read_bytes(file.get(), header, header_bytes, path) == header_bytes, kReader, path,
           ": the file ends inside its header of ", dims, " dimensions");
  IdxArray array;
  for (int d = 0; d < dims; ++d) {
    const uint8_t* b = header + 4 * d;
    array.shape.push_back((int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | b[3]);
  }
  // Every size is below 2^32 and the running product is checked to stay at most 2^32 before the next
  // multiplication, so it never overflows 64 bits.
  uint64_t bytes = 1;
  for (const int64_t size : array.shape) {
    bytes *= static_cast<uint64_t>(size);
    TP_CHECK(bytes <= kMaxIdxBytes, kReader, path, ": header says shape ", shape_string(array.shape),
             ", more than the limit of ", kMaxIdxBytes, " bytes of data");
  }
  const std::string says = detail::concat(": header says shape ", shape_string(array.shape), ", ", bytes,
                                          " bytes of data, but the file holds ");
  // A plain file's size is known before reading; a gzip file's only by reading it, in chunks, so a
  // corrupt header claiming gigabytes costs no more memory than the data really there.
  if (gzdirect(file.get())) {
    const uintmax_t file_size = std::filesystem::file_size(path, ec);
    TP_CHECK(!ec, kReader, path, ": cannot get its size: ", ec.message());
    const uintmax_t data_size = file_size - 4 - header_bytes;
    TP_CHECK(data_size == bytes, kReader, path, says, data_size);
    array.data.resize(bytes);
    TP_CHECK(read_bytes(file.get(), array.data.data(), bytes, path) == bytes, kReader, path, ": read error");
    return array;
  }
  constexpr size_t kChunk = size_t{1} << 24;
  size_t total = 0;
  while (total < bytes) {
    array.data.resize(std::min<uint64_t>(bytes, total + kChunk));
    const size_t n = read_bytes(file.get(), array.data.data() + total, array.data.size() - total, path);
    total += n;
    TP_CHECK(total == array.data.size(), kReader, path, says, total, " (decompressed; the gzip stream ends early)");
  }
  uint8_t extra[4096];
  size_t trailing = 0, n = 0;
  while ((n = read_bytes(file.get(), extra, sizeof extra, path)) > 0) trailing += n;
  TP_CHECK(trailing == 0, kReader, path, says, bytes + trailing, " (decompressed)");
  int code = Z_OK;
  const char* message = gzerror(file.get(), &code);
  TP_CHECK(code == Z_OK, kReader, path, ": corrupt gzip data (", message, ")");
  return array;
}

LabelledImages read_idx_images(const std::string& images_path, const std::string& labels_path) {
  IdxArray images = read_idx(images_path);
  const IdxArray labels = read_idx(labels_path);
  TP_CHECK(images.shape.size() == 3, kReader, images_path, ": images of shape ", shape_string(images.shape),
           "; expected 3 dimensions (count, rows, columns)");
  TP_CHECK(labels.shape.size() == 1, kReader, labels_path, ": labels of shape ", shape_string(labels.shape),
           "; expected 1 dimension (count)");
  TP_CHECK(labels.shape[0] == images.shape[0], kReader, labels_path, " has ", labels.shape[0], " labels but ",
           images_path, " has ", images.shape[0], " images");
  LabelledImages result;
  result.rows = images.shape[1];
  result.cols = images.shape[2];
  result.pixels = std::move(images.data);
  result.labels.assign(labels.data.begin(), labels.data.end());
  return result;
}

ImagePoints unit_image_points(const LabelledImages& images, int64_t max_points, const std::string& source) {
  const int64_t total = images.size(), d = images.rows * images.cols;
  const int64_t n = max_points > 0 ? std::min(max_points, total) : total;
  TP_CHECK(n >= 1 && d >= 1, "unit_image_points", source, " holds no image with a pixel (", total, " images of ",
           images.rows, " x ", images.cols, ")");
  ImagePoints p;
  std::vector<float> x(size_t(n * d));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t from = j * total / n;
    const uint8_t* pixels = images.pixels.data() + from * d;
    double squared = 0;
    for (int64_t t = 0; t < d; ++t) squared += double(pixels[t]) * pixels[t];
    const double inverse = squared > 0 ? 1.0 / std::sqrt(squared) : 0.0;  // a /255 would cancel
    for (int64_t t = 0; t < d; ++t) x[size_t(j * d + t)] = float(pixels[t] * inverse);
    p.labels.push_back(images.labels[size_t(from)]);
  }
  p.x = from_vector(x, {n, d});
  return p;
}

}  // namespace tapestry::data
