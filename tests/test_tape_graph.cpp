// The tape as a graph (core/tape_graph.h, core/tape_graph_draw.h): nodes, edges and cuts of a small
// computation whose gradients are known, each edge's norms against the gradients computed directly,
// a Transformer encoder collapsed into one box per layer, the DOT and SVG drawings, and bad input.
#include <cmath>
#include <functional>

#include "core/tape_graph.h"
#include "core/tape_graph_draw.h"
#include "nn/transformer.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// The nodes labelled `label` (of `kind`).
std::vector<int64_t> nodes_named(const TapeGraph& g, const std::string& label, NodeKind kind) {
  std::vector<int64_t> found;
  for (size_t v = 0; v < g.nodes.size(); ++v)
    if (g.nodes[v].label == label && g.nodes[v].kind == kind) found.push_back(int64_t(v));
  return found;
}

int64_t node_named(const TapeGraph& g, const std::string& label, NodeKind kind) {
  const std::vector<int64_t> found = nodes_named(g, label, kind);
  INFO("node " << label);
  REQUIRE(found.size() == 1);
  return found[0];
}

// The edge into input `input` of node `to` (input -1: any edge from `from`).
const GraphEdge& edge_into(const TapeGraph& g, int64_t to, int64_t input) {
  for (const GraphEdge& e : g.edges)
    if (e.to == to && e.to_input == input) return e;
  FAIL("no edge into input " << input << " of node " << g.nodes[size_t(to)].label);
  return g.edges.front();
}

double norm_of(const Tensor& t) {
  double s = 0;
  for (double v : t.to_vector<double>()) s += v * v;
  return std::sqrt(s);
}

void check_norm(double edge, double direct) {
  INFO("edge " << edge << " vs directly " << direct);
  CHECK(std::abs(edge - direct) <= 1e-12 + 1e-12 * std::abs(direct));
}

}  // namespace

