#include "models/inspection_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tapestry::models {

using nlohmann::json;

namespace {

// A number for a table: "-" for null (a cosine with a zero gradient, a figure that does not apply).
std::string cell(const json& v, const char* format = "%.3g") {
  if (!v.is_number()) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, format, v.get<double>());
  return buffer;
}

std::string padded(const std::string& text, size_t width) {
  return text.size() >= width ? text + " " : text + std::string(width - text.size(), ' ');
}

// A layer's (or map's) short name: its index in its stack, after "d" in a decoder ("1", "d0").
// Documents without "stack" (before decoders were inspected) are of an encoder.
std::string layer_name(const json& layer) {
  const bool decoder = layer.value("stack", std::string("encoder")) == "decoder";
  return (decoder ? "d" : "") + std::to_string(layer.at("layer").get<int64_t>());
}

std::string head_name(const json& head) { return head.is_null() ? "all" : std::to_string(head.get<int64_t>()); }

std::vector<std::string> loss_names(const json& document) {
  std::vector<std::string> names;
  for (const auto& [name, value] : document.at("losses").items()) names.push_back(name);
  // JSON objects are sorted by key; the document's order is task, mu_l1, nu_l2.
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    const auto rank = [](const std::string& n) { return n == "task" ? 0 : n == "mu_l1" ? 1 : 2; };
    return rank(a) < rank(b);
  });
  return names;
}

// ---- SVG ----

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string fixed(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", v);
  return buffer;
}

std::string text_at(double x, double y, const std::string& text, const char* anchor = "start", int size = 11) {
  return "<text x=\"" + fixed(x) + "\" y=\"" + fixed(y) + "\" font-size=\"" + std::to_string(size) +
         "\" text-anchor=\"" + anchor + "\">" + escape(text) + "</text>";
}

std::string rect(double x, double y, double w, double h, const std::string& fill, const std::string& title = "",
                 const std::string& cls = "") {
  return "<rect" + (cls.empty() ? std::string() : " class=\"" + cls + "\"") + " x=\"" + fixed(x) + "\" y=\"" +
         fixed(y) + "\" width=\"" + fixed(w) + "\" height=\"" + fixed(h) + "\" fill=\"" + fill + "\">" +
         (title.empty() ? std::string() : "<title>" + escape(title) + "</title>") + "</rect>";
}

std::string svg_open(const std::string& id, double width, double height) {
  return "<svg id=\"" + id + "\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(width) + "\" height=\"" +
         fixed(height) + "\" viewBox=\"0 0 " + fixed(width) + " " + fixed(height) + "\">";
}

const char* kLossColors[] = {"#1f77b4", "#d62728", "#2ca02c"};

// A value axis over [lo, hi] (on a log scale, of log10 values): the range rounded out to its ticks,
// and the ticks with their labels. Log scale: whole decades ("1e-3", at most about 8 labelled; over
// two decades or fewer also 2e and 5e), with one decade more below, labelled "0", where `zeros` (a
// zero has no logarithm, and a gradient of zero is a finding, not a gap). Linear: 4 to 8 round values
// (steps of 1, 2 or 5 times a power of ten; whole numbers only with `integers`).
struct Axis {
  double lo = 0, hi = 1;
  std::vector<std::pair<double, std::string>> ticks;
  double zero = NAN;  // log scale with zeros: where a zero is drawn (the "0" tick)
  double y(double v, double top, double height) const { return top + height * (hi - v) / (hi - lo); }
};

