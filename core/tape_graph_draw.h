/// @file
/// Drawing a TapeGraph (core/tape_graph.h): Graphviz DOT text, and a self-contained SVG laid out
/// here, without Graphviz, by a layered layout (ranks by longest path from the leaves, order within
/// a rank by the barycentre of the neighbours, edges as curves).
///
///   const TapeGraph g = collapse(recorder.graph({"task", "mu_l1"}), {1, {"layers.0"}});
///   std::ofstream("g.dot") << to_dot(g);   // dot -Tsvg g.dot > g.svg
///   std::ofstream("g.svg") << to_svg(g);
///
/// Both draw the same things: ops as rounded boxes (name, first output's shape; dtype and device
/// when not float32 on the CPU), parameters by their path, cuts as red octagons, what is computed
/// without a gradient in grey, collapsed modules as boxes with their op and parameter counts, the
/// losses where each pass started. An edge that carried gradient is labelled with the norm each
/// pass sent along it (in the pass's colour); passes that sent nothing along it are left out. An
/// edge into a cut is red and dashed, one out of the non-differentiable part grey and dotted.
#pragma once

#include <string>

#include "core/tape_graph.h"

namespace tapestry {

/// The graph as Graphviz DOT (digraph "tape"): nodes that share a module path are grouped in one
/// cluster labelled with it.
std::string to_dot(const TapeGraph& graph);

/// The graph as one SVG element laid out without Graphviz, with a legend of the passes' colours.
/// Every node is a `g` of class "node kind-<kind>" whose text holds its label.
std::string to_svg(const TapeGraph& graph);

/// The name NodeKind `kind` is drawn under: "op", "cut", "no-grad", "parameter", "leaf", "module".
const char* kind_name(NodeKind kind);

}  // namespace tapestry