TEST_CASE("tape graph of a small computation: nodes, edges, cuts, and each edge's norm equal to the gradient computed directly") {
  Tape::current().clear();
  const Tensor w = uniform({3, 2}, 1).set_requires_grad(true);
  const Tensor x = uniform({4, 3}, 2);  // an input that needs no gradient: not drawn
  GraphRecorder recorder({{"lin.weight", w}});
  const Tensor h = matmul(x, w);                               // (4, 2)
  const Tensor a = tanh(h);                                    // (4, 2)
  const Tensor first = sum(a * a);                             // a read twice by one mul
  const Tensor index = argmax(h, 1);                           // (4) a cut: no gradient through it
  const Tensor second = sum(gather(a, 1, unsqueeze(index, 1)));  // a read through the cut's index
  h.retain_grad();
  a.retain_grad();
  first.backward(Retain::Yes);
  const Tensor dw_first = clone(w.grad()), dh_first = clone(h.grad()), da_first = clone(a.grad());
  w.zero_grad(), h.zero_grad(), a.zero_grad();
  second.backward();
  const Tensor dw_second = w.grad(), dh_second = h.grad(), da_second = a.grad();
  const TapeGraph g = recorder.graph({"first", "second"});
  REQUIRE(g.passes == std::vector<std::string>{"first", "second"});

  // Nodes: the parameter by its path, the ops, the cut, and the index computed from it without a gradient.
  const int64_t weight = node_named(g, "lin.weight", NodeKind::Parameter);
  CHECK(g.nodes[size_t(weight)].outputs[0].shape == Shape{3, 2});
  const int64_t mm = node_named(g, "matmul", NodeKind::Op), th = node_named(g, "tanh", NodeKind::Op);
  const int64_t mul_node = node_named(g, "mul", NodeKind::Op), gathered = node_named(g, "gather", NodeKind::Op);
  const int64_t cut = node_named(g, "argmax", NodeKind::Cut);
  const int64_t index_view = node_named(g, "unsqueeze", NodeKind::NoGrad);
  CHECK(g.nodes[size_t(cut)].outputs[0].dtype == DType::Int64);
  CHECK(nodes_named(g, "leaf", NodeKind::Leaf).empty());  // x needs no gradient
  CHECK(nodes_named(g, "sum", NodeKind::Op).size() == 2);
  for (int64_t s : nodes_named(g, "sum", NodeKind::Op)) CHECK(g.nodes[size_t(s)].losses.size() == 1);

  // Edges: what feeds what, and what kind each is.
  const GraphEdge& into_mm = edge_into(g, mm, 1);
  CHECK((into_mm.from == weight && into_mm.kind == EdgeKind::Gradient));
  const GraphEdge& into_cut = edge_into(g, cut, 0);
  CHECK((into_cut.from == mm && into_cut.kind == EdgeKind::Cut));
  CHECK((edge_into(g, index_view, 0).from == cut && edge_into(g, index_view, 0).kind == EdgeKind::NoGradient));
  const GraphEdge& index_edge = edge_into(g, gathered, 1);
  CHECK((index_edge.from == index_view && index_edge.kind == EdgeKind::NoGradient));
  CHECK(std::isnan(index_edge.grad_norms[0]));
  CHECK(std::isnan(into_cut.grad_norms[0]));

  // Norms: each edge carries what its consumer sent; the shares of a fan-out sum to the gradient.
  check_norm(into_mm.grad_norms[0], norm_of(dw_first));
  check_norm(into_mm.grad_norms[1], norm_of(dw_second));
  check_norm(edge_into(g, th, 0).grad_norms[0], norm_of(dh_first));
  check_norm(edge_into(g, th, 0).grad_norms[1], norm_of(dh_second));
  // d first / da = 2a, one a from each of mul's inputs; the second loss never reaches the mul.
  check_norm(edge_into(g, mul_node, 0).grad_norms[0], norm_of(da_first) / 2);
  check_norm(edge_into(g, mul_node, 1).grad_norms[0], norm_of(da_first) / 2);
  CHECK(std::isnan(edge_into(g, mul_node, 0).grad_norms[1]));
  check_norm(edge_into(g, gathered, 0).grad_norms[1], norm_of(da_second));
  check_norm(edge_into(g, gathered, 0).grad_norms[1], 2.0);  // four rows, one picked from each
  CHECK(std::isnan(edge_into(g, gathered, 0).grad_norms[0]));
  // A node's whole gradient per pass: tanh's output, read by the mul (first) and the gather (second).
  check_norm(g.nodes[size_t(th)].grad_norms[0][0], norm_of(da_first));
  check_norm(g.nodes[size_t(th)].grad_norms[0][1], norm_of(da_second));
  check_norm(g.nodes[size_t(weight)].grad_norms[0][0], norm_of(dw_first));

  // Drawn: the cut is an octagon in DOT, a node of class kind-cut in the SVG; numbers on the edges.
  const std::string dot = to_dot(g);
  CHECK(dot.find("digraph tape") == 0);
  CHECK(dot.find("shape=octagon") != std::string::npos);
  CHECK(dot.find("\"cut: argmax\\n(4,) int64\"") != std::string::npos);
  CHECK(dot.find("style=dashed") != std::string::npos);
  CHECK(dot.find("second 2\"") != std::string::npos);  // the gather's share of the second loss
  const std::string svg = to_svg(g);
  CHECK(svg.find("<svg") == 0);
  CHECK(svg.find("kind-cut") != std::string::npos);
  CHECK(svg.find(">lin.weight</tspan>") != std::string::npos);
  CHECK(svg.find(">second 2</tspan>") != std::string::npos);
}

TEST_CASE("tape graph: a detached tensor and one read under NoGradGuard are cuts; ops recorded between passes are left out") {
  Tape::current().clear();
  const Tensor p = uniform({5}, 3).set_requires_grad(true);
  GraphRecorder recorder;
  const Tensor y = exp(p);
  const Tensor scale = y.detach() * 2.0;  // computed from y without a gradient
  Tensor halved;
  {
    NoGradGuard no_grad;
    halved = y * 0.5;
  }
  const Tensor loss = sum(y * scale) + sum(y * halved);
  loss.backward(Retain::Yes);
  const Tensor between = loss * 3.0;  // after the first pass: not part of the drawn forward pass
  between.backward();
  const TapeGraph g = recorder.graph({"loss"});
  CHECK(nodes_named(g, "leaf", NodeKind::Leaf).size() == 1);  // p, unnamed
  const int64_t detach = node_named(g, "detach", NodeKind::Cut);
  const int64_t exp_node = node_named(g, "exp", NodeKind::Op);
  CHECK(edge_into(g, detach, 0).from == exp_node);
  CHECK(edge_into(g, detach, 0).kind == EdgeKind::Cut);
  CHECK(nodes_named(g, "mul", NodeKind::Op).size() == 2);  // y·scale, y·halved; loss·3 is left out
  const int64_t scaled = node_named(g, "mul", NodeKind::NoGrad);  // y.detach()·2
  CHECK((edge_into(g, scaled, 0).from == detach && edge_into(g, scaled, 0).kind == EdgeKind::NoGradient));
  const int64_t no_grad_mul = node_named(g, "mul", NodeKind::Cut);  // y * 0.5 under NoGradGuard
  CHECK(edge_into(g, no_grad_mul, 0).kind == EdgeKind::Cut);
  CHECK(nodes_named(g, "add", NodeKind::Op).size() == 1);  // the loss's add
}

