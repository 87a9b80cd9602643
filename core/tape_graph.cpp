#include "core/tape_graph.h"

#include "core/profiler.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

namespace tapestry {

namespace {

constexpr const char* kOp = "tape_graph";
constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

thread_local GraphRecorder::State* active_state = nullptr;
std::atomic<uint64_t> next_serial{1};

// Where a tensor of the graph comes from: output `output` of node `node`.
struct Source {
  int64_t node = -1;
  int64_t output = 0;
};

// A map from an object's address to the tensor it identifies, valid while the object lives: the
// weak reference tells a live entry from one whose object died and whose address was reused.
template <class T>
class Identities {
 public:
  void set(const std::shared_ptr<T>& object, Source source) { map_[object.get()] = {object, source}; }
  const Source* find(const T* object) const {
    const auto it = map_.find(object);
    if (it == map_.end() || it->second.first.lock().get() != object) return nullptr;
    return &it->second.second;
  }

 private:
  std::unordered_map<const T*, std::pair<std::weak_ptr<T>, Source>> map_;
};

// One backward pass: the norms sent along edges, and the whole gradients of tensors.
struct Pass {
  int64_t root = -1;
  std::unordered_map<int64_t, double> edges;
  std::map<std::pair<int64_t, int64_t>, double> outputs;
};

TensorSpec spec_of(const Tensor& t) { return {t.shape(), t.dtype(), t.device()}; }

}  // namespace

struct GraphRecorder::State {
  uint64_t serial = next_serial++;
  std::unordered_map<const AutogradMeta*, std::string> names;
  std::vector<Tensor> named;  // keeps the named parameters' metas alive while the names refer to them
  std::vector<GraphNode> nodes;
  std::vector<char> reported;  // per node: a cut that an op reported (not one inferred from a detach)
  std::vector<std::vector<int64_t>> input_edges;  // per node, the edge of each input (-1: none)
  std::vector<GraphEdge> edges;
  Identities<AutogradMeta> with_grad;     // tensors that require grad, by their autograd state
  Identities<TensorImpl> without_grad;    // the non-differentiable part's tensors, by handle
  Identities<Storage> storages;           // the storage of tensors that require grad (detached views)
  std::vector<std::string> scope;
  int64_t recorded_ops = 0;
  bool in_backward = false;
  int64_t forward_nodes = -1;  // the nodes recorded before the first backward pass
  std::vector<Pass> passes;

  int64_t add_node(NodeKind kind, std::string label, const std::vector<Tensor>& outputs, bool reported_cut = false) {
    GraphNode node;
    node.kind = kind;
    node.label = std::move(label);
    for (const std::string& s : scope) node.module += (node.module.empty() ? "" : ".") + s;
    for (const Tensor& t : outputs)
      if (t.defined()) node.outputs.push_back(spec_of(t));
    nodes.push_back(std::move(node));
    reported.push_back(reported_cut);
    input_edges.emplace_back();
    return int64_t(nodes.size()) - 1;
  }

  void add_edge(Source from, int64_t to, size_t input, EdgeKind kind, const Tensor& tensor) {
    GraphEdge e;
    e.from = from.node, e.from_output = from.output, e.to = to, e.to_input = int64_t(input);
    e.kind = kind;
    e.tensor = spec_of(tensor);
    auto& slots = input_edges[size_t(to)];
    if (slots.size() <= input) slots.resize(input + 1, -1);
    slots[input] = int64_t(edges.size());
    edges.push_back(std::move(e));
  }

  void register_with_grad(const Tensor& t, Source source) {
    with_grad.set(t.impl().autograd, source);
    storages.set(t.impl().storage, source);
  }