Axis value_axis(double lo, double hi, bool log_scale, bool zeros, bool integers = false) {
  Axis a;
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (log_scale) {
    a.lo = std::floor(lo), a.hi = std::ceil(hi);
    if (a.hi <= a.lo) a.hi = a.lo + 1;
    const double step = std::max(1.0, std::ceil((a.hi - a.lo) / 8));
    for (double d = a.hi; d >= a.lo - 1e-9; d -= step) {
      a.ticks.push_back({d, "1e" + std::to_string(int(d))});
      if (a.hi - a.lo <= 2 && d > a.lo)
        for (const int m : {5, 2})
          a.ticks.push_back({d - 1 + std::log10(m), std::to_string(m) + "e" + std::to_string(int(d) - 1)});
    }
    if (zeros) a.lo -= step, a.zero = a.lo, a.ticks.push_back({a.lo, "0"});
    return a;
  }
  if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::abs(lo) * 0.1);
  const double raw = (hi - lo) / 5, power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = raw <= power ? power : raw <= 2 * power ? 2 * power : raw <= 5 * power ? 5 * power : 10 * power;
  if (integers) step = std::max(1.0, std::round(step));
  a.lo = std::floor(lo / step) * step, a.hi = std::ceil(hi / step) * step;
  for (double v = a.lo; v <= a.hi + step * 1e-9; v += step)
    a.ticks.push_back({v, cell(json(std::abs(v) < step * 1e-9 ? 0.0 : v), "%g")});  // no "-1e-17" for 0
  return a;
}

// The axis's gridlines from x0 to x1 with their labels left of x0.
std::string gridlines(const Axis& a, double x0, double x1, double top, double height) {
  std::string s;
  for (const auto& [v, label] : a.ticks) {
    const double y = a.y(v, top, height);
    s += "<line x1=\"" + fixed(x0) + "\" x2=\"" + fixed(x1) + "\" y1=\"" + fixed(y) + "\" y2=\"" + fixed(y) +
         "\" stroke=\"#ddd\"" + (v == a.zero ? " stroke-dasharray=\"3,3\"" : "") + "/>" +
         text_at(x0 - 4, y + 4, label, "end", 10);
  }
  return s;
}

std::string cluster_color(int64_t id, int64_t clusters) {
  if (id < 0 || id >= clusters) return "#dddddd";
  return "hsl(" + std::to_string(int(360.0 * double(id) / double(clusters))) + ",70%,50%)";
}

// Grey-blue intensity for an attention weight in [0, 1] (square-root scale so small weights show).
std::string weight_color(double w) {
  const int v = 255 - int(255 * std::sqrt(std::clamp(w, 0.0, 1.0)));
  return "rgb(" + std::to_string(v) + "," + std::to_string(v) + ",255)";
}

// Red for +1, white for 0, blue for −1; grey for no value.
std::string cosine_color(const json& v) {
  if (!v.is_number()) return "#eeeeee";
  const double c = std::clamp(v.get<double>(), -1.0, 1.0);
  const int fade = 255 - int(200 * std::abs(c));
  return c >= 0 ? "rgb(255," + std::to_string(fade) + "," + std::to_string(fade) + ")"
                : "rgb(" + std::to_string(fade) + "," + std::to_string(fade) + ",255)";
}

