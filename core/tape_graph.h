/// @file
/// The tape as a graph: what a forward pass recorded, and the gradient that each backward pass sent
/// along each edge (docs/TUTORIAL-gradient-flow.md, "The graph").
///
///   tapestry::GraphRecorder recorder(model.named_parameters());  // this thread, from now on
///   const Tensor loss = model.forward(x, gen);
///   loss.backward();
///   const tapestry::TapeGraph graph = recorder.graph({"loss"});   // one name per backward pass
///   std::ofstream("g.dot") << tapestry::to_dot(tapestry::collapse(graph, {1, {}}));
///
/// Nodes are the recorded ops (name, output shapes, dtype, device), the leaves they read
/// (parameters by their module path, other tensors that require grad), and the non-differentiable
/// points: the ops that report a cut (argmax, argsort and the indices of sort and top-k, sign-bit
/// hashing, Hamming k-means, comparisons, conversions to an integer dtype), a tensor detached from
/// the tape (Tensor::detach, or read under a NoGradGuard), and what is computed from them without a
/// gradient. Edges are the tensors between them; an edge into a cut carries no gradient, and an edge
/// out of the non-differentiable part (an index, a mask) carries none either. After each backward
/// pass the recorder keeps, per edge, the L2 norm of the gradient that the consuming op sent to that
/// input: with fan-out (a tensor read by the attention and by a clustering loss) each edge carries
/// its own share, and the shares sum to the tensor's gradient.
///
/// Ops run inside a TapeScope carry its path ("layers.0", "layers.0.ff"); collapse() draws each
/// module below a depth as one box, except those named to expand.
///
/// Cost when no recorder is active: record() and the ops that report a cut test one thread-local
/// pointer; nothing is allocated, no norm is computed, backward is unchanged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/autograd.h"
#include "core/tensor.h"

namespace tapestry {

/// What a graph node stands for.
enum class NodeKind {
  Op,         ///< a recorded, differentiable op
  Cut,        ///< a non-differentiable point: an op that reports a cut, or a detached tensor
  NoGrad,     ///< an op computed without a gradient from the output of a cut
  Parameter,  ///< a leaf named in GraphRecorder's parameters (its module path)
  Leaf,       ///< another leaf that requires grad (an input, a tensor made before recording began)
  Module,     ///< a collapsed module (collapse())
};

/// What an edge carries.
enum class EdgeKind {
  Gradient,    ///< a tensor whose gradient flows back along the edge
  Cut,         ///< into a cut: the gradient stops here
  NoGradient,  ///< from the non-differentiable part: an index, a mask, a hash
};

/// One node of a TapeGraph.
struct GraphNode {
  NodeKind kind = NodeKind::Op;  ///< what it stands for
  std::string label;   ///< the op's name; a parameter's path; "leaf"; a collapsed module's path
  std::string module;  ///< the TapeScope path it ran in ("" outside any); a box: its parent's path
  std::vector<TensorSpec> outputs;  ///< shape, dtype and device of each output
  /// grad_norms[k][p]: the norm of output k's whole gradient in pass p; NaN when p sent it none.
  std::vector<std::vector<double>> grad_norms;
  std::vector<std::string> losses;  ///< the passes that started here (the node's output was the loss)
  int64_t ops = 0;         ///< a collapsed module: the ops inside it
  int64_t parameters = 0;  ///< a collapsed module: the parameters inside it
};

/// One edge: output `from_output` of node `from` is input `to_input` of node `to`.
struct GraphEdge {
  ///@{
  /// The producing node and its output, the consuming node and its input.
  int64_t from = 0, from_output = 0, to = 0, to_input = 0;
  ///@}
  EdgeKind kind = EdgeKind::Gradient;  ///< whether a gradient can flow along it
  TensorSpec tensor;                   ///< the tensor it carries
  /// grad_norms[p]: the norm of the gradient the consumer sent along it in pass p; NaN when none.
  std::vector<double> grad_norms;
};

/// A recorded tape as a graph (see the top of this file).
struct TapeGraph {
  std::vector<std::string> passes;  ///< the loss of each backward pass, in order
  std::vector<GraphNode> nodes;     ///< indexed by GraphEdge::from / to
  std::vector<GraphEdge> edges;     ///< in recording order
};

/// Records the graph of everything this thread's tape records while it lives, and the gradients of
/// the backward passes run meanwhile. One recorder per thread at a time (a second throws Error).
class GraphRecorder {
 public:
  /// `parameters` name the leaves (Module::named_parameters()); other leaves are drawn as "leaf".
  explicit GraphRecorder(const std::vector<std::pair<std::string, Tensor>>& parameters = {});
  ~GraphRecorder();
  GraphRecorder(const GraphRecorder&) = delete;
  GraphRecorder& operator=(const GraphRecorder&) = delete;