  // The node output that `t` is, adding a leaf for a tensor that requires grad and is not in the
  // graph yet, and a detach for a view without grad of a tensor in the graph; null for a constant.
  const Source* find(const Tensor& t) {
    if (!t.defined()) return nullptr;
    if (t.requires_grad()) {
      const AutogradMeta* meta = t.impl().autograd.get();
      if (const Source* s = with_grad.find(meta)) return s;
      const auto name = names.find(meta);
      const NodeKind kind = name != names.end() ? NodeKind::Parameter : NodeKind::Leaf;
      const std::string label = name != names.end() ? name->second : meta->is_leaf ? "leaf" : "earlier result";
      const std::vector<std::string> outer = std::move(scope);  // a leaf belongs to no scope
      scope.clear();
      const int64_t id = add_node(kind, label, {t});
      scope = outer;
      register_with_grad(t, {id, 0});
      return with_grad.find(meta);
    }
    if (const Source* s = without_grad.find(t.impl_ptr().get())) return s;
    if (const Source* s = storages.find(t.impl().storage.get())) {
      const Source from = *s;
      const int64_t id = add_node(NodeKind::Cut, "detach", {t});
      add_edge(from, id, 0, EdgeKind::Cut, t);
      without_grad.set(t.impl_ptr(), {id, 0});
      return without_grad.find(t.impl_ptr().get());
    }
    return nullptr;
  }

