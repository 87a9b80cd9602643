// What `tapestry inspect` shows of an inspection document (apps/inspect.h, docs/INSPECT.md): a text
// table for stdout, and one self-contained HTML page of inline SVG plots (no script runs, nothing is
// fetched): gradient norms per layer and loss, the cosines between the losses' gradients, cluster
// sizes, one head's attention map full vs clustered, and, from a training log, how the figures and
// the words' clusters evolved. The document itself is embedded in the page as JSON
// (<script type="application/json" id="inspection">), so the page carries the numbers it draws; with
// the tape's graph (core/tape_graph_draw.h), the page draws it too.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace tapestry::app {

// The tables of a document (losses, gradients, clusters, attention, compare).
std::string inspection_table(const nlohmann::json& document);

// The "inspect" records of a JSON-lines training log, in order: {"step": s, "inspect": {...}}, followed
// by its "eval" records ({"event": "eval", "step": s, <metrics>}) that the page plots beside them.
// Throws Error naming --log for a missing file, a line that is not JSON, or a log with no inspect
// record (a run trained without --inspect-every, or a log of an app that does not inspect).
std::vector<nlohmann::json> read_inspect_log(const std::string& path);

// One line per logged inspection: step, loss values, layer 0's largest share and entropy.
std::string history_table(const std::vector<nlohmann::json>& history);

// The page: the document's plots (when it is not null), the tape's graph (an SVG element, when not
// empty) and the history's plots (when it is not empty).
std::string inspection_html(const nlohmann::json& document, const std::vector<nlohmann::json>& history,
                            const std::string& graph_svg = "");

}  // namespace tapestry::app
