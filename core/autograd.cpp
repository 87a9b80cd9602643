#include "core/autograd.h"

#include "core/profiler.h"
#include "core/tape_graph.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

// The one place core calls ops: running the tape backward adds, reduces and fills gradients with
// the ops' own kernels on every device rather than with a second copy of them here
// (docs/ARCHITECTURE.md, "Exceptions"; scripts/check-layers.cmake lists exactly these four).
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry {

// ---------------------------------------------------------------------------------------------
// Grad mode

namespace {
thread_local bool grad_mode = true;
}

bool grad_mode_enabled() { return grad_mode; }
NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

// ---------------------------------------------------------------------------------------------
// Saved tensors

Saved::Saved(const Tensor& tensor) : data_(tensor.detach()), version_(tensor.storage().version()) {}

const Tensor& Saved::get() const {
  const uint64_t now = data_.storage().version();
  TP_CHECK(now == version_, "saved tensor",
           "a tensor of shape ", to_string(data_.shape()), " that this op saved for backward was ",
           "modified in place after it was saved (version ", version_, ", now ", now,
           "); compute on a clone() instead of changing it in place");
  return data_;
}

// ---------------------------------------------------------------------------------------------
// The tape

struct Tape::Entry {
  std::string op;
  std::vector<std::shared_ptr<AutogradMeta>> inputs;  // null where the input needs no gradient
  std::vector<TensorSpec> input_specs;
  std::vector<std::weak_ptr<AutogradMeta>> outputs;
  std::vector<TensorSpec> output_specs;
  BackwardFn backward;
  uint64_t graph = 0;       // the GraphRecorder that drew this entry (graph_hooks::serial), 0: none
  int64_t graph_node = -1;  // its node there

  bool dead() const {
    for (const auto& out : outputs)
      if (!out.expired()) return false;
    return true;
  }
  TapeEntryInfo info() const {
    TapeEntryInfo result{op, {}, {}, {}};
    for (const auto& s : input_specs) result.inputs.push_back(s.shape);
    for (const auto& s : output_specs) result.outputs.push_back(s.shape);
    return result;
  }
};

Tape::Tape() = default;
Tape::~Tape() = default;

Tape& Tape::current() {
  thread_local Tape tape;
  return tape;
}

size_t Tape::size() const { return entries_.size(); }

std::vector<TapeEntryInfo> Tape::entries() const {
  std::vector<TapeEntryInfo> result;
  for (const auto& e : entries_) result.push_back(e->info());
  return result;
}

void Tape::clear() { entries_.clear(); }

// Drops entries whose outputs are unreachable: no tensor holds them and no later entry takes them
// as input. Dropping an entry releases its inputs, which can make an earlier entry unreachable,
// so one pass from the newest entry to the oldest finds them all.
void Tape::prune() {
  for (size_t i = entries_.size(); i-- > 0;) {
    if (entries_[i] && entries_[i]->dead()) entries_[i].reset();
  }
  compact();
  next_prune_ = std::max<size_t>(1024, 2 * entries_.size());
}

void Tape::compact() {
  std::vector<std::unique_ptr<Entry>> kept;
  for (auto& e : entries_)
    if (e) kept.push_back(std::move(e));
  entries_ = std::move(kept);
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

void record(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
            BackwardFn backward) {
  if (Profiler::State* profiler = profile_hooks::active()) profile_hooks::op_reported(*profiler, op);
  GraphRecorder::State* graph = graph_hooks::active();
  if (!should_record(inputs)) {
    if (graph) graph_hooks::not_recorded(*graph, op, inputs, outputs);
    return;
  }
  auto entry = std::make_unique<Tape::Entry>();
  entry->op = op;
  for (const Tensor& t : inputs) {
    entry->inputs.push_back(t.requires_grad() ? t.impl().autograd : nullptr);
    entry->input_specs.push_back({t.shape(), t.dtype(), t.device()});
  }
  for (const Tensor& t : outputs) {
    TP_CHECK(!t.impl().autograd, op, "internal error: an output already has autograd state");
    TP_CHECK(is_floating(t.dtype()), op, "internal error: recorded a ", t.dtype(), " output");
    auto meta = std::make_shared<AutogradMeta>();
    meta->is_leaf = false;
    t.impl().autograd = meta;
    entry->outputs.push_back(meta);
    entry->output_specs.push_back({t.shape(), t.dtype(), t.device()});
  }
  entry->backward = std::move(backward);
  if (graph) {
    entry->graph = graph_hooks::serial(*graph);
    entry->graph_node = graph_hooks::recorded(*graph, op, inputs, outputs);
  }

  Tape& tape = Tape::current();
  tape.entries_.push_back(std::move(entry));
  if (tape.entries_.size() >= tape.next_prune_) tape.prune();
}

// ---------------------------------------------------------------------------------------------
// Backward

namespace {
// The meta's pending gradient, made its own (copied if others can see it) to be written in place.
const Tensor& own_pending(AutogradMeta& meta) {
  if (!meta.pending_owned) {
    meta.pending = clone(meta.pending);
    meta.pending_owned = true;
  }
  return meta.pending;
}
}  // namespace

// The metas that received a gradient during one backward pass.
struct Gradients::Sink {
  std::vector<std::shared_ptr<AutogradMeta>> touched;

  void add(const std::shared_ptr<AutogradMeta>& meta, Tensor g) {
    if (meta->pending.defined()) {
      if (meta->pending_owned) {
        add_(meta->pending, g);
      } else if (ownable(g)) {
        // The sum in g's storage, which its op has just written (in cache), rather than in a new
        // tensor: a residual's x gets the add's gradient, shared with the other branch, then this one.
        // The same bits: a + b = b + a.
        add_(g, meta->pending);
        meta->pending = std::move(g);
        meta->pending_owned = true;
      } else {
        meta->pending = tapestry::add(meta->pending, g);
        meta->pending_owned = true;
      }
      return;
    }
    meta->pending_owned = ownable(g);  // adopted without a copy
    meta->pending = std::move(g);
    touched.push_back(meta);
  }
  // g is ours to add into: nothing else can see its storage.
  static bool ownable(const Tensor& g) {
    return g.impl_ptr().use_count() == 1 && g.impl().storage.use_count() == 1 && g.is_contiguous() &&
           !g.requires_grad();
  }
  void clear_pending() {
    for (auto& meta : touched) meta->pending = Tensor();
  }
};

// What one op's backward sent to each of its inputs, for a GraphRecorder's edges: the sum of the
// gradients it passed to accumulate(), plus, for an input whose buffer() it wrote into in place, the
// buffer's change. A tensor read as two inputs of the op (matmul(x, x), x * x) has one buffer for
// both, whose change would mix their shares: each such input gets a buffer of its own instead
// (`own`), added to the tensor's gradient once the op's backward has run.
struct Gradients::Shares {
  std::vector<Tensor> sent;
  std::vector<Tensor> before;  // the buffer when the op first asked for it
  std::vector<Tensor> own;     // an aliased input's own buffer
  std::vector<char> aliased;   // the input's tensor is another input of the op too
  explicit Shares(const std::vector<std::shared_ptr<AutogradMeta>>& inputs)
      : sent(inputs.size()), before(inputs.size()), own(inputs.size()), aliased(inputs.size(), 0) {
    for (size_t i = 0; i < inputs.size(); ++i)
      for (size_t j = 0; j < inputs.size() && inputs[i]; ++j)
        if (j != i && inputs[j] == inputs[i]) aliased[i] = 1;
  }
  void add(size_t i, const Tensor& g) {
    if (before[i].defined()) return;  // the buffer's change will hold it
    sent[i] = sent[i].defined() ? tapestry::add(sent[i], g) : g;
  }
};

namespace {

// Sums g (of a broadcast shape) down to `shape`.
Tensor sum_to(Tensor g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int64_t lead = g.dim() - static_cast<int64_t>(shape.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  }
  return reshape(sum(g, dims, KeepDim::Yes), shape);
}

double l2_norm(const Tensor& g) { return std::sqrt(sum(mul(g, g)).item<double>()); }

void run_hooks(AutogradMeta& meta) {
  for (const auto& hook : meta.hooks) hook(meta.pending);
}

// .grad outlives the pass and is added into in place by the next one: it must be the meta's own.
void accumulate_grad(AutogradMeta& meta) {
  if (meta.grad.defined()) {
    add_(meta.grad, meta.pending);
  } else {
    meta.grad = own_pending(meta);
  }
}

}  // namespace

bool Gradients::needs(size_t i) const { return i < inputs_.size() && inputs_[i] != nullptr; }

void Gradients::accumulate(size_t i, Tensor g) {
  if (!needs(i)) return;
  const TensorSpec& spec = specs_[i];
  TP_CHECK(g.dtype() == spec.dtype && g.device() == spec.device, "accumulate",
           "internal error: gradient of dtype ", g.dtype(), " on ", g.device(), " for an input of ",
           spec.dtype, " on ", spec.device);
  Tensor share = sum_to(std::move(g), spec.shape);
  if (shares_) shares_->add(i, share);
  sink_.add(inputs_[i], std::move(share));
}

const Tensor& Gradients::buffer(size_t i) {
  TP_CHECK(needs(i), "buffer", "internal error: input ", i, " needs no gradient");
  if (shares_ && shares_->aliased[i]) {
    Tensor& own = shares_->own[i];
    if (!own.defined()) own = zeros(specs_[i].shape, {specs_[i].dtype, specs_[i].device});
    return own;
  }
  const auto& meta = inputs_[i];
  if (!meta->pending.defined()) sink_.add(meta, zeros(specs_[i].shape, {specs_[i].dtype, specs_[i].device}));
  if (shares_ && !shares_->before[i].defined()) shares_->before[i] = clone(meta->pending);
  return own_pending(*meta);
}

bool Gradients::received(size_t i) const { return needs(i) && !shares_ && inputs_[i]->pending.defined(); }

void backward(const Tensor& root, const Tensor& seed, Retain retain) {
  TP_CHECK(root.requires_grad(), "backward",
           "the tensor of shape ", to_string(root.shape()), " does not require grad: no input of ",
           "the ops that produced it requires grad, or it was computed under NoGradGuard");
  Tensor start = seed;
  if (!start.defined()) {
    TP_CHECK(root.numel() == 1, "backward", "a tensor of shape ", to_string(root.shape()),
             " is not a scalar: pass a seed gradient of the same shape");
    start = ones_like(root);
  }
  TP_CHECK(start.shape() == root.shape() && start.dtype() == root.dtype() &&
               start.device() == root.device(),
           "backward", "the seed (", to_string(start.shape()), ", ", start.dtype(), ", ",
           start.device(), ") does not match the tensor (", to_string(root.shape()), ", ",
           root.dtype(), ", ", root.device(), ")");

  NoGradGuard no_grad;
  // The profiler times each closure and charges the rest of the pass to "(autograd)".
  profile_hooks::BackwardPass profiled(profile_hooks::active());
  Tape& tape = Tape::current();
  tape.last_backward_.clear();
  // A GraphRecorder sees the pass: the gradient each op sends each input (graph_hooks).
  GraphRecorder::State* graph = graph_hooks::active();
  struct PassScope {
    GraphRecorder::State* graph;
    ~PassScope() {
      if (graph) graph_hooks::pass_ended(*graph);
    }
  } pass{graph};
  if (graph) graph_hooks::pass_began(*graph, root);
  const auto leaf_done = [graph](const AutogradMeta& leaf) {
    if (graph) graph_hooks::leaf_gradient(*graph, &leaf, l2_norm(leaf.pending));
  };
  Gradients::Sink sink;
  // A leaf's gradient is complete once every entry that takes it as an input has run backward:
  // its hooks run then, not after the whole walk, so that a hook can act on it (start the
  // gradient's all-reduce, dist/reducer.h) while backward computes the rest. Counted for the leaves
  // with hooks only; the others are accumulated at the end, as is a leaf no entry takes.
  std::unordered_map<AutogradMeta*, size_t> uses;
  for (const auto& entry : tape.entries_)
    if (entry)
      for (const auto& input : entry->inputs)
        if (input && input->is_leaf && !input->hooks.empty()) ++uses[input.get()];
  const auto release_inputs = [&](const Tape::Entry& entry) {
    if (uses.empty()) return;
    for (const auto& input : entry.inputs) {
      if (!input) continue;
      const auto found = uses.find(input.get());
      if (found == uses.end() || --found->second > 0) continue;
      if (input->pending.defined()) {
        leaf_done(*input);
        run_hooks(*input);
        accumulate_grad(*input);
        input->pending = Tensor();
      }
    }
  };
  try {
    sink.add(root.impl().autograd, start);
    for (size_t i = tape.entries_.size(); i-- > 0;) {
      if (!tape.entries_[i]) continue;
      Tape::Entry& entry = *tape.entries_[i];
      std::vector<std::shared_ptr<AutogradMeta>> outs;
      bool reached = false;
      for (const auto& weak : entry.outputs) {
        outs.push_back(weak.lock());
        reached = reached || (outs.back() && outs.back()->pending.defined());
      }
      if (!reached) {
        release_inputs(entry);
        continue;
      }

      TapeEntryInfo info = entry.info();
      std::vector<Tensor> grad_outputs;
      for (size_t k = 0; k < outs.size(); ++k) {
        const auto& meta = outs[k];
        if (meta && meta->pending.defined()) {
          run_hooks(*meta);
          if (meta->retains_grad) accumulate_grad(*meta);
          grad_outputs.push_back(meta->pending);
        } else {
          const TensorSpec& s = entry.output_specs[k];
          grad_outputs.push_back(zeros(s.shape, {s.dtype, s.device}));
        }
        if (tape.grad_norms_ == GradNorms::Record) info.grad_norms.push_back(l2_norm(grad_outputs.back()));
      }
      const bool drawn = graph && entry.graph == graph_hooks::serial(*graph);
      std::unique_ptr<Gradients::Shares> shares;
      if (drawn) {
        shares = std::make_unique<Gradients::Shares>(entry.inputs);
        for (size_t k = 0; k < grad_outputs.size(); ++k)
          graph_hooks::output_gradient(*graph, entry.graph_node, k, l2_norm(grad_outputs[k]));
      }
      Gradients grads(sink, entry.inputs, entry.input_specs, shares.get());
      profiled.closure_began();
      try {
        entry.backward(grad_outputs, grads);
      } catch (const Error& e) {
        profiled.closure_ended(entry.op);
        throw Error(entry.op + " (backward): " + e.what());
      }
      profiled.closure_ended(entry.op);
      if (drawn) {
        for (size_t k = 0; k < entry.inputs.size(); ++k) {
          if (!entry.inputs[k]) continue;
          const Tensor& before = shares->before[k];
          Tensor share = shares->sent[k];
          if (const Tensor& own = shares->own[k]; own.defined()) {
            sink.add(entry.inputs[k], own);
            share = share.defined() ? add(share, own) : own;
          }
          if (before.defined()) {
            const Tensor change = sub(entry.inputs[k]->pending, before);
            share = share.defined() ? add(share, change) : change;
          }
          graph_hooks::sent(*graph, entry.graph_node, k, share.defined() ? l2_norm(share) : 0.0);
        }
      }
      for (const auto& meta : outs)
        if (meta) meta->pending = Tensor();
      release_inputs(entry);
      tape.last_backward_.push_back(std::move(info));
      if (retain == Retain::No) tape.entries_[i].reset();  // its closure and saved tensors go now
    }
    for (const auto& meta : sink.touched) {
      if (!meta->pending.defined()) continue;
      TP_CHECK(meta->is_leaf, "backward",
               "a gradient reached a tensor whose producing ops are no longer on this thread's tape "
               "(released by an earlier backward(); pass Retain::Yes to keep them, or the tensor was "
               "computed on another thread)");
      leaf_done(*meta);
      run_hooks(*meta);
      accumulate_grad(*meta);
    }
  } catch (...) {
    sink.clear_pending();
    tape.compact();
    throw;
  }
  sink.clear_pending();
  // The forward pass's branches that did not reach the root (a value computed for a mask, a loss
  // left out of the objective) are unreachable once their tensors are gone: drop them with their
  // saved tensors now rather than when the tape next grows, or every training step would leave
  // its own behind until a thousand entries had gathered.
  tape.prune();
}

// ---------------------------------------------------------------------------------------------
// The autograd side of Tensor

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  TensorImpl& self = impl();
  if (!requires_grad) {
    TP_CHECK(!self.autograd || self.autograd->is_leaf, "set_requires_grad",
             "only a leaf can stop requiring grad; use detach() on a computed tensor");
    self.autograd.reset();
    return *this;
  }
  TP_CHECK(is_floating(self.dtype), "set_requires_grad",
           "only floating tensors can require grad, got ", self.dtype, " of shape ", to_string(self.shape));
  if (!self.autograd) self.autograd = std::make_shared<AutogradMeta>();
  return *this;
}

bool Tensor::is_leaf() const { return !requires_grad() || impl().autograd->is_leaf; }

Tensor Tensor::grad() const { return requires_grad() ? impl().autograd->grad : Tensor(); }

void Tensor::zero_grad() const {
  if (requires_grad()) impl().autograd->grad = Tensor();
}

void Tensor::retain_grad() const {
  TP_CHECK(requires_grad(), "retain_grad", "the tensor does not require grad");
  impl().autograd->retains_grad = true;
}

void Tensor::register_hook(GradHook hook) const {
  TP_CHECK(requires_grad(), "register_hook", "the tensor of shape ", to_string(shape()),
           " does not require grad, so it never receives a gradient");
  impl().autograd->hooks.push_back(std::move(hook));
}

void Tensor::backward(Retain retain) const { tapestry::backward(*this, Tensor(), retain); }
void Tensor::backward(const Tensor& seed, Retain retain) const { tapestry::backward(*this, seed, retain); }

Tensor Tensor::detach() const {
  auto copy = std::make_shared<TensorImpl>(impl());
  copy->autograd.reset();
  return Tensor(std::move(copy));
}

}  // namespace tapestry