  /// The graph of what was recorded before the first backward pass (ops recorded between passes,
  /// such as a sum of the losses, are left out), with the passes' gradients. `passes` names the first backward passes, in order (passes run after them
  /// are left out: the release pass of nn::separate_gradients); empty: every pass, named "pass 1",
  /// "pass 2", .... Throws Error when nothing was recorded (no op had an input that requires grad
  /// while grad mode was on), when no backward pass has run yet, or when fewer ran than named.
  TapeGraph graph(const std::vector<std::string>& passes = {}) const;

  struct State;  ///< what is recorded (core/tape_graph.cpp)

 private:
  std::unique_ptr<State> state_;
};

/// The graph of a user's own model in one call: runs `forward` under a GraphRecorder, then one
/// backward pass per loss that it returns (each but the last retaining the tape), and returns the
/// graph with the passes named `loss_names`. The passes' gradients accumulate into the parameters'
/// grad() as backward() does. Throws Error when the number of names differs from the losses', or
/// for a loss that is not 0-d or does not require grad, and as GraphRecorder::graph does.
TapeGraph tape_graph(const std::function<std::vector<Tensor>()>& forward, const std::vector<std::string>& loss_names,
                     const std::vector<std::pair<std::string, Tensor>>& parameters = {});

/// Names the ops run in its scope for the graph: nested scopes join with '.' ("layers.0.ff"), the
/// way parameter paths do. A module's forward opens one around each child it calls, with the
/// child's registered name. Free when no GraphRecorder is active.
class TapeScope {
 public:
  /// Opens scope `name`.
  explicit TapeScope(const char* name);
  /// Opens scope "<name>.<index>" (an item of a ModuleList: "layers.0").
  TapeScope(const char* name, int64_t index);
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  GraphRecorder::State* state_ = nullptr;
};

/// A non-differentiable op reports itself here after computing `outputs` from `inputs` (an
/// argmax, a sort's indices, hash bits, a comparison): with a GraphRecorder active and an input in
/// its graph, it becomes a cut there. Free otherwise.
void record_cut(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs);

/// Which modules collapse() draws as one box.
struct GraphView {
  /// Scopes this many levels deep stay open; deeper ones are boxes. 0: every top-level scope is a
  /// box; a large number: nothing is collapsed.
  int64_t depth = 1;
  /// Paths of modules shown open whatever their depth ("layers.0"); opening one opens its parents.
  std::vector<std::string> expand;
};

/// `graph` with each module that `view` closes drawn as one Module node. A parameter or leaf whose
/// readers are all inside one box goes into it. Edges inside a box are dropped. A tensor whose
/// readers are all inside one box enters it along one edge, carrying the tensor's whole gradient;
/// otherwise each edge stays as it is, with its own share.
TapeGraph collapse(const TapeGraph& graph, const GraphView& view);

/// What core/autograd.cpp tells the active recorder; nothing else calls these.
namespace graph_hooks {
/// This thread's active recorder, or null (the one test that ops pay when none is active).
GraphRecorder::State* active();
/// A number that tells recorders apart (tape entries keep it with their node).
uint64_t serial(const GraphRecorder::State& state);
/// A recorded op: adds its node and its input edges; returns the node.
int64_t recorded(GraphRecorder::State& state, const char* op, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>& outputs);
/// An op that record() did not record (no input requires grad, or grad mode is off): a node when
/// an input is in the graph.
void not_recorded(GraphRecorder::State& state, const char* op, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor>& outputs);
/// A backward pass from `root` begins (ops called until pass_ended add nothing).
void pass_began(GraphRecorder::State& state, const Tensor& root);
/// The gradient norm that `node` sent to its input `input` in this pass.
void sent(GraphRecorder::State& state, int64_t node, size_t input, double norm);
/// The norm of the whole gradient of `node`'s output `output` in this pass.
void output_gradient(GraphRecorder::State& state, int64_t node, size_t output, double norm);
/// The norm of the whole gradient of a leaf in this pass.
void leaf_gradient(GraphRecorder::State& state, const AutogradMeta* leaf, double norm);
/// The pass ended (or threw).
void pass_ended(GraphRecorder::State& state);
}  // namespace graph_hooks

}  // namespace tapestry
