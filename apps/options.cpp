#include "apps/options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "core/caching_allocator.h"
#include "models/layer_options.h"
#include "nn/encoder.h"
#include "train/run_state.h"

namespace tapestry::app {

Check<double> in_range(double low, double high, Bounds bounds) {
  const bool low_open = bounds == Bounds::LowOpen, high_open = bounds == Bounds::HighOpen;
  std::ostringstream range;
  range << (low_open ? "(" : "[") << low << ", ";
  if (std::isinf(high)) range << "inf";
  else range << high;
  range << (high_open || std::isinf(high) ? ")" : "]");
  const std::string text = range.str();
  return {[=](const double& v) {
            const bool ok = std::isfinite(v) && (low_open ? v > low : v >= low) && (high_open ? v < high : v <= high);
            std::ostringstream out;
            if (!ok) out << "must lie in " << text << ", got " << v;
            return out.str();
          },
          "in " + text};
}

Check<int64_t> between(int64_t low, int64_t high) {
  const std::string text = "[" + std::to_string(low) + ", " + std::to_string(high) + "]";
  return {[=](const int64_t& v) {
            return v >= low && v <= high ? std::string() : "must lie in " + text + ", got " + std::to_string(v);
          },
          "in " + text};
}

Check<int> thread_count() {
  const Check<int64_t> range = between(0, train::kMaxThreads);
  return {[range](const int& v) { return range.problem(v); }, range.allowed};
}

Check<std::string> one_of(std::vector<std::string> values) {
  std::string allowed;
  for (const auto& v : values) allowed += (allowed.empty() ? "" : " | ") + v;
  return {[values, allowed](const std::string& v) {
            return std::find(values.begin(), values.end(), v) != values.end() ? std::string()
                                                                              : "must be " + allowed + ", got '" + v + "'";
          },
          allowed};
}

train::Report run_prepared(const PreparedRun& run, const train::TrainOptions& options) {
  train::Trainer trainer(run.spec, options);
  return trainer.run([&](Generator& gen, Device device) { return run.make_task(gen, device, trainer.world()); });
}

InspectedCheckpoint inspect_prepared(const PreparedRun& run, uint64_t seed, const CheckpointRequest& request) {
  Generator gen(seed);
  const std::unique_ptr<train::Task> task = run.make_task(gen, Device::cpu(), dist::World());
  auto* inspectable = dynamic_cast<InspectableTask*>(task.get());
  TP_CHECK(inspectable, request.flag, "the task of a ", run.spec.identity.task, " run cannot be inspected");
  return inspect_restored(*inspectable, request, run.spec.identity);
}

nlohmann::json sampler_state(const data::BatchSampler& sampler) {
  return {{"epoch", sampler.state().epoch}, {"position", sampler.state().position}, {"ranks", sampler.world_size()}};
}

void restore_sampler(data::BatchSampler& sampler, const nlohmann::json& state) {
  if (!state.contains("epoch")) return;
  // `position` batches of each of `ranks` shares were taken: that many of the epoch's batches, of
  // which each of this run's ranks skips its share (rounded down).
  const int64_t taken = state.at("position").get<int64_t>() * state.value("ranks", int64_t(1));
  sampler.restore({state.at("epoch").get<int64_t>(), taken / sampler.world_size()});
}

nlohmann::json recorded_settings(const std::string& path, const std::string& task, const char* flag) {
  train::RunIdentity identity;
  try {
    identity = train::read_identity(path);
  } catch (const Error& e) {
    fail(flag, e.what());
  }
  TP_CHECK(identity.task == task, flag, "'", path, "' is a ", identity.task, " checkpoint, not a ", task, " one");
  nlohmann::json settings = identity.training;
  settings.update(identity.model);
  return settings;
}

void record_vocabulary(train::RunIdentity& identity, const std::string& fingerprint, const std::string& resume) {
  if (resume.empty() || train::read_identity(resume).model.contains("vocabulary"))
    identity.model["vocabulary"] = fingerprint;
}

void check_vocabulary(const std::string& fingerprint, const std::string& spm_path, const std::string& checkpoint) {
  const std::string recorded = train::read_identity(checkpoint).model.value("vocabulary", std::string());
  TP_CHECK(recorded.empty() || recorded == fingerprint, "--resume", "'", spm_path, "' is not the vocabulary '",
           checkpoint, "' was trained with (its pieces differ: a SentencePiece model of another run)");
}

std::vector<std::string> vocabulary_paths(const train::TrainOptions& train) {
  std::vector<std::string> paths;
  for (const std::string& checkpoint : {train.save, train.save_best})
    if (!checkpoint.empty() && checkpoint != train.resume) paths.push_back(checkpoint + ".spm");
  return paths;
}

Attentions attentions(const attention::AttentionConfig& train, const std::optional<attention::AttentionConfig>& eval) {
  const Attentions a{train, eval.value_or(train)};
  // A kind of Form::HiddenStates makes a ClusterFormer, whose weights a Transformer lacks.
  const bool clusterformer_train = a.train.kind().form() == attention::Form::HiddenStates;
  const bool clusterformer_eval = a.eval.kind().form() == attention::Form::HiddenStates;
  TP_CHECK(!clusterformer_train || a.eval == a.train, "--eval-attention", "a model trained with ", a.train.to_string(),
           " (a ClusterFormer) can only be evaluated with the same attention, got ", a.eval.to_string());
  TP_CHECK(clusterformer_train || !clusterformer_eval, "--eval-attention", a.eval.name(), " needs a model trained with ",
           "it (a ClusterFormer has weights a Transformer lacks); this model is trained with ", a.train.to_string());
  return a;
}

void check_clustering_weights(double mu, double nu, const std::vector<attention::AttentionConfig>& attentions) {
  const nn::ClusteringLossWeights defaults;
  if (mu == defaults.mu && nu == defaults.nu) return;
  for (const attention::AttentionConfig& config : attentions)
    if (config.kind().form() == attention::Form::HiddenStates) return;
  fail(mu != defaults.mu ? "--mu" : "--nu", "weights a clustering loss, and the attention has none (only ",
       attention::kind_names([](const attention::Kind& k) { return k.form() == attention::Form::HiddenStates; }),
       " has): drop --mu and --nu or train with neural clustering");
}

void check_model_width(int64_t heads, int64_t head_dim) {
  TP_CHECK(heads >= 1 && head_dim <= models::kMaxModelWidth / heads, "--head-dim",
           "the model width --heads x --head-dim must be at most 2^20 = ", models::kMaxModelWidth, ", got ", heads,
           " x ", head_dim);
}

void check_attention_memory(const Attentions& a, int64_t batch, int64_t heads, int64_t length) {
  const double memory = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  const auto check = [&](const char* flag, const attention::AttentionConfig& c) {
    const double bytes = double(batch) * double(heads) * c.kind().score_elements(c, length) * 4;
    TP_CHECK(memory <= 0 || bytes <= memory, flag, c.to_string(), " at --batch ", batch, ", --heads ", heads,
             " and sequences of ", length, " needs at least ", format_bytes(int64_t(std::min(bytes, 0x1p62))),
             " for one layer's attention weights, more than this machine's ", format_bytes(int64_t(memory)),
             " of memory");
  };
  check("--attention", a.train);
  if (!(a.eval == a.train)) check("--eval-attention", a.eval);
}

std::string summary_line(const std::string& headline, const train::Report& r) {
  char tail[160];
  std::snprintf(tail, sizeof tail, "; %.1f s, %.0f %s/s on %s", r.seconds, r.items_per_second, r.unit.c_str(),
                r.device.c_str());
  return headline + ": " + r.metrics_text() + tail;
}

}  // namespace tapestry::app