// Bars of log10 gradient norms: one group per (layer, target) over the whole tensors, one bar per
// loss. A loss that sends a tensor no gradient gets a mark on the axis's "0" line, not a gap.
std::string gradient_norms_svg(const json& document) {
  const std::vector<std::string> losses = loss_names(document);
  struct Group { std::string label; std::vector<double> norms; };  // log10 norms; NaN: zero
  std::vector<Group> groups;
  double lo = INFINITY, hi = -INFINITY;
  bool zeros = false;
  for (const json& layer : document.at("layers"))
    for (const json& g : layer.at("gradients")) {
      if (!g.at("head").is_null()) continue;
      Group group{"L" + layer_name(layer) + " " + g.at("target").get<std::string>(), {}};
      for (const std::string& l : losses) {
        const double n = g.at("norms").at(l).is_number() ? g.at("norms").at(l).get<double>() : 0.0;
        const double v = n > 0 ? std::log10(n) : std::nan("");
        group.norms.push_back(v);
        if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
        else zeros = true;
      }
      groups.push_back(group);
    }
  const Axis axis = value_axis(lo, hi, true, zeros);
  const double bar = 14, gap = 18, left = 50, top = 24, height = 260;
  const double width = left + double(groups.size()) * (bar * double(losses.size()) + gap) + 20;
  std::string s = svg_open("gradient-norms", width, top + height + 90);
  s += gridlines(axis, left, width - 10, top, height);
  const double floor_y = axis.y(axis.lo, top, height);
  for (size_t i = 0; i < groups.size(); ++i) {
    const double x0 = left + double(i) * (bar * double(losses.size()) + gap) + gap / 2;
    for (size_t l = 0; l < losses.size(); ++l) {
      const double v = groups[i].norms[l], x = x0 + double(l) * bar;
      if (!std::isfinite(v)) {  // no gradient at all
        const std::string what = groups[i].label + ": " + losses[l] + " sends no gradient";
        s += rect(x, floor_y - 3, bar - 1, 3, kLossColors[l % 3], what, "zero-mark") +
             text_at(x + (bar - 1) / 2, floor_y - 6, "0", "middle", 9);
        continue;
      }
      const double y = axis.y(v, top, height);
      s += rect(x, y, bar - 1, floor_y - y, kLossColors[l % 3],
                groups[i].label + ": " + losses[l] + " gradient norm " + cell(json(std::pow(10.0, v))), "norm-bar");
    }
    const double cx = x0 + bar * double(losses.size()) / 2;
    s += "<text x=\"" + fixed(cx) + "\" y=\"" + fixed(top + height + 8) + "\" font-size=\"11\" transform=\"rotate(60 " +
         fixed(cx) + " " + fixed(top + height + 8) + ")\">" + escape(groups[i].label) + "</text>";
  }
  for (size_t l = 0; l < losses.size(); ++l)
    s += rect(left + 120 * double(l), 4, 10, 10, kLossColors[l % 3]) + text_at(left + 120 * double(l) + 14, 13, losses[l]);
  return s + "</svg>";
}

// A grid of cosines: rows (layer, target), columns the loss pairs.
std::string cosines_svg(const json& document) {
  std::vector<std::string> pairs;
  const std::vector<std::string> losses = loss_names(document);
  for (size_t a = 0; a < losses.size(); ++a)
    for (size_t b = a + 1; b < losses.size(); ++b) pairs.push_back(losses[a] + "|" + losses[b]);
  std::vector<std::pair<std::string, json>> rows;
  for (const json& layer : document.at("layers"))
    for (const json& g : layer.at("gradients"))
      if (g.at("head").is_null())
        rows.push_back({"L" + layer_name(layer) + " " + g.at("target").get<std::string>(),
                        g.at("cosines")});
  const double left = 110, top = 24, w = 110, h = 18;
  std::string s = svg_open("cosines", left + w * double(std::max<size_t>(1, pairs.size())) + 10,
                           top + h * double(rows.size()) + 10);
  for (size_t p = 0; p < pairs.size(); ++p) s += text_at(left + w * (double(p) + 0.5), top - 8, "cos " + pairs[p], "middle");
  for (size_t r = 0; r < rows.size(); ++r) {
    s += text_at(left - 6, top + h * double(r) + 13, rows[r].first, "end");
    for (size_t p = 0; p < pairs.size(); ++p) {
      const json v = rows[r].second.value(pairs[p], json());
      s += rect(left + w * double(p), top + h * double(r), w - 2, h - 2, cosine_color(v),
                rows[r].first + " cos " + pairs[p] + " = " + cell(v), "cosine-cell");
      s += text_at(left + w * (double(p) + 0.5), top + h * double(r) + 13, cell(v, "%.3f"), "middle");
    }
  }
  return s + "</svg>";
}

