/// @file
/// gradcheck: the tape's gradients against central finite differences, in float64. A tool over the
/// ops (it weighs, sums and perturbs their results with ops), so it lives with them, above core's tape.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapestry {

/// The settings of gradcheck.
struct GradcheckOptions {
  double eps = 1e-6;   ///< finite-difference step
  ///@{
  /// an element passes when |analytic − numeric| ≤ atol + rtol·|numeric|
  double atol = 1e-5;
  double rtol = 1e-3;
  ///@}
  uint64_t seed = 0;   ///< for the random projection of the output
};

/// What gradcheck found.
struct GradcheckResult {
  bool ok = true;  ///< whether every element passed
  double worst_error = 0;  ///< largest |analytic − numeric| − (atol + rtol·|numeric|), or 0
  std::string report;      ///< on failure: the worst element, its input and index, both values
  explicit operator bool() const { return ok; }  ///< ok
};

/// Checks d⟨w, fn(inputs)⟩/d inputs for a fixed random w (entries ±[0.5, 1.5]) against central
/// differences of ⟨w, fn⟩, element by element, for every floating input (each must be float64; other
/// inputs, such as indices, are passed through). The inputs are cloned as leaves; fn must be
/// deterministic. Comparing every input element of one random projection of the Jacobian catches a
/// wrong gradient unless the error is orthogonal to w.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace tapestry
