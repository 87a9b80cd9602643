#include "core/tape_graph_draw.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <sstream>
#include <vector>

namespace tapestry {

namespace {

// The colour of each pass's numbers: the first is the task's in the inspector.
const char* pass_colour(size_t pass) {
  static const char* colours[] = {"#1f4e9c", "#c2410c", "#15803d", "#7e22ce", "#b45309", "#0e7490"};
  return colours[pass % (sizeof(colours) / sizeof(colours[0]))];
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", v);
  return text;
}

std::string spec_line(const TensorSpec& s) {
  std::string line = to_string(s.shape);
  if (s.dtype != DType::Float32) line += " " + std::string(dtype_name(s.dtype));
  if (s.device != Device::cpu()) line += " " + to_string(s.device);
  return line;
}

// A node's label, one string per line.
std::vector<std::string> label_lines(const GraphNode& node) {
  std::vector<std::string> lines;
  switch (node.kind) {
    case NodeKind::Module:
      lines = {node.label, std::to_string(node.ops) + " ops, " + std::to_string(node.parameters) + " parameters"};
      break;
    case NodeKind::Cut: lines = {"cut: " + node.label}; break;
    default: lines = {node.label};
  }
  if (node.kind != NodeKind::Module && !node.outputs.empty()) lines.push_back(spec_line(node.outputs[0]));
  for (const std::string& loss : node.losses) lines.push_back("loss: " + loss);
  return lines;
}

// The per-pass numbers of an edge: (pass, norm) for the passes that sent something along it.
std::vector<std::pair<size_t, double>> edge_numbers(const GraphEdge& e) {
  std::vector<std::pair<size_t, double>> numbers;
  if (e.kind != EdgeKind::Gradient) return numbers;
  for (size_t p = 0; p < e.grad_norms.size(); ++p)
    if (!std::isnan(e.grad_norms[p])) numbers.emplace_back(p, e.grad_norms[p]);
  return numbers;
}

// A DOT string; the labels' line breaks are DOT's own "\n" escapes, passed through.
std::string dot_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* dot_style(NodeKind kind) {
  switch (kind) {
    case NodeKind::Op: return "shape=box, style=\"rounded\"";
    case NodeKind::Cut: return "shape=octagon, color=\"#b91c1c\", fontcolor=\"#b91c1c\"";
    case NodeKind::NoGrad: return "shape=box, style=\"dashed\", color=\"#888888\", fontcolor=\"#666666\"";
    case NodeKind::Parameter: return "shape=ellipse, style=filled, fillcolor=\"#dbeafe\"";
    case NodeKind::Leaf: return "shape=ellipse";
    case NodeKind::Module: return "shape=box3d, style=filled, fillcolor=\"#f3f4f6\"";
  }
  return "";
}

}  // namespace

const char* kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::Op: return "op";
    case NodeKind::Cut: return "cut";
    case NodeKind::NoGrad: return "no-grad";
    case NodeKind::Parameter: return "parameter";
    case NodeKind::Leaf: return "leaf";
    case NodeKind::Module: return "module";
  }
  return "?";
}

