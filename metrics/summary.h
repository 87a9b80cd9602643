/// @file
/// The mean and sample standard deviation of repeated measurements (seeds, folds), as tables report
/// them: "mean ± std".
#pragma once

#include <cstdint>
#include <vector>

namespace tapestry::metrics {

/// The summary of some values: "mean ± std" over n.
struct Summary {
  double mean = 0;  ///< the mean
  double std = 0;  ///< the sample standard deviation (divisor n - 1); 0 for one value
  int64_t n = 0;  ///< the number of values
};

/// Throws Error for no values.
Summary summarize(const std::vector<double>& values);

}  // namespace tapestry::metrics
