/// @file
/// IDX files, the format of MNIST and Fashion-MNIST (docs/DATA.md): plain or gzip-compressed.
///
///   bytes 0-1  zero
///   byte  2    dtype: 0x08 unsigned byte (the only one MNIST uses, and the only one read here;
///              0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64 are refused by name)
///   byte  3    number of dimensions D
///   then       D dimensions, 4-byte big-endian unsigned, then the data, row-major
///
/// Pixels come back as the file's bytes (0..255), not normalised: a model divides by 255 where it
/// wants [0, 1]. The readers return host data; batching and tensors are the caller's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapestry::data {

///@{
/// At most 8 dimensions and 4 GiB of data per file.
inline constexpr int64_t kMaxIdxDims = 8;
inline constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 32;
///@}

/// The contents of an IDX file (read_idx).
struct IdxArray {
  std::vector<int64_t> shape;  ///< the dimensions, from the header
  std::vector<uint8_t> data;  ///< product(shape) bytes, row-major
};

/// The IDX file at `path`, gzip-compressed or not (zlib reads either). Throws
/// `Error("idx: <path>: ...")` when the file is missing, shorter than its header, not IDX (magic), of
/// another dtype, has 0 or more than kMaxIdxDims dimensions or more than kMaxIdxBytes of data, holds
/// fewer or more bytes of data than its dimensions say, or is corrupt gzip (zlib's message is
/// included).
IdxArray read_idx(const std::string& path);

/// Images and their labels, e.g. train-images-idx3-ubyte.gz + train-labels-idx1-ubyte.gz.
struct LabelledImages {
  ///@{
  /// The height and width of every image, in pixels.
  int64_t rows = 0, cols = 0;
  ///@}
  std::vector<uint8_t> pixels;  ///< (N, rows, cols)
  std::vector<int64_t> labels;  ///< (N)
  /// N, the number of images.
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

/// Throws read_idx's errors, and Error naming the file when the images are not 3-D, the labels not
/// 1-D, or their counts differ.
LabelledImages read_idx_images(const std::string& images_path, const std::string& labels_path);

/// Images as points to cluster: n = min(max_points, N) images (all when max_points is 0), evenly
/// spaced (image ⌊j·N/n⌋ for j < n), each flattened to rows·cols values scaled to unit length (an
/// all-zero image stays zero); x (n, rows·cols) float32 on the host, and their labels.
struct ImagePoints {
  Tensor x;                     ///< (n, rows·cols) float32
  std::vector<int64_t> labels;  ///< (n)
};
/// Throws Error naming `source` when there is no image with a pixel.
ImagePoints unit_image_points(const LabelledImages& images, int64_t max_points, const std::string& source);

}  // namespace tapestry::data