// One bar chart of summed cluster sizes per (layer, clustering), each bar in its cluster's colour
// (as in the assignment map) and labelled with its index; heads beyond 0 are left to the JSON.
std::string cluster_sizes_svg(const json& document) {
  std::string out;
  for (const json& layer : document.at("layers"))
    for (const json& c : layer.at("clusters")) {
      if (!c.at("head").is_null() && c.at("head").get<int64_t>() != 0) continue;
      const std::vector<int64_t> sizes = c.at("sizes").get<std::vector<int64_t>>();
      const int64_t largest = std::max<int64_t>(1, *std::max_element(sizes.begin(), sizes.end()));
      const double bar = std::max(4.0, std::min(40.0, 640.0 / double(sizes.size()))), height = 160, top = 24, left = 50;
      const Axis axis = value_axis(0, double(largest), false, false);
      const std::string title = "layer " + layer_name(layer) + ", head " +
                                head_name(c.at("head")) + ": words per cluster (largest share " +
                                cell(c.at("largest_share")) + ", empty " + cell(c.at("empty")) + " per sample)";
      const double width = std::max(560.0, left + bar * double(sizes.size()) + 20);
      std::string s = svg_open("cluster-sizes-" + layer_name(layer), width, top + height + 34);
      s += text_at(4, 14, title) + gridlines(axis, left, left + bar * double(sizes.size()), top, height);
      // Every bar's index where they are wide enough to read, else every fifth.
      const size_t every = bar >= 14 ? 1 : 5;
      for (size_t i = 0; i < sizes.size(); ++i) {
        const double y = axis.y(double(sizes[i]), top, height), x = left + bar * double(i);
        s += rect(x, y, bar - 1, top + height - y, cluster_color(int64_t(i), int64_t(sizes.size())),
                  "cluster " + std::to_string(i) + ": " + std::to_string(sizes[i]) + " words", "size-bar");
        if (i % every == 0) s += text_at(x + (bar - 1) / 2, top + height + 13, std::to_string(i), "middle", 10);
      }
      s += text_at(left + bar * double(sizes.size()) + 6, top + height + 13, "cluster", "start", 10);
      out += s + "</svg>\n";
    }
  return out;
}

// Full | clustered | improved rows of one head, side by side.
std::string attention_map_svg(const json& map) {
  const int64_t n = map.at("size").get<int64_t>();
  const double px = std::max(2.0, std::min(6.0, 300.0 / double(n))), side = px * double(n), top = 22;
  const char* kinds[] = {"full", "clustered", "improved"};
  std::string s = svg_open("attention-map", 3 * (side + 30) + 10, top + side + 10);
  for (int k = 0; k < 3; ++k) {
    const std::vector<double> w = map.at(kinds[k]).get<std::vector<double>>();
    const double x0 = 10 + double(k) * (side + 30);
    s += text_at(x0, 14, std::string(kinds[k]) + " (layer " + layer_name(map) + ", head " +
                             std::to_string(map.at("head").get<int64_t>()) + ")");
    s += "<g class=\"map-" + std::string(kinds[k]) + "\">";
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const double v = w[size_t(i * n + j)];
        if (v < 1e-3) continue;  // white background
        s += "<rect x=\"" + fixed(x0 + px * double(j)) + "\" y=\"" + fixed(top + px * double(i)) + "\" width=\"" +
             fixed(px) + "\" height=\"" + fixed(px) + "\" fill=\"" + weight_color(v) + "\"/>";
      }
    s += "</g><rect x=\"" + fixed(x0) + "\" y=\"" + fixed(top) + "\" width=\"" + fixed(side) + "\" height=\"" + fixed(side) +
         "\" fill=\"none\" stroke=\"#888\"/>";
  }
  return s + "</svg>";
}

