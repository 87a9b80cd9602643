/// @file
/// gradcheck for modules: the gradients of a forward with respect to its inputs AND the module's
/// parameters, against central finite differences (ops/gradcheck.h).
#pragma once

#include <functional>
#include <vector>

#include "ops/gradcheck.h"
#include "nn/module.h"

namespace tapestry::nn {

/// Runs tapestry::gradcheck on fn over `inputs` followed by every parameter of `module` (in
/// parameters() order; the module must be float64: module.to(DType::Float64)). While it runs, the
/// module's parameters are the finite-difference leaves, so fn simply calls the module's forward on
/// its arguments; afterwards the parameters are restored (values and gradients as before).
/// fn must be deterministic: a forward that draws random numbers must build a fresh Generator with a
/// fixed seed on each call. On failure the report names the parameter when the worst element is one.
GradcheckResult gradcheck(Module& module, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace tapestry::nn
