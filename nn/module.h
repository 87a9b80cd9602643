/// @file
/// nn::Module: named parameters, submodules, train/eval mode, device and dtype moves, state dicts.
///
/// A layer derives from Module, registers its parameters and submodules in its constructor and
/// keeps the handles that registration returns (LibTorch's C++ frontend works the same way):
///
///   class Affine : public nn::Module {
///    public:
///     explicit Affine(int64_t n) : Module("Affine") {
///       scale = register_parameter("scale", ones({n}));
///       shift = register_parameter("shift", zeros({n}));
///       norm = register_module("norm", std::make_shared<nn::LayerNorm>(n));
///     }
///     Tensor forward(const Tensor& x) { return norm->forward(x) * scale + shift; }
///     Tensor scale, shift;
///     std::shared_ptr<nn::LayerNorm> norm;
///   };
///
/// Names. A parameter's full name is the dotted path of registration names from the module it is
/// listed from: "layers.0.self_attn.q_proj.weight". Listings are in registration order: a module's
/// own parameters first, then each child's (depth first), as in PyTorch. A tensor registered under
/// two paths (a tied weight) is listed once, under the first.
///
/// Handles. A parameter is a leaf that requires grad. Moving a module (to(Device), to(DType))
/// changes the parameters' data in place of the handles: every copy of a handle (the layer's member,
/// an optimizer's list) sees the moved data, and the parameters stay leaves. load_state_dict copies
/// values into the existing parameters, so handles stay valid through it as well.
///
/// forward() is not virtual: each layer declares the forward its inputs need. Layers that draw random
/// numbers (dropout, the hashing of clustered attention) take a Generator& in forward and never keep
/// one: the caller owns the random state (and checkpoints it), and a fresh Generator with a fixed seed
/// replays a forward exactly (gradcheck relies on it). Eval mode draws nothing for dropout; clustered
/// attention draws its hash planes in both modes.
///
/// Modules are not copyable (a copy would alias the parameters); hold them by shared_ptr or in place.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ops/dropout.h"  // Mode

namespace tapestry::nn {

/// (name, tensor) pairs in registration order.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
/// Parameter (and buffer) name -> values. A state dict from state_dict() shares memory with the parameters:
/// clone the tensors to keep a snapshot that later training steps do not change.
using StateDict = std::map<std::string, Tensor>;

/// The base of every layer and model (see the top of this file).
class Module {
 public:
  /// `name` is the module's type, used in error messages ("Linear: ...").
  explicit Module(std::string name);
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  const std::string& name() const { return name_; }  ///< the module's type, as given to the constructor

  /// Registers `tensor` as parameter `name` and returns the handle to keep: the tensor itself when
  /// it is a leaf (now marked requires_grad), else a detached leaf over its data. The tensor must be
  /// floating; `name` must be non-empty, without '.', and new in this module.
  Tensor register_parameter(const std::string& name, const Tensor& tensor);
  /// Registers `tensor` as buffer `name`: state that is not trained by gradient (the centroids of
  /// routing attention, updated by a moving average). A buffer is in state_dict() and moves with
  /// to(), but it is not a parameter (optimizers never see it). The same rules for names; returns the
  /// tensor, detached. Read it with buffer(name), change it in place (copy_) under a NoGradGuard.
  Tensor register_buffer(const std::string& name, const Tensor& tensor);
  /// This module's own buffer `name`; throws Error when it has none of that name.
  const Tensor& buffer(const std::string& name) const;
  /// Whether this module has its own buffer `name`.
  bool has_buffer(const std::string& name) const;
  /// Recursive listing of buffers, with full names, in registration order (as named_parameters()).
  NamedTensors named_buffers() const;

  /// Registers `module` as child `name` (the same rules for names) and returns it.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  /// Recursive listings, in registration order (see the top of this file).
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters() const;  ///< parameters() with their full names
  /// Direct children only, in registration order.
  std::vector<std::shared_ptr<Module>> children() const;
  /// Children() with their names.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// Elements of all parameters (each tensor counted once).
  int64_t parameter_count() const;

  /// Sets the mode of this module and all its descendants (a new module is in Train mode).
  void train(Mode mode = Mode::Train);
  void eval() { train(Mode::Eval); }  ///< train(Mode::Eval)
  bool is_training() const { return mode_ == Mode::Train; }  ///< whether in Train mode
  Mode mode() const { return mode_; }  ///< Train or Eval

  /// Moves / converts every parameter in place of its handles (see the top of this file) and drops
  /// its gradient. to(DType) takes a floating dtype.
  void to(Device device);
  void to(DType dtype);  ///< converts every parameter to `dtype`
  /// Drops every parameter's gradient (Tensor::zero_grad).
  void zero_grad();

  /// named_parameters() and named_buffers() as a map.
  StateDict state_dict() const;
  /// Copies `state` into the parameters and buffers. Every name must match, with the parameter's shape and dtype
  /// (the device may differ). Otherwise throws Error listing every missing, unexpected and mismatched
  /// entry, and changes nothing.
  void load_state_dict(const StateDict& state);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, NamedTensors& out) const;
  void collect_buffers(const std::string& prefix, NamedTensors& out) const;

  std::string name_;
  Mode mode_ = Mode::Train;
  NamedTensors parameters_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// An ordered list of submodules, registered as "0", "1", ... (so their parameters are named
/// "<list>.0.<parameter>", as in PyTorch's ModuleList).
template <class M>
class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  /// Registers `module` as the next item.
  void push_back(std::shared_ptr<M> module) {
    items_.push_back(register_module(std::to_string(items_.size()), std::move(module)));
  }
  size_t size() const { return items_.size(); }  ///< the number of items
  /// Item i (std::out_of_range past the end).
  const std::shared_ptr<M>& operator[](size_t i) const { return items_.at(i); }
  auto begin() const { return items_.begin(); }  ///< iteration over the items, in order
  auto end() const { return items_.end(); }  ///< the end of the items

 private:
  std::vector<std::shared_ptr<M>> items_;
};

// ---- checks for layer authors ----

/// Throws Error "<layer>: <what> must be ..." unless x is a defined floating tensor with `like`'s
/// dtype and device (like: one of the layer's parameters), or bfloat16 for float32 parameters under
/// autocast (ops/autocast.h). `what` names the argument ("input").
void check_input(const Module& layer, const char* what, const Tensor& x, const Tensor& like);
/// check_input, and x has at least `min_dims` dims of which the last is `features` long.
void check_features(const Module& layer, const char* what, const Tensor& x, const Tensor& like, int64_t min_dims,
                    int64_t features);

}  // namespace tapestry::nn