// Lines over the logged steps: each series a (label, values) with a colour, each value also a dot
// (so a single evaluation shows). On a log scale a zero is drawn on the axis's "0" line.
std::string lines_svg(const std::string& id, const std::string& title, const std::vector<double>& steps,
                      const std::vector<std::pair<std::string, std::vector<double>>>& series, bool log_scale) {
  const double left = 60, top = 24, width = 640, height = 200;
  double lo = INFINITY, hi = -INFINITY;
  bool zeros = false;
  const auto value = [&](double v) { return log_scale ? (v > 0 ? std::log10(v) : std::nan("")) : v; };
  for (const auto& [label, values] : series)
    for (const double raw : values) {
      const double v = value(raw);
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
      else if (raw == 0) zeros = true;
    }
  const Axis axis = value_axis(lo, hi, log_scale, zeros);
  // One logged step alone sits in the middle of a short axis.
  const double s0 = steps.empty() ? 0 : steps.front() - (steps.size() == 1 ? 1 : 0);
  const double s1 = steps.empty() ? 1 : steps.back() + (steps.size() == 1 ? 1 : 0);
  const Axis step_axis = value_axis(s0, s1, false, false, /*integers=*/true);
  const auto x_of = [&](double step) { return left + width * (step - step_axis.lo) / (step_axis.hi - step_axis.lo); };
  std::string s = svg_open(id, left + width + 170, top + height + 34);
  s += text_at(4, 14, title) + gridlines(axis, left, left + width, top, height);
  s += "<rect x=\"" + fixed(left) + "\" y=\"" + fixed(top) + "\" width=\"" + fixed(width) + "\" height=\"" +
       fixed(height) + "\" fill=\"none\" stroke=\"#888\"/>";
  for (const auto& [step, label] : step_axis.ticks)
    s += text_at(x_of(step), top + height + 14, label, "middle", 10);
  s += text_at(left + width + 10, top + height + 14, "step", "start", 10);
  for (size_t k = 0; k < series.size(); ++k) {
    const std::string color = kLossColors[k % 3];
    std::string points, dots;
    for (size_t i = 0; i < steps.size() && i < series[k].second.size(); ++i) {
      const double raw = series[k].second[i], v = value(raw);
      const bool zero = log_scale && raw == 0;
      if (!std::isfinite(v) && !zero) continue;
      const double x = x_of(steps[i]), y = axis.y(zero ? axis.zero : v, top, height);
      points += fixed(x) + "," + fixed(y) + " ";
      dots += "<circle class=\"" + std::string(zero ? "zero-point" : "point") + "\" cx=\"" + fixed(x) + "\" cy=\"" +
              fixed(y) + "\" r=\"2.5\" fill=\"" + color + "\"><title>" + escape(series[k].first) + " at step " +
              cell(json(steps[i]), "%.0f") + ": " + cell(json(raw), "%.4g") + "</title></circle>";
    }
    s += "<polyline class=\"series\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1.5\" points=\"" + points +
         "\"/>" + dots;
    s += rect(left + width + 10, top + 14 * double(k), 10, 10, color) +
         text_at(left + width + 24, top + 9 + 14 * double(k), series[k].first);
  }
  return s + "</svg>";
}

// Rows: logged steps; columns: the words of the first inspected sequence; color: their cluster.
std::string assignment_svg(const std::vector<json>& history) {
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> steps;
  int64_t clusters = 1;
  for (const json& h : history) {
    const json& layers = h.at("inspect").at("layers");
    if (layers.empty() || !layers[0].contains("assignment")) continue;
    rows.push_back(layers[0].at("assignment").get<std::vector<int64_t>>());
    steps.push_back(h.at("step").get<int64_t>());
    clusters = std::max<int64_t>(clusters, int64_t(layers[0].at("clusters")[0].at("sizes").size()));
  }
  if (rows.empty()) return "";
  const double px = 12, left = 60, top = 22;
  const double legend = top + px * double(rows.size()) + 10;  // one swatch per cluster below the rows
  const double legend_rows = std::ceil(double(std::min<int64_t>(clusters, 32)) / 8);
  std::string s = svg_open("assignment-history", std::max(600.0, left + px * double(rows[0].size()) + 10),
                           legend + 14 * legend_rows + 6);
  s += text_at(4, 14, "layer 0: cluster of each word of the first held-out sequence, one row per logged step");
  for (int64_t c = 0; c < clusters && c < 32; ++c) {
    const double x = left + 70 * double(c % 8), y = legend + 14 * double(c / 8);
    s += rect(x, y, 10, 10, cluster_color(c, clusters)) + text_at(x + 14, y + 9, "cluster " + std::to_string(c), "start", 10);
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    s += text_at(left - 4, top + px * double(r) + 10, "step " + std::to_string(steps[r]), "end", 10);
    for (size_t j = 0; j < rows[r].size(); ++j)
      s += rect(left + px * double(j), top + px * double(r), px, px, cluster_color(rows[r][j], clusters), "", "assignment-cell");
  }
  return s + "</svg>";
}

