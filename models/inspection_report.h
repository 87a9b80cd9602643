/// @file
/// What `tapestry inspect` shows of an inspection document (models/inspection.h, docs/INSPECT.md): a
/// text table for stdout, and one self-contained HTML page of inline SVG plots (no script runs,
/// nothing is fetched): gradient norms per layer and loss, the cosines between the losses' gradients,
/// cluster sizes, one head's attention map full vs clustered, and, from a training log, how the
/// figures and the words' clusters evolved. The document itself is embedded in the page as JSON (a
/// script element of type application/json and id "inspection"), so the page carries the numbers it
/// draws; with the tape's graph (core/tape_graph_draw.h), the page draws it too.
///
///   std::printf("%s", inspection_table(document).c_str());
///   write(inspection_html(document, history, to_svg(graph)));
///
/// A history is the records of a JSON-lines training log: its inspections, {"step": s, "inspect":
/// document}, in order, then its evaluations, {"event": "eval", "step": s, metrics...}, which the
/// page plots beside them. Every function throws nlohmann::json::exception for a document or a
/// record of another shape.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tapestry::models {

/// The tables of a document: losses, gradient norms and cosines, clusters, attention against full
/// attention's, and the comparison with a later checkpoint when the document has one.
std::string inspection_table(const nlohmann::json& document);

/// One line per logged inspection of `history`: step, loss values, layer 0's largest cluster share
/// and mean entropy.
std::string history_table(const std::vector<nlohmann::json>& history);

/// The page: the document's plots (when it is not null), the tape's graph (an SVG element, when
/// `graph_svg` is not empty) and the history's plots (when it is not empty).
std::string inspection_html(const nlohmann::json& document, const std::vector<nlohmann::json>& history,
                            const std::string& graph_svg = "");

}  // namespace tapestry::models
