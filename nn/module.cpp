#include "nn/module.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/autograd.h"
#include "ops/autocast.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace tapestry::nn {

namespace {

// Points every handle of `param` (they share one TensorImpl) at `data`, which holds the new
// values; the autograd state stays (a leaf that requires grad) but the old gradient is dropped.
void replace_data(const Tensor& param, const Tensor& data) {
  TensorImpl& impl = param.impl();
  impl.storage = data.impl().storage;
  impl.shape = data.shape();
  impl.strides = data.strides();
  impl.offset = data.offset();
  impl.dtype = data.dtype();
  param.zero_grad();
}

std::string describe(const Tensor& t) { return to_string(t.shape()) + " " + dtype_name(t.dtype()); }

}  // namespace

Module::Module(std::string name) : name_(std::move(name)) {}

void Module::check_new_name(const std::string& name) const {
  TP_CHECK(!name.empty() && name.find('.') == std::string::npos, name_,
           "a parameter or submodule name must be non-empty and contain no '.', got '", name, "'");
  for (const auto& [existing, _] : parameters_)
    TP_CHECK(existing != name, name_, "'", name, "' is already a parameter of this module");
  for (const auto& [existing, _] : children_)
    TP_CHECK(existing != name, name_, "'", name, "' is already a submodule of this module");
  for (const auto& [existing, _] : buffers_)
    TP_CHECK(existing != name, name_, "'", name, "' is already a buffer of this module");
}

Tensor Module::register_buffer(const std::string& name, const Tensor& tensor) {
  check_new_name(name);
  TP_CHECK(tensor.defined(), name_, "buffer '", name, "' is an undefined tensor");
  buffers_.emplace_back(name, tensor.detach());
  return buffers_.back().second;
}

const Tensor& Module::buffer(const std::string& name) const {
  for (const auto& [existing, tensor] : buffers_)
    if (existing == name) return tensor;
  fail(name_, "has no buffer '", name, "'");
}

bool Module::has_buffer(const std::string& name) const {
  for (const auto& [existing, _] : buffers_)
    if (existing == name) return true;
  return false;
}

void Module::collect_buffers(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, tensor] : buffers_) out.emplace_back(prefix + name, tensor);
  for (const auto& [name, child] : children_) child->collect_buffers(prefix + name + ".", out);
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect_buffers("", out);
  return out;
}

Tensor Module::register_parameter(const std::string& name, const Tensor& tensor) {
  check_new_name(name);
  TP_CHECK(tensor.defined(), name_, "parameter '", name, "' is an undefined tensor");
  TP_CHECK(is_floating(tensor.dtype()), name_, "parameter '", name, "' must be floating, got ", tensor.dtype(),
           " of shape ", to_string(tensor.shape()));
  Tensor param = tensor.is_leaf() ? tensor : tensor.detach();
  param.set_requires_grad(true);
  parameters_.emplace_back(name, param);
  return param;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  TP_CHECK(module != nullptr, name_, "submodule '", name, "' is null");
  TP_CHECK(module.get() != this, name_, "a module cannot be its own submodule ('", name, "')");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, param] : parameters_) out.emplace_back(prefix + name, param);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors all, unique;
  collect("", all);
  std::set<const TensorImpl*> seen;
  for (auto& entry : all)
    if (seen.insert(&entry.second.impl()).second) unique.push_back(std::move(entry));
  return unique;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, param] : named_parameters()) out.push_back(param);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [_, child] : children_) out.push_back(child);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

int64_t Module::parameter_count() const {
  int64_t count = 0;
  for (const Tensor& p : parameters()) count += p.numel();
  return count;
}

void Module::train(Mode mode) {
  mode_ = mode;
  for (const auto& [_, child] : children_) child->train(mode);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    if (p.device() != device) replace_data(p, tapestry::to(p.detach(), device));
  }
  for (const auto& [_, b] : named_buffers()) {
    if (b.device() != device) replace_data(b, tapestry::to(b, device));
  }
}

void Module::to(DType dtype) {
  TP_CHECK(is_floating(dtype), name_, "parameters can only be converted to a floating dtype, got ", dtype);
  NoGradGuard no_grad;
  for (const Tensor& p : parameters()) {
    if (p.dtype() != dtype) replace_data(p, tapestry::to(p.detach(), dtype));
  }
  for (const auto& [_, b] : named_buffers()) {
    if (is_floating(b.dtype()) && b.dtype() != dtype) replace_data(b, tapestry::to(b, dtype));
  }
}

void Module::zero_grad() {
  for (const Tensor& p : parameters()) p.zero_grad();
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& [name, param] : named_parameters()) out.emplace(name, param.detach());
  for (const auto& [name, buffer] : named_buffers()) out.emplace(name, buffer);
  return out;
}

void Module::load_state_dict(const StateDict& state) {
  NamedTensors params = named_parameters();
  for (auto& entry : named_buffers()) params.push_back(std::move(entry));
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> known;
  for (const auto& [name, param] : params) {
    known.insert(name);
    const auto it = state.find(name);
    if (it == state.end()) {
      missing.push_back(name);
    } else if (!it->second.defined()) {
      mismatched.push_back(name + ": the state dict holds an undefined tensor");
    } else if (it->second.shape() != param.shape() || it->second.dtype() != param.dtype()) {
      mismatched.push_back(name + ": " + describe(param) + " in the module, " + describe(it->second) +
                           " in the state dict");
    }
  }
  for (const auto& [name, _] : state)
    if (!known.count(name)) unexpected.push_back(name);

  if (!missing.empty() || !unexpected.empty() || !mismatched.empty()) {
    std::ostringstream out;
    out << "load_state_dict: the state dict does not fit this module (nothing was loaded): " << missing.size()
        << " missing, " << unexpected.size() << " unexpected, " << mismatched.size() << " mismatched";
    for (const auto& name : missing) out << "\n  missing: " << name;
    for (const auto& name : unexpected) out << "\n  unexpected: " << name;
    for (const auto& line : mismatched) out << "\n  mismatched: " << line;
    fail(name_, out.str());
  }
  NoGradGuard no_grad;
  for (const auto& [name, param] : params) copy_(param, state.at(name));
}

// ---- checks for layer authors ----

void check_input(const Module& layer, const char* what, const Tensor& x, const Tensor& like) {
  TP_CHECK(x.defined(), layer.name(), what, " is an undefined tensor");
  // Under autocast (ops/autocast.h) a float32 layer takes bfloat16 activations: its ops convert them.
  const bool autocast = autocast_enabled() && x.dtype() == DType::BFloat16 && like.dtype() == DType::Float32;
  TP_CHECK(x.dtype() == like.dtype() || autocast, layer.name(), what, " must be ", like.dtype(),
           " like the layer's parameters, got ", x.dtype(), " of shape ", to_string(x.shape()));
  TP_CHECK(x.device() == like.device(), layer.name(), what, " is on ", x.device(), " but the layer's parameters are on ",
           like.device());
}

void check_features(const Module& layer, const char* what, const Tensor& x, const Tensor& like, int64_t min_dims,
                    int64_t features) {
  check_input(layer, what, x, like);
  TP_CHECK(x.dim() >= std::max<int64_t>(min_dims, 1) && x.size(-1) == features, layer.name(), what, " must have ",
           min_dims > 1 ? "at least " + std::to_string(min_dims) + " dims with " : std::string(),
           "a last dim of ", features, ", got shape ", to_string(x.shape()));
}

}  // namespace tapestry::nn