// The held-out metrics of the log's "eval" records: accuracies in one plot, losses in another.
std::string evaluation_html(const std::vector<json>& records) {
  std::vector<double> steps;
  std::vector<std::pair<std::string, std::vector<double>>> accuracies, losses;
  for (const json& r : records) {
    if (r.value("event", "") != "eval") continue;
    steps.push_back(r.at("step").get<double>());
    for (const auto& item : r.items()) {
      // Named copies, not structured bindings: a lambda below captures the key.
      const std::string key = item.key();
      const json& value = item.value();
      const bool accuracy = key.find("accuracy") != std::string::npos, loss = key.find("loss") != std::string::npos;
      if (!value.is_number() || (!accuracy && !loss)) continue;
      auto& group = accuracy ? accuracies : losses;
      auto it = std::find_if(group.begin(), group.end(), [&](const auto& s) { return s.first == key; });
      if (it == group.end()) group.push_back({key, std::vector<double>(steps.size() - 1, NAN)}), it = group.end() - 1;
      it->second.resize(steps.size() - 1, NAN);
      it->second.push_back(value.get<double>());
    }
  }
  if (steps.empty()) return "";
  std::string s = "<p>The held-out evaluations of the same log.</p>\n";
  if (!accuracies.empty()) s += lines_svg("history-accuracy", "held-out accuracy", steps, accuracies, false) + "\n";
  if (!losses.empty()) s += lines_svg("history-loss", "loss", steps, losses, true) + "\n";
  return s;
}

std::string history_html(const std::vector<json>& records) {
  std::vector<json> history;
  for (const json& r : records)
    if (r.contains("inspect")) history.push_back(r);
  std::vector<double> steps;
  std::vector<std::pair<std::string, std::vector<double>>> norms, shares, entropy;
  std::vector<std::string> losses;
  for (const json& h : history) {
    steps.push_back(h.at("step").get<double>());
    const json& in = h.at("inspect");
    const json& layer0 = in.at("layers").at(0);
    // The centroids' (else W_Q's) whole-tensor gradient norm per loss in layer 0.
    const json* target = nullptr;
    for (const json& g : layer0.at("gradients"))
      if (g.at("head").is_null() && !target) target = &g;
    for (const json& g : layer0.at("gradients"))
      if (g.at("head").is_null() && g.at("target") == "centroids") target = &g;
    const std::vector<std::string> names = loss_names(in);
    if (norms.empty())
      for (const std::string& n : names) norms.push_back({n + " -> " + target->at("target").get<std::string>(), {}});
    for (size_t l = 0; l < names.size() && l < norms.size(); ++l)
      norms[l].second.push_back(target->at("norms").value(names[l], json()).is_number() ? target->at("norms").at(names[l]).get<double>() : NAN);
    const json& c = layer0.at("clusters").at(0);
    if (shares.empty()) shares = {{"largest share", {}}, {"empty / C", {}}}, entropy = {{"mean U entropy", {}}};
    shares[0].second.push_back(c.at("largest_share").get<double>());
    shares[1].second.push_back(c.at("empty").get<double>() / double(c.at("sizes").size()));
    entropy[0].second.push_back(c.at("entropy").at("mean").is_number() ? c.at("entropy").at("mean").get<double>() : NAN);
  }
  std::string s = "<h2>Over training</h2>\n";
  s += "<p>Gradient norm each loss sends into layer 0's " + norms[0].first.substr(norms[0].first.find("-> ") + 3) +
       " at every logged step (log scale); a loss on the 0 line sends it no gradient at all.</p>\n";
  s += lines_svg("history-norms", "gradient norms, layer 0", steps, norms, true) + "\n";
  s += "<p>Layer 0's clusters: the largest cluster's share of the words and the fraction of empty clusters (means over the "
       "inspected sequences).</p>\n";
  s += lines_svg("history-clusters", "cluster sizes, layer 0", steps, shares, false) + "\n";
  if (std::isfinite(entropy[0].second.back())) {
    s += "<p>Mean normalised entropy of U's columns: 1 when every centroid weighs a word alike, 0 when one claims it.</p>\n";
    s += lines_svg("history-entropy", "assignment confidence, layer 0", steps, entropy, false) + "\n";
  }
  const std::string assignment = assignment_svg(history);
  if (!assignment.empty()) s += "<p>Which cluster each word joins, step by step.</p>\n" + assignment + "\n";
  return s + evaluation_html(records);
}

