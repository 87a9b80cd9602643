// `tapestry inspect`: how gradients flow through the clustering of a trained model, and what the
// clustering does (models/inspection.h computes it; models/inspection_report.h draws it). Reads a
// checkpoint of copy-task, reverse, classify, translate or asr whose model has clustered,
// improved-clustered or neural-clustering attention (a translator: in its encoder or its decoder)
// and inspects it on the run's own held-out data, which the app that wrote it prepares as its
// evaluations do:
//
//   tapestry inspect --checkpoint run.ckpt [--batches N] [--compare later.ckpt] [--json F] [--html F] [--graph F]
//   tapestry inspect --log run.jsonl --html report.html      (figures logged with --inspect-every)
//
// The table goes to stdout; --json writes the document described in docs/INSPECT.md; --html one
// self-contained page, with the inspected pass's autograd graph; --graph writes that graph as Graphviz
// DOT (core/tape_graph.h: each edge with each loss's gradient norm, cuts marked). Exit codes as every command (apps/app.h): 2 for a bad command line, 1 for a
// file that is missing, unreadable or of another app, a model with nothing to inspect, or an output
// that cannot be written.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "apps/app.h"
#include "models/inspection.h"
#include "train/run_state.h"
#include "train/trainer.h"

namespace tapestry::app {

struct InspectOptions {
  std::string checkpoint;  // the checkpoint to inspect
  std::string compare;     // a second checkpoint of the same run: churn and centroid movement
  int64_t batches = 1;     // held-out batches (of the run's batch size) inspected together
  std::string json;        // write the document here
  std::string html;        // write the page here
  std::string graph;       // write the inspected pass's autograd graph as Graphviz DOT here
  std::string log;         // a JSON-lines training log whose "inspect" records the page draws
  uint64_t seed = 0;       // the clustered types' hashing
  int threads = 1;         // CPU threads
};

// What `tapestry inspect` asks of the app that wrote a checkpoint.
struct CheckpointRequest {
  std::string path;
  int64_t batches = 1;                // the run's first held-out batches, inspected together as one
  uint64_t seed = 0;                  // the clustered types' hashing
  const char* flag = "--checkpoint";  // names the file in errors
  models::DrawGraph graph = models::DrawGraph::No;  // whether to record the pass's graph
};

// A checkpoint inspected by its app.
struct InspectedCheckpoint {
  nlohmann::json about;  // "checkpoint", "task", "step", "mu", "nu"
  models::Inspection inspection;
};

// The task of an app whose model `tapestry inspect` reads: --inspect-every logs inspection(1, the
// seed given here) without the attention maps (too large for a log line per step).
class InspectableTask : public train::Task {
 public:
  // µ, ν of the run, and the hashing seed of the logged inspections.
  explicit InspectableTask(const models::InspectionOptions& logged) : logged_(logged) {}

  // The run's first `batches` held-out batches as one, with the training attention; the clustered
  // types hash with Generator(seed). Throws Error naming --batches when the run holds fewer.
  virtual models::Inspection inspection(int64_t batches, uint64_t seed) = 0;

  nlohmann::json inspect() final {
    nlohmann::json j = models::to_json(inspection(1, logged_.hash_seed));
    j.erase("maps");
    return j;
  }

  // The options of an inspection with hashing seed `seed` (recording the graph when draw_graph asked).
  models::InspectionOptions inspection_options(uint64_t seed) const { return {logged_.mu, logged_.nu, seed, graph_}; }
  // Whether the next inspections record the pass's graph.
  void draw_graph(models::DrawGraph graph) { graph_ = graph; }

 private:
  models::InspectionOptions logged_;
  models::DrawGraph graph_ = models::DrawGraph::No;
};

// What an app gives `tapestry inspect`: the task name its checkpoints record, and how it restores
// and inspects one of them (inspect_<app>_checkpoint).
struct CheckpointInspector {
  std::string task;  // "copy-task"
  std::function<InspectedCheckpoint(const CheckpointRequest&)> inspect;
};

// Makes `tapestry inspect` read the checkpoints of `inspector.task` (add_training_app does it for
// the apps that have an inspector); registering a task again replaces its inspector.
void register_inspector(const CheckpointInspector& inspector);

// How each app's inspect_<app>_checkpoint ends: restores request.path into run.model() (a checkpoint
// of `identity`; Error otherwise) and returns run.inspection(request.batches, request.seed).
InspectedCheckpoint inspect_restored(InspectableTask& run, const CheckpointRequest& request,
                                     const train::RunIdentity& identity);

// The rows of the first `count` of `batches` (a run's held-out batches), in order: the inspected
// batch. Throws Error naming --batches when there are fewer.
std::vector<int64_t> first_batches(const std::vector<std::vector<int64_t>>& batches, int64_t count);

// Throws Error naming the flag.
void check_inspect_options(const InspectOptions& options);

// The inspection document of --checkpoint (with --compare's changes): what --json writes. Throws
// Error for the files and models it cannot inspect. With `graph`, the inspected pass's graph is
// recorded too and drawn as `tapestry inspect` draws it (models::inspection_graph_view).
nlohmann::json inspect_checkpoint(const InspectOptions& options, std::optional<TapeGraph>* graph = nullptr);

// Registers `tapestry inspect`.
void add_inspect(CommandLine& cli);

}  // namespace tapestry::app