TEST_CASE("tape graph of a Transformer encoder collapsed into one box per layer, and one layer expanded") {
  Tape::current().clear();
  Generator gen(5);
  nn::TransformerLayerOptions o;
  o.d_model = 8, o.heads = 2, o.d_ff = 16, o.dropout = 0.0;
  nn::TransformerEncoder encoder(o, 2, gen);
  encoder.to(DType::Float64);
  const Tensor x = uniform({2, 5, 8}, 6);
  GraphRecorder recorder(encoder.named_parameters());
  std::vector<nn::EncoderLayerTrace> traces;
  const Tensor out = encoder.forward(x, Tensor(), gen, &traces);
  const Tensor loss = sum(out * out);
  traces[1].input.retain_grad();  // layer 0's output
  loss.backward();
  const Tensor between_layers = traces[1].input.grad();
  const TapeGraph full = recorder.graph({"loss"});
  CHECK(nodes_named(full, "layers.0.self_attn.q_proj.weight", NodeKind::Parameter).size() == 1);

  const TapeGraph boxes = collapse(full, {0, {}});
  const int64_t layer0 = node_named(boxes, "layers.0", NodeKind::Module);
  const int64_t layer1 = node_named(boxes, "layers.1", NodeKind::Module);
  const int64_t per_layer = int64_t((*encoder.layers)[0]->named_parameters().size());
  CHECK(boxes.nodes[size_t(layer0)].parameters == per_layer);
  CHECK(boxes.nodes[size_t(layer1)].parameters == per_layer);
  CHECK(boxes.nodes[size_t(layer0)].ops > 10);
  for (const GraphNode& node : boxes.nodes) CHECK(node.kind != NodeKind::Parameter);  // all inside their layer
  // Layer 0's output enters layer 1 once (read by its attention and its residual), with its whole gradient.
  int64_t between = 0;
  for (const GraphEdge& e : boxes.edges)
    if (e.from == layer0 && e.to == layer1) {
      ++between;
      CHECK(e.kind == EdgeKind::Gradient);
      check_norm(e.grad_norms[0], norm_of(between_layers));
    }
  CHECK(between == 1);
  CHECK(boxes.nodes.size() == 4);  // two layers, mul, sum

  const TapeGraph open = collapse(full, {0, {"layers.1"}});
  CHECK(nodes_named(open, "layers.1", NodeKind::Module).empty());
  CHECK(nodes_named(open, "layers.1.self_attn", NodeKind::Module).size() == 1);
  CHECK(nodes_named(open, "layers.1.ff", NodeKind::Module).size() == 1);
  // Each post-norm residual step, norm(x + dropout(f(x))), is one op (ops/norm.h).
  const std::vector<int64_t> norms = nodes_named(open, "dropout_add_layer_norm", NodeKind::Op);
  CHECK(norms.size() == 2);
  for (int64_t v : norms) CHECK(open.nodes[size_t(v)].module == "layers.1");
  CHECK(nodes_named(open, "layers.1.norm1.weight", NodeKind::Parameter).size() == 1);
  const std::string dot = to_dot(open);
  CHECK(dot.find("label=\"layers.1\"") != std::string::npos);  // the open layer's cluster
  CHECK(dot.find("shape=box3d") != std::string::npos);
  CHECK(to_svg(open).find("kind-module") != std::string::npos);
}

// a ⊙ b² whose backward writes both inputs' gradients into their buffers in place, asking for both
// buffers before writing either (what an op may do; with a read as both inputs, the same buffer).
Tensor product_in_place(const Tensor& a, const Tensor& b) {
  Tensor out = a.detach() * b.detach() * b.detach();
  record("product_in_place", {a, b}, {out}, [as = Saved(a), bs = Saved(b)](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor none;
    const Tensor& da = g.needs(0) ? g.buffer(0) : none;
    const Tensor& db = g.needs(1) ? g.buffer(1) : none;
    const Tensor &av = as.get(), &bv = bs.get();
    if (da.defined()) add_(da, dy[0] * bv * bv);
    if (db.defined()) add_(db, dy[0] * av * bv * 2.0);
  });
  return out;
}