std::string document_html(const json& d) {
  std::string s;
  s += "<h2>" + escape(d.value("checkpoint", std::string())) + "</h2>\n<p>" + escape(d.value("task", std::string())) +
       ", step " + std::to_string(d.value("step", int64_t(0))) + ", attention <code>" + escape(d.at("attention").get<std::string>()) +
       "</code>, " + std::to_string(d.at("batch").at("sequences").get<int64_t>()) + " sequences of " +
       std::to_string(d.at("batch").at("length").get<int64_t>()) + " words. Losses:";
  for (const std::string& l : loss_names(d)) s += " " + l + " = " + cell(d.at("losses").at(l), "%.4g");
  s += ".</p>\n";
  s += "<h3>Gradient norms per layer and loss</h3>\n<p>The norm of the gradient each loss alone sends into each tensor "
       "(separate backward passes over one forward), log scale.</p>\n" + gradient_norms_svg(d) + "\n";
  if (loss_names(d).size() > 1)
    s += "<h3>Cosines between the losses' gradients</h3>\n<p>Red: the two losses pull the tensor the same way; blue: "
         "against each other; grey: one of them sends nothing.</p>\n" + cosines_svg(d) + "\n";
  s += "<h3>Cluster sizes</h3>\n" + cluster_sizes_svg(d);
  if (!d.at("maps").empty())
    s += "<h3>Attention map: full vs clustered vs improved-clustered</h3>\n<p>One head of the first sequence; darker is "
         "more weight.</p>\n" + attention_map_svg(d.at("maps").at(0)) + "\n";
  return s;
}

}  // namespace

std::string inspection_table(const json& d) {
  std::ostringstream out;
  const std::vector<std::string> losses = loss_names(d);
  out << "tapestry inspect: " << d.value("checkpoint", std::string()) << " (" << d.value("task", std::string()) << ", step "
      << d.value("step", int64_t(0)) << "), " << d.at("attention").get<std::string>() << ", "
      << d.at("batch").at("sequences").get<int64_t>() << " sequences of " << d.at("batch").at("length").get<int64_t>() << "\n";
  out << "losses:";
  for (const std::string& l : losses) out << " " << l << " " << cell(d.at("losses").at(l), "%.5g");
  out << "\n\ngradient norms by loss, and cosines between the losses' gradients\n";
  out << padded("layer", 6) << padded("target", 10) << padded("head", 5);
  for (const std::string& l : losses) out << padded(l, 11);
  for (size_t a = 0; a < losses.size(); ++a)
    for (size_t b = a + 1; b < losses.size(); ++b) out << padded("cos " + losses[a] + "|" + losses[b], 19);
  out << "\n";
  for (const json& layer : d.at("layers"))
    for (const json& g : layer.at("gradients")) {
      out << padded(layer_name(layer), 6) << padded(g.at("target"), 10)
          << padded(head_name(g.at("head")), 5);
      for (const std::string& l : losses) out << padded(cell(g.at("norms").at(l)), 11);
      for (size_t a = 0; a < losses.size(); ++a)
        for (size_t b = a + 1; b < losses.size(); ++b)
          out << padded(cell(g.at("cosines").at(losses[a] + "|" + losses[b]), "%.3f"), 19);
      out << "\n";
    }
  out << "\nclusters (sizes summed over the sequences; empty and largest share: means per sequence)\n";
  out << padded("layer", 6) << padded("head", 5) << padded("empty", 7) << padded("largest", 8) << padded("entropy", 8)
      << padded("unclaimed", 10) << padded("|C^|", 9) << "sizes\n";
  for (const json& layer : d.at("layers"))
    for (const json& c : layer.at("clusters")) {
      out << padded(layer_name(layer), 6) << padded(head_name(c.at("head")), 5)
          << padded(cell(c.at("empty")), 7) << padded(cell(c.at("largest_share")), 8)
          << padded(cell(c.at("entropy").at("mean")), 8) << padded(std::to_string(c.at("unclaimed").get<int64_t>()), 10)
          << padded(cell(c.at("centroid_norms").at("mean")), 9);
      for (const int64_t s : c.at("sizes").get<std::vector<int64_t>>()) out << s << " ";
      out << "\n";
    }
  bool attention = false;
  for (const json& layer : d.at("layers"))
    for (const json& a : layer.at("attention")) {
      if (!attention) {
        out << "\nattention against full attention's, mean over the queries (top-k: the keys of the query's cluster)\n"
            << padded("layer", 6) << padded("head", 5) << padded("A^c topk", 9) << padded("full topk", 10)
            << padded("L1 clustered", 13) << padded("L1 improved", 12) << "Prop. 2 holds\n";
        attention = true;
      }
      out << padded(layer_name(layer), 6) << padded(std::to_string(a.at("head").get<int64_t>()), 5)
          << padded(cell(a.at("clustered_topk_mass")), 9) << padded(cell(a.at("full_topk_mass")), 10)
          << padded(cell(a.at("l1_clustered")), 13) << padded(cell(a.at("l1_improved")), 12)
          << cell(json(100 * a.at("proposition2").get<double>()), "%.1f") << "%\n";
    }
  if (d.contains("compare")) {
    const json& c = d.at("compare");
    out << "\nagainst " << c.at("checkpoint").get<std::string>() << " (step " << c.at("step") << ")\n"
        << padded("layer", 6) << padded("churn", 8) << "centroid movement mean / max\n";
    for (const json& l : c.at("layers"))
      out << padded(layer_name(l), 6) << padded(cell(l.at("churn")), 8)
          << cell(l.at("centroid_movement").at("mean")) << " / " << cell(l.at("centroid_movement").at("max")) << "\n";
  }
  return out.str();
}

