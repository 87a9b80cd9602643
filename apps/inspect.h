// `tapestry inspect`: how gradients flow through the clustering of a trained model, and what the
// clustering does (models/inspection.h computes it; apps/inspect_report.h draws it). Reads a
// copy-task checkpoint whose model has clustered, improved-clustered or neural-clustering attention
// and inspects it on the run's own held-out data:
//
//   tapestry inspect --checkpoint run.ckpt [--batches N] [--compare later.ckpt] [--json F] [--html F]
//   tapestry inspect --log run.jsonl --html report.html      (figures logged with --inspect-every)
//
// The table goes to stdout; --json writes the document described in docs/INSPECT.md; --html one
// self-contained page. Exit codes as every command (apps/app.h): 2 for a bad command line, 1 for a
// file that is missing, unreadable or of another app, a model with nothing to inspect, or an output
// that cannot be written.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "apps/app.h"

namespace tapestry::app {

struct InspectOptions {
  std::string checkpoint;  // the copy-task checkpoint to inspect
  std::string compare;     // a second checkpoint of the same run: churn and centroid movement
  int64_t batches = 1;     // held-out batches (of the run's batch size) inspected together
  std::string json;        // write the document here
  std::string html;        // write the page here
  std::string log;         // a JSON-lines training log whose "inspect" records the page draws
  uint64_t seed = 0;       // the clustered types' hashing
  int threads = 1;         // CPU threads
};

// Throws Error naming the flag.
void check_inspect_options(const InspectOptions& options);

// The inspection document of --checkpoint (with --compare's changes): what --json writes. Throws
// Error for the files and models it cannot inspect.
nlohmann::json inspect_checkpoint(const InspectOptions& options);

// Registers `tapestry inspect`.
void add_inspect(CommandLine& cli);

}  // namespace tapestry::app