  // A node for an op without a gradient, when one of its inputs is in the graph.
  void add_without_grad(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                        bool reported_cut) {
    if (in_backward) return;
    std::vector<std::pair<size_t, Source>> sources;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (const Source* s = find(inputs[i])) sources.emplace_back(i, *s);
    if (sources.empty()) return;
    bool cuts = false;  // a gradient stops here; an op on what has none already is drawn as such
    for (const auto& [i, s] : sources) cuts = cuts || inputs[i].requires_grad();
    const int64_t id = add_node(cuts ? NodeKind::Cut : NodeKind::NoGrad, op, outputs, reported_cut);
    for (const auto& [i, s] : sources)
      add_edge(s, id, i, inputs[i].requires_grad() ? EdgeKind::Cut : EdgeKind::NoGradient, inputs[i]);
    for (size_t k = 0; k < outputs.size(); ++k)
      if (outputs[k].defined()) without_grad.set(outputs[k].impl_ptr(), {id, int64_t(k)});
  }
};

GraphRecorder::GraphRecorder(const std::vector<std::pair<std::string, Tensor>>& parameters)
    : state_(std::make_unique<State>()) {
  TP_CHECK(active_state == nullptr, "GraphRecorder", "another GraphRecorder is recording on this thread already");
  for (const auto& [name, t] : parameters) {
    if (!t.requires_grad()) continue;
    state_->names.emplace(t.impl().autograd.get(), name);
    state_->named.push_back(t);
  }
  active_state = state_.get();
}

GraphRecorder::~GraphRecorder() {
  if (active_state == state_.get()) active_state = nullptr;
}

TapeScope::TapeScope(const char* name) : state_(active_state) {
  if (state_) state_->scope.emplace_back(name);
}

TapeScope::TapeScope(const char* name, int64_t index) : state_(active_state) {
  if (state_) state_->scope.push_back(std::string(name) + "." + std::to_string(index));
}

TapeScope::~TapeScope() {
  if (state_ && state_ == active_state && !state_->scope.empty()) state_->scope.pop_back();
}

void record_cut(const char* op, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs) {
  if (Profiler::State* profiler = profile_hooks::active()) profile_hooks::op_reported(*profiler, op);
  if (active_state) active_state->add_without_grad(op, inputs, outputs, true);
}

namespace graph_hooks {

GraphRecorder::State* active() { return active_state; }
uint64_t serial(const GraphRecorder::State& state) { return state.serial; }

int64_t recorded(GraphRecorder::State& s, const char* op, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>& outputs) {
  std::vector<std::pair<size_t, Source>> sources;  // found before the node is added: nodes are in order
  for (size_t i = 0; i < inputs.size(); ++i)
    if (const Source* from = s.find(inputs[i])) sources.emplace_back(i, *from);
  const int64_t id = s.add_node(NodeKind::Op, op, outputs);
  ++s.recorded_ops;
  for (const auto& [i, from] : sources)
    s.add_edge(from, id, i, inputs[i].requires_grad() ? EdgeKind::Gradient : EdgeKind::NoGradient, inputs[i]);
  for (size_t k = 0; k < outputs.size(); ++k) s.register_with_grad(outputs[k], {id, int64_t(k)});
  return id;
}

void not_recorded(GraphRecorder::State& s, const char* op, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor>& outputs) {
  s.add_without_grad(op, inputs, outputs, false);
}

void pass_began(GraphRecorder::State& s, const Tensor& root) {
  s.in_backward = true;
  if (s.forward_nodes < 0) s.forward_nodes = int64_t(s.nodes.size());
  Pass pass;
  if (const Source* r = s.with_grad.find(root.impl().autograd.get())) pass.root = r->node;
  s.passes.push_back(std::move(pass));
}

void sent(GraphRecorder::State& s, int64_t node, size_t input, double norm) {
  const auto& slots = s.input_edges[size_t(node)];
  if (input < slots.size() && slots[input] >= 0) s.passes.back().edges[slots[input]] = norm;
}

void output_gradient(GraphRecorder::State& s, int64_t node, size_t output, double norm) {
  s.passes.back().outputs[{node, int64_t(output)}] = norm;
}

void leaf_gradient(GraphRecorder::State& s, const AutogradMeta* leaf, double norm) {
  if (const Source* src = s.with_grad.find(leaf)) s.passes.back().outputs[{src->node, src->output}] = norm;
}

void pass_ended(GraphRecorder::State& s) { s.in_backward = false; }

}  // namespace graph_hooks

namespace {

// The nodes worth drawing: ops and leaves, the cuts that ops reported on a tensor of the graph, and
// whatever without a gradient leads to one of those. The rest is what ops compute internally on
// detached views of their inputs, which leads nowhere in the graph.
std::vector<char> drawn_nodes(const GraphRecorder::State& s) {
  const size_t n = s.nodes.size();
  std::vector<char> keep(n, 0);
  std::vector<std::vector<int64_t>> sources(n);
  for (const GraphEdge& e : s.edges) sources[size_t(e.to)].push_back(e.from);
  std::vector<int64_t> pending;
  const auto mark = [&](int64_t v) {
    if (!keep[size_t(v)]) keep[size_t(v)] = 1, pending.push_back(v);
  };
  const size_t forward = s.forward_nodes < 0 ? n : size_t(s.forward_nodes);
  for (size_t v = 0; v < forward; ++v)
    if (s.nodes[v].kind == NodeKind::Op) mark(int64_t(v));
  for (const GraphEdge& e : s.edges)
    if (s.reported[size_t(e.to)] && e.kind == EdgeKind::Cut && s.nodes[size_t(e.from)].kind != NodeKind::Cut) mark(e.to);
  while (!pending.empty()) {  // whatever feeds a drawn node is drawn
    const int64_t v = pending.back();
    pending.pop_back();
    for (int64_t from : sources[size_t(v)]) mark(from);
  }
  for (size_t v = forward; v < n; ++v) keep[v] = 0;
  return keep;
}

}  // namespace

TapeGraph GraphRecorder::graph(const std::vector<std::string>& passes) const {
  const State& s = *state_;
  TP_CHECK(s.recorded_ops > 0, kOp,
           "nothing was recorded while the GraphRecorder was active: no op had an input that requires grad ",
           "with grad mode on (create the recorder before the forward pass, and mark the parameters with ",
           "set_requires_grad)");
  TP_CHECK(!s.passes.empty(), kOp,
           "no backward pass has run since the GraphRecorder began: call backward() on the loss first ",
           "(with Retain::Yes to run one pass per loss) so that the edges carry gradients");
  TP_CHECK(passes.size() <= s.passes.size(), kOp, passes.size(), " passes named but ", s.passes.size(),
           " backward passes ran");
  TapeGraph g;
  g.passes = passes;
  for (size_t p = passes.size(); passes.empty() && p < s.passes.size(); ++p)
    g.passes.push_back("pass " + std::to_string(p + 1));
  const size_t P = g.passes.size();

  const std::vector<char> keep = drawn_nodes(s);
  std::vector<int64_t> renumbered(s.nodes.size(), -1);
  for (size_t v = 0; v < s.nodes.size(); ++v) {
    if (!keep[v]) continue;
    renumbered[v] = int64_t(g.nodes.size());
    GraphNode node = s.nodes[v];
    node.grad_norms.assign(node.outputs.size(), std::vector<double>(P, kNone));
    for (size_t k = 0; k < node.outputs.size(); ++k)
      for (size_t p = 0; p < P; ++p) {
        const auto it = s.passes[p].outputs.find({int64_t(v), int64_t(k)});
        if (it != s.passes[p].outputs.end()) node.grad_norms[k][p] = it->second;
      }
    g.nodes.push_back(std::move(node));
  }
  for (size_t p = 0; p < P; ++p)
    if (s.passes[p].root >= 0 && keep[size_t(s.passes[p].root)])
      g.nodes[size_t(renumbered[size_t(s.passes[p].root)])].losses.push_back(g.passes[p]);
  for (size_t e = 0; e < s.edges.size(); ++e) {
    const GraphEdge& edge = s.edges[e];
    if (!keep[size_t(edge.from)] || !keep[size_t(edge.to)]) continue;
    GraphEdge out = edge;
    out.from = renumbered[size_t(edge.from)];
    out.to = renumbered[size_t(edge.to)];
    out.grad_norms.assign(P, kNone);
    for (size_t p = 0; p < P; ++p) {
      const auto it = s.passes[p].edges.find(int64_t(e));
      if (it != s.passes[p].edges.end()) out.grad_norms[p] = it->second;
    }
    g.edges.push_back(std::move(out));
  }
  return g;
}

TapeGraph tape_graph(const std::function<std::vector<Tensor>()>& forward, const std::vector<std::string>& loss_names,
                     const std::vector<std::pair<std::string, Tensor>>& parameters) {
  GraphRecorder recorder(parameters);
  const std::vector<Tensor> losses = forward();
  TP_CHECK(losses.size() == loss_names.size(), kOp, "the forward pass returned ", losses.size(), " losses but ",
           loss_names.size(), " names were given");
  TP_CHECK(!losses.empty(), kOp, "the forward pass returned no loss");
  for (size_t l = 0; l < losses.size(); ++l)
    TP_CHECK(losses[l].defined() && losses[l].dim() == 0 && losses[l].requires_grad(), kOp, "loss '", loss_names[l],
             "' must be a 0-d tensor that requires grad",
             losses[l].defined() ? ", got shape " + to_string(losses[l].shape()) : std::string(", got an undefined one"));
  for (size_t l = 0; l < losses.size(); ++l) losses[l].backward(l + 1 < losses.size() ? Retain::Yes : Retain::No);
  return recorder.graph(loss_names);
}

// ---------------------------------------------------------------------------------------------
// Collapsing modules

namespace {

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : path) {
    if (c == '.') {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  if (!path.empty()) parts.push_back(part);
  return parts;
}

// The parts of a scope path are its scopes; "layers.0" is one scope, so a path is split at the
// scope boundaries the view knows: a prefix of `module` is a candidate box when it ends a scope.
// Scopes are joined with '.', and a ModuleList item "layers.0" holds a '.' too; a box is a prefix
// that ends between two parts and does not end on a bare list name.
bool is_list_name(const std::vector<std::string>& parts, size_t i) {
  return i + 1 < parts.size() && !parts[i + 1].empty() &&
         std::all_of(parts[i + 1].begin(), parts[i + 1].end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The box that `module` collapses into under `view`, or "" when its node stays open.
std::string box_of(const std::string& module, const GraphView& view) {
  const std::vector<std::string> parts = split_path(module);
  std::string prefix;
  int64_t level = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    prefix += (prefix.empty() ? "" : ".") + parts[i];
    if (is_list_name(parts, i)) continue;  // "layers" then "0": one scope
    ++level;
    const bool opened = std::any_of(view.expand.begin(), view.expand.end(), [&](const std::string& e) {
      return e == prefix || e.compare(0, prefix.size() + 1, prefix + ".") == 0;
    });
    if (level > view.depth && !opened) return prefix;
  }
  return "";
}

std::string parent_of(const std::string& box) {
  const std::vector<std::string> parts = split_path(box);
  std::string parent;
  size_t end = parts.size() - 1;
  if (end >= 1 && is_list_name(parts, end - 1)) --end;
  for (size_t i = 0; i < end; ++i) parent += (parent.empty() ? "" : ".") + parts[i];
  return parent;
}

}  // namespace

TapeGraph collapse(const TapeGraph& graph, const GraphView& view) {
  TP_CHECK(view.depth >= 0, "collapse", "depth must be non-negative, got ", view.depth);
  const size_t n = graph.nodes.size();
  std::vector<std::string> box(n);
  for (size_t v = 0; v < n; ++v) {
    const GraphNode& node = graph.nodes[v];
    if (node.kind != NodeKind::Parameter && node.kind != NodeKind::Leaf) box[v] = box_of(node.module, view);
  }
  // A leaf goes into the box of its readers when they share one.
  std::vector<std::set<std::string>> reader_boxes(n);
  std::vector<std::set<std::pair<int64_t, std::string>>> output_boxes(n);  // (output, reader's box or "#node")
  for (const GraphEdge& e : graph.edges) {
    const std::string& b = box[size_t(e.to)];
    reader_boxes[size_t(e.from)].insert(b);
    output_boxes[size_t(e.from)].insert({e.from_output, b.empty() ? "#" + std::to_string(e.to) : b});
  }
  for (size_t v = 0; v < n; ++v) {
    const GraphNode& node = graph.nodes[v];
    if ((node.kind == NodeKind::Parameter || node.kind == NodeKind::Leaf) && reader_boxes[v].size() == 1)
      box[v] = *reader_boxes[v].begin();
  }

  TapeGraph out;
  out.passes = graph.passes;
  std::vector<int64_t> id(n, -1);
  std::map<std::string, int64_t> boxes;
  for (size_t v = 0; v < n; ++v) {
    if (box[v].empty()) {
      id[v] = int64_t(out.nodes.size());
      out.nodes.push_back(graph.nodes[v]);
      continue;
    }
    auto it = boxes.find(box[v]);
    if (it == boxes.end()) {
      GraphNode m;
      m.kind = NodeKind::Module;
      m.label = box[v];
      m.module = parent_of(box[v]);
      it = boxes.emplace(box[v], int64_t(out.nodes.size())).first;
      out.nodes.push_back(std::move(m));
    }
    id[v] = it->second;
    GraphNode& m = out.nodes[size_t(it->second)];
    const NodeKind kind = graph.nodes[v].kind;
    if (kind == NodeKind::Parameter) ++m.parameters;
    else if (kind != NodeKind::Leaf) ++m.ops;
    m.losses.insert(m.losses.end(), graph.nodes[v].losses.begin(), graph.nodes[v].losses.end());
  }
  // A tensor whose readers all lie in one box enters it once, with its whole gradient.
  std::map<std::tuple<int64_t, int64_t, int64_t>, size_t> merged;  // (from node, output, box node) -> edge
  for (const GraphEdge& e : graph.edges) {
    const int64_t from = id[size_t(e.from)], to = id[size_t(e.to)];
    if (from == to) continue;  // inside one box
    GraphEdge edge = e;
    edge.from = from, edge.to = to;
    const auto& boxes_read = output_boxes[size_t(e.from)];
    const bool one_box = !box[size_t(e.to)].empty() &&
                         std::count_if(boxes_read.begin(), boxes_read.end(),
                                       [&](const auto& o) { return o.first == e.from_output; }) == 1;
    if (!one_box) {
      out.edges.push_back(std::move(edge));
      continue;
    }
    const auto key = std::make_tuple(e.from, e.from_output, to);
    auto found = merged.find(key);
    if (found == merged.end()) {
      edge.to_input = -1;
      found = merged.emplace(key, out.edges.size()).first;
      out.edges.push_back(std::move(edge));
    }
    GraphEdge& entering = out.edges[found->second];
    const GraphNode& producer = graph.nodes[size_t(e.from)];
    if (e.kind == EdgeKind::Gradient) {  // the whole gradient of the tensor: every share is inside
      entering.kind = EdgeKind::Gradient;
      if (size_t(e.from_output) < producer.grad_norms.size()) entering.grad_norms = producer.grad_norms[size_t(e.from_output)];
    }
  }
  return out;
}

}  // namespace tapestry