std::string history_table(const std::vector<json>& history) {
  std::ostringstream out;
  out << "\nlogged inspections: step, losses, layer 0's largest cluster share and mean U entropy\n";
  for (const json& h : history) {
    if (!h.contains("inspect")) continue;
    const json& in = h.at("inspect");
    out << padded(std::to_string(h.at("step").get<int64_t>()), 8);
    for (const std::string& l : loss_names(in)) out << l << " " << padded(cell(in.at("losses").at(l)), 11);
    const json& c = in.at("layers").at(0).at("clusters").at(0);
    out << "largest " << padded(cell(c.at("largest_share")), 8) << "entropy " << cell(c.at("entropy").at("mean")) << "\n";
  }
  return out.str();
}

std::string inspection_html(const json& document, const std::vector<json>& history, const std::string& graph_svg) {
  std::string s =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tapestry inspect</title>\n"
      "<style>body{font-family:sans-serif;margin:20px;max-width:1200px}svg{display:block;margin:8px 0}"
      "code{background:#f3f3f3}</style></head><body>\n<h1>Gradient flow through the clustering</h1>\n";
  if (!document.is_null()) s += document_html(document);
  if (!graph_svg.empty())
    s += "<h2 id=\"tape\">The tape: where each loss's gradient flows</h2>\n<p>The inspected forward pass as "
         "the autograd tape recorded it. Each edge is labelled with the norm of the gradient that each loss's "
         "backward pass sent along it (a loss that sent nothing is left out); red octagons are the points where "
         "gradient flow is cut (argmax, sort order, hashing, comparisons, detach), and grey dotted edges carry "
         "indices and masks, which have no gradient. Layers are collapsed into one box each except the first.</p>\n"
         "<div style=\"overflow:auto;border:1px solid #ddd\">" + graph_svg + "</div>\n";
  if (!history.empty()) s += history_html(history);
  // The numbers behind the plots; JSON inside a script element of a data type is never run. "</" is
  // escaped so that no string in it can close the element.
  std::string data = json({{"document", document}, {"history", history}}).dump();
  for (size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 2)) data.replace(at, 2, "<\\/");
  s += "<script type=\"application/json\" id=\"inspection\">" + data + "</script>\n</body></html>\n";
  return s;
}

}  // namespace tapestry::models