std::string to_dot(const TapeGraph& graph) {
  std::ostringstream out;
  out << "digraph tape {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
      << "  edge [fontname=\"Helvetica\", fontsize=9];\n";
  out << "  // passes:";
  for (size_t p = 0; p < graph.passes.size(); ++p) out << " " << graph.passes[p] << " " << pass_colour(p);
  out << "\n";
  std::map<std::string, std::vector<size_t>> by_module;
  for (size_t v = 0; v < graph.nodes.size(); ++v) by_module[graph.nodes[v].module].push_back(v);
  int64_t cluster = 0;
  for (const auto& [module, members] : by_module) {
    const std::string indent = module.empty() ? "  " : "    ";
    if (!module.empty()) out << "  subgraph cluster_" << cluster++ << " {\n    label=" << dot_quote(module) << ";\n"
                             << "    style=rounded; color=\"#9ca3af\";\n";
    for (size_t v : members) {
      const GraphNode& node = graph.nodes[v];
      std::string label;
      for (const std::string& line : label_lines(node)) label += (label.empty() ? "" : "\\n") + line;
      out << indent << "n" << v << " [label=" << dot_quote(label) << ", " << dot_style(node.kind)
          << (node.losses.empty() ? "" : ", peripheries=2") << "];\n";
    }
    if (!module.empty()) out << "  }\n";
  }
  for (const GraphEdge& e : graph.edges) {
    out << "  n" << e.from << " -> n" << e.to << " [";
    if (e.kind == EdgeKind::Cut) {
      out << "color=\"#b91c1c\", style=dashed";
    } else if (e.kind == EdgeKind::NoGradient) {
      out << "color=\"#9ca3af\", style=dotted";
    } else {
      std::string label;
      for (const auto& [p, norm] : edge_numbers(e))
        label += (label.empty() ? "" : "\\n") + graph.passes[p] + " " + number(norm);
      out << "color=\"#374151\"";
      if (!label.empty()) out << ", label=" << dot_quote(label);
    }
    out << "];\n";
  }
  out << "}\n";
  return out.str();
}

// ---------------------------------------------------------------------------------------------
// The SVG: a layered layout

