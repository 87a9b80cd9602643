/// @file
/// The autograd tape (DESIGN §3): reverse-mode differentiation over a per-thread Wengert list.
///
/// Each differentiable op, when grad mode is on and an input requires grad, calls record(): one tape
/// entry with the op's name, its inputs' autograd state, weak references to its outputs, and a
/// backward closure. backward() walks the tape from the newest entry to the oldest, calling each
/// closure whose outputs received a gradient; closures accumulate into their inputs' gradients, so
/// fan-out sums. An entry whose outputs nobody can reach any more is pruned after each backward()
/// and as the tape grows.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapestry {

/// The autograd state of a tensor that requires grad (TensorImpl::autograd).
struct AutogradMeta {
  bool is_leaf = true;  ///< not produced by a recorded op
  bool retains_grad = false;  ///< a non-leaf whose gradient is kept (Tensor::retain_grad)
  Tensor grad;     ///< accumulated over backward passes (leaves, and non-leaves that retain it)
  Tensor pending;  ///< this pass's gradient while backward() runs
  /// Whether `pending` is this meta's own tensor, which later contributions may be added into in
  /// place. A gradient that others can see (an add's dy, passed on to both inputs) is adopted
  /// without a copy and not owned: the next contribution makes a new sum instead.
  bool pending_owned = false;
  std::vector<GradHook> hooks;  ///< called with each pass's complete gradient (Tensor::register_hook)
};

// ---- grad mode ----
/// Whether ops record on this thread now (false inside a NoGradGuard).
bool grad_mode_enabled();

/// Turns recording off for its scope (and restores the previous mode after).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// ---- what ops use ----

/// A tensor saved for backward: its data (without autograd state, so that saving an output does not
/// keep the output's tape entry alive) and the storage version when saved. get() refuses data that
/// an in-place op changed since.
class Saved {
 public:
  Saved() = default;
  /// Saves `tensor`'s data and its storage's version now.
  explicit Saved(const Tensor& tensor);
  /// The saved data; throws Error when an in-place op changed it since.
  const Tensor& get() const;

 private:
  Tensor data_;
  uint64_t version_ = 0;
};

/// Shape, dtype and device of a tensor, kept where the tensor itself is not.
struct TensorSpec {
  Shape shape;  ///< sizes
  DType dtype;  ///< element type
  Device device;  ///< where it lives
};

/// The input side of a backward closure.
class Gradients {
 public:
  /// Whether input i wants a gradient; closures skip the work for inputs that do not.
  bool needs(size_t i) const;
  /// Adds g to input i's gradient. g may have the broadcast shape of a broadcasting op: it is summed
  /// down to the input's shape here, once for all ops. A g that nothing else holds (pass a
  /// temporary) becomes the input's gradient as it is; one still held elsewhere (an output's dy) is
  /// adopted without a copy too, and copied only if another contribution must be added into it.
  void accumulate(size_t i, Tensor g);
  /// Input i's gradient buffer (zero-initialised on first use), for kernels that accumulate into it
  /// in place (gemm with beta = 1, an add into a slice).
  const Tensor& buffer(size_t i);
  /// Whether input i already holds a gradient from another op in this pass (not while a
  /// GraphRecorder watches): a kernel that can add its result into buffer(i) then saves accumulate's
  /// extra pass over it.
  bool received(size_t i) const;

 private:
  friend void backward(const Tensor&, const Tensor&, Retain);
  struct Sink;
  struct Shares;
  Gradients(Sink& sink, const std::vector<std::shared_ptr<AutogradMeta>>& inputs,
            const std::vector<TensorSpec>& specs, Shares* shares)
      : sink_(sink), inputs_(inputs), specs_(specs), shares_(shares) {}
  Sink& sink_;
  const std::vector<std::shared_ptr<AutogradMeta>>& inputs_;
  const std::vector<TensorSpec>& specs_;
  Shares* shares_;  // what each input received from this op, when a GraphRecorder asks (else null)
};

/// grad_outputs[k] is the gradient of output k (zeros for an output that received none).
using BackwardFn = std::function<void(const std::vector<Tensor>& grad_outputs, Gradients& grads)>;

/// Whether an op called on `inputs` now would be recorded.
bool should_record(const std::vector<Tensor>& inputs);

/// Records `op` when should_record(inputs); marks the (freshly created) outputs as requiring grad.
void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward);

/// Back-propagates from `root` with gradient `seed` (ones when undefined; then root must have one
/// element). Retain::No releases the entries this pass ran (entries of other graphs stay);
/// Retain::Yes keeps them for another backward.
void backward(const Tensor& root, const Tensor& seed = {}, Retain retain = Retain::No);

// ---- introspection ----

/// Whether backward records each entry's output gradient norms (Tape::last_backward).
enum class GradNorms { Skip, Record };

/// One tape entry, as Tape::entries and Tape::last_backward list it.
struct TapeEntryInfo {
  std::string op;  ///< the op's name
  std::vector<Shape> inputs;  ///< its inputs' shapes
  std::vector<Shape> outputs;  ///< its outputs' shapes
  std::vector<double> grad_norms;  ///< L2 norm of each output's gradient; after a recorded backward
};

/// A thread's list of recorded ops (the Wengert list); see the top of this file.
class Tape {
 public:
  /// This thread's tape.
  static Tape& current();

  /// The number of live entries.
  size_t size() const;
  /// The live entries, oldest first.
  std::vector<TapeEntryInfo> entries() const;
  /// The entries that the last backward() on this thread ran, newest first, with gradient norms when
  /// set_grad_norms(GradNorms::Record) was in force.
  const std::vector<TapeEntryInfo>& last_backward() const { return last_backward_; }
  /// Whether the next backward passes record gradient norms.
  void set_grad_norms(GradNorms mode) { grad_norms_ = mode; }
  /// Releases every entry (and the tensors the closures saved).
  void clear();

 private:
  friend void record(const char*, const std::vector<Tensor>&, const std::vector<Tensor>&, BackwardFn);
  friend void backward(const Tensor&, const Tensor&, Retain);
  struct Entry;
  Tape();
  ~Tape();
  void prune();
  void compact();  ///< drops released (null) entries

  std::vector<std::unique_ptr<Entry>> entries_;
  size_t next_prune_ = 1024;
  GradNorms grad_norms_ = GradNorms::Skip;
  std::vector<TapeEntryInfo> last_backward_;
};

}  // namespace tapestry