TEST_CASE("tape graph: an op that reads one tensor as two inputs sends each edge its own input's gradient") {
  Tape::current().clear();
  const Tensor x = uniform({3, 3}, 11).set_requires_grad(true);
  const Tensor c = uniform({3, 3}, 12);
  // The same computations on two separate clones of x give each input's gradient directly.
  const auto direct = [&](const std::function<Tensor(const Tensor&, const Tensor&)>& f) {
    const Tensor a = clone(x.detach()).set_requires_grad(true), b = clone(x.detach()).set_requires_grad(true);
    sum(f(a, b) * c).backward();
    return std::make_pair(a.grad(), b.grad());
  };
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> ops = {
      {"matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"product_in_place", [](const Tensor& a, const Tensor& b) { return product_in_place(a, b); }},
  };
  for (const auto& [name, f] : ops) {
    INFO("op " << name);
    const auto [da, db] = direct(f);
    // Two different shares, but for x ⊙ x, whose two are equal.
    if (name != "mul") REQUIRE(std::abs(norm_of(da) - norm_of(db)) > 1e-3 * norm_of(da));
    x.zero_grad();
    GraphRecorder recorder({{"x", x}});
    sum(f(x, x) * c).backward();
    const TapeGraph g = recorder.graph({"loss"});
    const int64_t leaf = node_named(g, "x", NodeKind::Parameter);
    std::vector<GraphEdge> from_x;
    for (const GraphEdge& e : g.edges)
      if (e.from == leaf) from_x.push_back(e);
    REQUIRE(from_x.size() == 2);
    const int64_t op = from_x[0].to;
    CHECK(g.nodes[size_t(op)].label == name);
    CHECK(from_x[1].to == op);
    CHECK(edge_into(g, op, 0).from == leaf);
    CHECK(edge_into(g, op, 1).from == leaf);
    check_norm(edge_into(g, op, 0).grad_norms[0], norm_of(da));
    check_norm(edge_into(g, op, 1).grad_norms[0], norm_of(db));
    // The tensor's gradient is still the sum of both, with or without the recorder.
    check_close(x.grad(), da + db, 1e-12, 1e-12);
    check_norm(g.nodes[size_t(leaf)].grad_norms[0][0], norm_of(da + db));
  }
}

TEST_CASE("tape graph refuses a tape with nothing recorded, a graph asked before backward, and bad calls") {
  Tape::current().clear();
  {
    GraphRecorder recorder;
    const Tensor c = uniform({3}, 7) * 2.0;  // nothing requires grad
    check_error([&] { recorder.graph(); }, {"tape_graph", "nothing was recorded"});
    check_error([] { GraphRecorder second; }, {"GraphRecorder", "another GraphRecorder"});
  }
  {
    const Tensor p = uniform({3}, 8).set_requires_grad(true);
    GraphRecorder recorder;
    const Tensor loss = sum(p * p);
    check_error([&] { recorder.graph(); }, {"tape_graph", "no backward pass has run"});
    loss.backward();
    check_error([&] { recorder.graph({"a", "b"}); }, {"tape_graph", "2 passes named but 1 backward passes ran"});
    CHECK(recorder.graph().passes == std::vector<std::string>{"pass 1"});
  }
  const Tensor p = uniform({3}, 9).set_requires_grad(true);
  check_error([&] { tape_graph([&] { return std::vector<Tensor>{sum(p)}; }, {"a", "b"}); },
              {"tape_graph", "returned 1 losses but 2 names"});
  check_error([&] { tape_graph([&] { return std::vector<Tensor>{p * 2.0}; }, {"a"}); },
              {"tape_graph", "loss 'a' must be a 0-d tensor", "(3,)"});
  check_error([&] { collapse(TapeGraph(), {-1, {}}); }, {"collapse", "depth"});
  Tape::current().clear();  // what the refused calls recorded
  const TapeGraph g = tape_graph([&] { return std::vector<Tensor>{sum(p * p), sum(p)}; }, {"sq", "lin"}, {{"p", p}});
  for (int64_t s : nodes_named(g, "sum", NodeKind::Op)) {
    if (g.nodes[size_t(s)].losses != std::vector<std::string>{"lin"}) continue;
    check_norm(edge_into(g, s, 0).grad_norms[1], std::sqrt(3.0));  // d Σp / dp = 1
    CHECK(std::isnan(edge_into(g, s, 0).grad_norms[0]));            // the first loss never reaches it
  }
  CHECK(nodes_named(g, "p", NodeKind::Parameter).size() == 1);
}