namespace {

constexpr double kCharWidth = 6.6;  // of the 11 px sans-serif labels, on average
constexpr double kLineHeight = 14;
constexpr double kNodeGap = 22;
constexpr double kMargin = 16;

struct Placed {
  double x = 0, y = 0, width = 0, height = 0;  // centre, size
  std::vector<std::string> lines;
};

// Ranks by the longest path from a node without inputs (Kahn's order; a node left in a cycle, which a
// collapsed module can close, takes the rank after its ranked inputs).
std::vector<int64_t> ranks_of(const TapeGraph& g) {
  const size_t n = g.nodes.size();
  std::vector<std::vector<size_t>> out(n);
  std::vector<int64_t> indegree(n, 0), rank(n, 0);
  for (const GraphEdge& e : g.edges)
    if (e.from != e.to) out[size_t(e.from)].push_back(size_t(e.to)), ++indegree[size_t(e.to)];
  std::vector<char> done(n, 0);
  std::vector<size_t> ready;
  for (size_t v = 0; v < n; ++v)
    if (indegree[v] == 0) ready.push_back(v);
  for (size_t placed = 0; placed < n; ++placed) {
    if (ready.empty()) {  // a cycle: take the first node not yet placed
      for (size_t v = 0; v < n; ++v)
        if (!done[v]) {
          ready.push_back(v);
          break;
        }
    }
    const size_t v = ready.back();
    ready.pop_back();
    if (done[v]) {
      --placed;
      continue;
    }
    done[v] = 1;
    for (size_t w : out[v]) {
      if (done[w]) continue;
      rank[w] = std::max(rank[w], rank[v] + 1);
      if (--indegree[w] == 0) ready.push_back(w);
    }
  }
  return rank;
}

// Orders each rank by the mean position of the neighbours in the rank above, then below, a few times.
std::vector<std::vector<size_t>> order_ranks(const TapeGraph& g, const std::vector<int64_t>& rank) {
  const int64_t depth = rank.empty() ? 0 : *std::max_element(rank.begin(), rank.end()) + 1;
  std::vector<std::vector<size_t>> rows(static_cast<size_t>(depth));
  for (size_t v = 0; v < rank.size(); ++v) rows[size_t(rank[v])].push_back(v);
  std::vector<double> position(rank.size(), 0);
  const auto number_rows = [&] {
    for (const auto& row : rows)
      for (size_t i = 0; i < row.size(); ++i) position[row[i]] = double(i) - double(row.size()) / 2;
  };
  number_rows();
  std::vector<std::vector<size_t>> in(rank.size()), out(rank.size());
  for (const GraphEdge& e : g.edges) in[size_t(e.to)].push_back(size_t(e.from)), out[size_t(e.from)].push_back(size_t(e.to));
  for (int sweep = 0; sweep < 4; ++sweep) {
    const bool down = sweep % 2 == 0;
    for (auto& row : rows) {
      std::vector<double> key(row.size());
      for (size_t i = 0; i < row.size(); ++i) {
        const auto& near = down ? in[row[i]] : out[row[i]];
        double sum = 0;
        for (size_t w : near) sum += position[w];
        key[i] = near.empty() ? position[row[i]] : sum / double(near.size());
      }
      std::vector<size_t> index(row.size());
      std::iota(index.begin(), index.end(), 0);
      std::stable_sort(index.begin(), index.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
      std::vector<size_t> sorted;
      for (size_t i : index) sorted.push_back(row[i]);
      row = sorted;
      for (size_t i = 0; i < row.size(); ++i) position[row[i]] = double(i) - double(row.size()) / 2;
    }
  }
  return rows;
}

}  // namespace

std::string to_svg(const TapeGraph& g) {
  const std::vector<int64_t> rank = ranks_of(g);
  const std::vector<std::vector<size_t>> rows = order_ranks(g, rank);
  std::vector<Placed> at(g.nodes.size());
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    at[v].lines = label_lines(g.nodes[v]);
    size_t longest = 0;
    for (const std::string& line : at[v].lines) longest = std::max(longest, line.size());
    at[v].width = double(longest) * kCharWidth + 16;
    at[v].height = double(at[v].lines.size()) * kLineHeight + 8;
  }
  // Room between ranks for the edge labels: one line per pass.
  const double rank_gap = 36 + kLineHeight * double(std::max<size_t>(1, g.passes.size()));
  const double legend = 22;
  double width = 0, y = kMargin + legend;
  std::vector<double> row_width(rows.size(), 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    double height = 0;
    for (size_t v : rows[r]) row_width[r] += at[v].width + kNodeGap, height = std::max(height, at[v].height);
    width = std::max(width, row_width[r]);
    for (size_t v : rows[r]) at[v].y = y + height / 2;
    y += height + rank_gap;
  }
  width += 2 * kMargin;
  width = std::max(width, 480.0);
  for (size_t r = 0; r < rows.size(); ++r) {
    double x = (width - row_width[r]) / 2 + kNodeGap / 2;
    for (size_t v : rows[r]) {
      at[v].x = x + at[v].width / 2;
      x += at[v].width + kNodeGap;
    }
  }
  const double height = y - rank_gap + kMargin + 8;

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"tape-graph\" width=\"" << int(width) << "\" height=\""
      << int(height) << "\" viewBox=\"0 0 " << int(width) << " " << int(height)
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg << "<defs><marker id=\"tape-arrow\" viewBox=\"0 0 8 8\" refX=\"8\" refY=\"4\" markerWidth=\"7\" "
         "markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L8,4 L0,8 z\" fill=\"#4b5563\"/></marker></defs>\n";
  // The legend: each pass's colour, and what the dashed and dotted edges mean.
  double lx = kMargin;
  svg << "<g class=\"legend\">";
  for (size_t p = 0; p < g.passes.size(); ++p) {
    svg << "<text x=\"" << lx << "\" y=\"" << kMargin + 6 << "\" fill=\"" << pass_colour(p) << "\" font-weight=\"bold\">"
        << xml_escape(g.passes[p]) << "</text>";
    lx += double(g.passes[p].size()) * kCharWidth + 18;
  }
  svg << "<text x=\"" << lx << "\" y=\"" << kMargin + 6
      << "\" fill=\"#b91c1c\">red dashed: into a cut, no gradient flows back</text>";
  lx += 44 * kCharWidth + 18;
  svg << "<text x=\"" << lx << "\" y=\"" << kMargin + 6 << "\" fill=\"#6b7280\">grey dotted: no gradient</text></g>\n";

