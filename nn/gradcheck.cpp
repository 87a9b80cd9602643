#include "nn/gradcheck.h"

namespace tapestry::nn {

namespace {

// Restores the parameters' TensorImpls (data and autograd state) when it goes out of scope.
class RestoreParameters {
 public:
  explicit RestoreParameters(const std::vector<Tensor>& params) : params_(params) {
    for (const Tensor& p : params_) saved_.push_back(p.impl());
  }
  ~RestoreParameters() {
    for (size_t i = 0; i < params_.size(); ++i) params_[i].impl() = saved_[i];
  }
  RestoreParameters(const RestoreParameters&) = delete;
  RestoreParameters& operator=(const RestoreParameters&) = delete;

 private:
  std::vector<Tensor> params_;
  std::vector<TensorImpl> saved_;
};

}  // namespace

GradcheckResult gradcheck(Module& module, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
  const NamedTensors named = module.named_parameters();
  std::vector<Tensor> params, all = inputs;
  for (const auto& [name, p] : named) {
    TP_CHECK(p.dtype() == DType::Float64, "gradcheck", module.name(), " parameter '", name, "' is ", p.dtype(),
             "; convert the module with to(DType::Float64)");
    params.push_back(p);
    all.push_back(p);
  }
  const RestoreParameters restore(params);
  const size_t n = inputs.size();
  // Every handle of a parameter shares its TensorImpl: making that impl a copy of the leaf's (same
  // storage, same autograd state) makes the module compute with the leaf and send it the gradient.
  auto bound = [&](const std::vector<Tensor>& args) {
    for (size_t i = 0; i < params.size(); ++i) params[i].impl() = args[n + i].impl();
    return fn(std::vector<Tensor>(args.begin(), args.begin() + static_cast<long>(n)));
  };
  GradcheckResult result = tapestry::gradcheck(bound, all, options);
  if (!result.ok && !named.empty()) {
    result.report += "\n  where";
    for (size_t i = 0; i < named.size(); ++i)
      result.report += (i ? ", input " : " input ") + std::to_string(n + i) + " is parameter '" + named[i].first + "'";
  }
  return result;
}

}  // namespace tapestry::nn
