#include "metrics/summary.h"

#include <cmath>

#include "core/error.h"

namespace tapestry::metrics {

Summary summarize(const std::vector<double>& values) {
  TP_CHECK(!values.empty(), "summarize", "needs at least one value");
  Summary s;
  s.n = int64_t(values.size());
  for (const double x : values) s.mean += x;
  s.mean /= double(s.n);
  if (s.n < 2) return s;
  double squares = 0;
  for (const double x : values) squares += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(squares / double(s.n - 1));
  return s;
}

}  // namespace tapestry::metrics