  for (const GraphEdge& e : g.edges) {
    const Placed &a = at[size_t(e.from)], &b = at[size_t(e.to)];
    const double x1 = a.x, y1 = a.y + a.height / 2, x2 = b.x, y2 = b.y - b.height / 2;
    const double bend = std::max(24.0, std::abs(y2 - y1) / 2);
    const char* colour = e.kind == EdgeKind::Cut ? "#b91c1c" : e.kind == EdgeKind::NoGradient ? "#9ca3af" : "#4b5563";
    const char* dash = e.kind == EdgeKind::Cut ? " stroke-dasharray=\"6,4\"" : e.kind == EdgeKind::NoGradient ? " stroke-dasharray=\"2,3\"" : "";
    svg << "<path class=\"edge edge-" << (e.kind == EdgeKind::Gradient ? "gradient" : e.kind == EdgeKind::Cut ? "cut" : "no-gradient")
        << "\" d=\"M" << x1 << "," << y1 << " C" << x1 << "," << y1 + bend << " " << x2 << "," << y2 - bend << " " << x2
        << "," << y2 << "\" fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"1.2\"" << dash
        << " marker-end=\"url(#tape-arrow)\"/>\n";
    const auto numbers = edge_numbers(e);
    if (numbers.empty()) continue;
    // At the curve's middle (t = 1/2 of the cubic: the mean of its ends and control points).
    const double mx = (x1 + x2) / 2, my = (y1 + y2) / 2 - kLineHeight * double(numbers.size() - 1) / 2;
    svg << "<text class=\"edge-label\" x=\"" << mx + 4 << "\" y=\"" << my << "\" paint-order=\"stroke\" stroke=\"white\" "
        << "stroke-width=\"3\">";
    for (size_t i = 0; i < numbers.size(); ++i)
      svg << "<tspan x=\"" << mx + 4 << "\" dy=\"" << (i == 0 ? 0 : kLineHeight) << "\" fill=\"" << pass_colour(numbers[i].first)
          << "\">" << xml_escape(g.passes[numbers[i].first]) << " " << number(numbers[i].second) << "</tspan>";
    svg << "</text>\n";
  }
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    const GraphNode& node = g.nodes[v];
    const Placed& p = at[v];
    const double left = p.x - p.width / 2, top = p.y - p.height / 2;
    svg << "<g class=\"node kind-" << kind_name(node.kind) << "\" data-module=\"" << xml_escape(node.module) << "\">";
    const char* fill = node.kind == NodeKind::Parameter ? "#dbeafe" : node.kind == NodeKind::Module ? "#f3f4f6"
                     : node.kind == NodeKind::Cut ? "#fee2e2" : "white";
    const char* stroke = node.kind == NodeKind::Cut ? "#b91c1c" : node.kind == NodeKind::NoGrad ? "#9ca3af" : "#374151";
    const double radius = node.kind == NodeKind::Parameter || node.kind == NodeKind::Leaf ? p.height / 2 : 5;
    svg << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << p.width << "\" height=\"" << p.height << "\" rx=\""
        << radius << "\" fill=\"" << fill << "\" stroke=\"" << stroke << "\" stroke-width=\""
        << (node.losses.empty() ? 1 : 2.5) << "\"" << (node.kind == NodeKind::NoGrad ? " stroke-dasharray=\"4,3\"" : "")
        << "/>";
    svg << "<text x=\"" << p.x << "\" y=\"" << top + 4 << "\" text-anchor=\"middle\">";
    for (size_t i = 0; i < p.lines.size(); ++i)
      svg << "<tspan x=\"" << p.x << "\" dy=\"" << kLineHeight << "\"" << (i == 0 ? " font-weight=\"bold\"" : " fill=\"#4b5563\"")
          << ">" << xml_escape(p.lines[i]) << "</tspan>";
    svg << "</text></g>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace tapestry
