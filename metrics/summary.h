// The mean and sample standard deviation of repeated measurements (seeds, folds), as tables report
// them: "mean ± std".
#pragma once

#include <cstdint>
#include <vector>

namespace tapestry::metrics {

struct Summary {
  double mean = 0;
  double std = 0;  // the sample standard deviation (divisor n - 1); 0 for one value
  int64_t n = 0;
};

// Throws Error for no values.
Summary summarize(const std::vector<double>& values);

}  // namespace tapestry::metrics
