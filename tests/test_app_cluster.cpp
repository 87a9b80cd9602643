// `tapestry cluster` (apps/cluster.h), the K-means and SOM baselines (models/kmeans.h,
// models/som.h) and the clustering of the neural clustering attention on its own
// (nn/attention/neural_clustering.h): it learns real digits, it agrees with the attention's clustering, and it refuses bad input with a clear message.

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "apps/cluster.h"
#include "data/datasets.h"
#include "models/kmeans.h"
#include "models/som.h"
#include "nn/attention/neural_clustering.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using app::ClusterOptions;

namespace {

bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && *ci && std::string(ci) != "false" && std::string(ci) != "0";
}

// Whether MNIST is prepared; otherwise the test fails in CI and says it skipped elsewhere.
bool mnist_prepared() {
  if (data::dataset_prepared("mnist")) return true;
  if (in_ci()) FAIL_CHECK("data set 'mnist' is not prepared in " << data::data_directory() << "; CI runs `make data` first");
  else MESSAGE("cluster: skipped a test on mnist: not prepared (`make data` prepares it)");
  return false;
}

ClusterOptions smoke(const std::string& method, int64_t clusters) {
  ClusterOptions o = app::cluster_preset(app::ClusterPreset::Smoke);
  o.method = method;
  o.clusters = clusters;
  o.train.progress = false;
  return o;
}

// Three well separated blobs of 20 points in the plane, around (0, 0), (10, 0) and (0, 10).
Tensor blobs(std::vector<int64_t>& truth) {
  std::vector<float> x;
  Generator gen(5);
  const std::vector<float> noise = randn({60, 2}, gen).to_vector<float>();
  const float centers[3][2] = {{0, 0}, {10, 0}, {0, 10}};
  for (int64_t j = 0; j < 60; ++j) {
    truth.push_back(j % 3);
    for (int t = 0; t < 2; ++t) x.push_back(centers[j % 3][t] + noise[size_t(2 * j + t)]);
  }
  return from_vector(x, {60, 2});
}

void write_bytes(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// An IDX file of `n` 2 x 2 images (ramp pixels) and one of their labels (j % 2).
void write_idx_pair(const std::string& images, const std::string& labels, int n) {
  std::vector<unsigned char> img{0, 0, 8, 3, 0, 0, 0, static_cast<unsigned char>(n), 0, 0, 0, 2, 0, 0, 0, 2};
  std::vector<unsigned char> lab{0, 0, 8, 1, 0, 0, 0, static_cast<unsigned char>(n)};
  for (int j = 0; j < n; ++j) {
    for (int t = 0; t < 4; ++t) img.push_back(static_cast<unsigned char>((j % 2 ? 200 : 10) + t));
    lab.push_back(static_cast<unsigned char>(j % 2));
  }
  write_bytes(images, img);
  write_bytes(labels, lab);
}

// The smoke options of `method` with k = 2 on a pair of IDX files of 6 images written in dir
// (write_idx_pair), all of them clustered.
ClusterOptions on_idx_pair(const TempDir& dir, const std::string& method) {
  ClusterOptions o = smoke(method, 2);
  o.images = dir.file("images.idx");
  o.labels = dir.file("labels.idx");
  o.max_points = 0;
  write_idx_pair(o.images, o.labels, 6);
  return o;
}

struct CliRun {
  int code = -1;
  std::string out, err;
};

CliRun run_cli(const TempDir& dir, const std::string& args) {
  const auto [code, out, err] = run_shell(dir, std::string(TAPESTRY_CLI) + " " + args);
  return {code, out, err};
}

}  // namespace

TEST_CASE("cluster: neural clustering, K-means and the SOM group 2000 real MNIST digits far above chance") {
  if (!mnist_prepared()) return;
  // Chance is about 0.11 (the most frequent digit's share); every method reaches about 0.5 at k = 10.
  for (const char* method : {"neural", "kmeans", "som"}) {
    INFO(method);
    const train::Report r = app::run_cluster(smoke(method, 10));
    CHECK(r.fields.at("points") == 2000);
    CHECK(r.metric("majority_accuracy") > 0.4);
    CHECK(r.metric("nmi") > 0.3);
    CHECK(r.metric("clusters_used") >= 8);
  }
}

TEST_CASE("cluster: the neural method with a learned W_C and each loss form; W_C is checkpointed") {
  TempDir dir;
  ClusterOptions o = on_idx_pair(dir, "neural");
  o.batch = 6;
  o.train.steps = 3;
  o.w_c = "learned";
  for (const char* losses : {"projected", "printed", "cosine"}) {
    INFO(losses);
    o.losses = losses;
    o.train.save = dir.file(std::string(losses) + ".ckpt");
    const train::Report r = app::run_cluster(o);
    CHECK(r.fields.at("w_c") == "learned");
    CHECK(r.fields.at("losses") == losses);
    CHECK(std::isfinite(r.metric("clustering_loss")));
    const Checkpoint c = load_checkpoint(o.train.save);
    REQUIRE(c.tensors.count("model.w_c") == 1);
    CHECK(c.tensors.at("model.w_c").shape() == Shape{4, 4});
    // Three Adam steps moved W_C off the identity it starts from.
    CHECK(sum(abs(c.tensors.at("model.w_c") - from_vector<float>({1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1},
                                                                   {4, 4})))
              .item<double>() > 0);
  }
  o.train.save.clear();
  o.w_c = "identity";
  CHECK(app::run_cluster(o).parameters == 2 * 4);  // the centroids only
  o.w_c = "random";
  check_error([&] { app::check_cluster_options(o); }, {"--w-c", "identity | learned", "'random'"});
  o.w_c = "learned";
  o.losses = "l2";
  check_error([&] { app::check_cluster_options(o); }, {"--losses", "projected | printed | cosine", "'l2'"});
}

TEST_CASE("cluster: k-means recovers three separated blobs, and refuses bad input") {
  std::vector<int64_t> truth;
  const Tensor x = blobs(truth);
  Generator gen(1);
  const models::KMeansResult r = models::kmeans(x, 3, 100, gen);
  CHECK(r.converged);
  const metrics::ContingencyTable table(r.assignment, truth);
  CHECK(metrics::matched_accuracy(table) == 1.0);
  // Each centroid is the mean of its points: about one unit of noise per point remains.
  CHECK(r.inertia < 60 * 4.0);
  check_error([&] { models::kmeans(x, 61, 10, gen); }, {"kmeans", "[1, N = 60]", "61"});
  check_error([&] { models::kmeans(x, 0, 10, gen); }, {"kmeans", "got 0"});
  check_error([&] { models::kmeans(reshape(x, {120}), 2, 10, gen); }, {"kmeans", "(N, D)", "(120,)"});
  check_error([&] { models::kmeans(to(x, DType::Int64), 2, 10, gen); }, {"kmeans", "int64"});
}

TEST_CASE("neural_clustering: the attention's clustering, alone; W_C undefined is the identity") {
  const Tensor x = uniform({2, 6, 3}, 1), centroids = uniform({4, 3}, 2), w_c = uniform({3, 3}, 3);
  const Tensor lengths = from_vector<int64_t>({6, 4}, {2});
  const attention::NeuralClusteringWeights w{w_c, uniform({3, 4}, 4), uniform({3, 4}, 5), uniform({3, 4}, 6),
                                             uniform({4, 3}, 7)};
  using attention::ClusteringLosses;
  for (ClusteringLosses losses : {ClusteringLosses::Projected, ClusteringLosses::Printed, ClusteringLosses::Cosine}) {
    INFO("losses=" << attention::losses_name(losses));
    const attention::NeuralClusteringResult a =
        attention::neural_clustering_attention(x, centroids, w, 2, lengths, attention::Causal::No, losses);
    const attention::NeuralClustering c = attention::neural_clustering(x, centroids, w_c, lengths, losses);
    check_close(c.centroids, a.centroids, 0, 0);
    CHECK(c.assignment.to_vector<int64_t>() == a.assignment.to_vector<int64_t>());
    check_close(c.clustering_loss, a.clustering_loss, 0, 0);
    check_close(c.sorting_loss, a.sorting_loss, 0, 0);
  }
  const ClusteringLosses losses = ClusteringLosses::Projected;
  const Tensor eye = from_vector<double>({1, 0, 0, 0, 1, 0, 0, 0, 1}, {3, 3});
  const attention::NeuralClustering by_eye = attention::neural_clustering(x, centroids, eye, lengths, losses);
  const attention::NeuralClustering by_none = attention::neural_clustering(x, centroids, Tensor(), lengths, losses);
  check_close(by_eye.u, by_none.u, 1e-15, 1e-12);
  check_close(by_eye.clustering_loss, by_none.clustering_loss, 1e-15, 1e-12);
  // L1 in x and the centroids, with W_C the identity (x's and C's rows keep every U column's argmax).
  check_gradients(
      [&](const std::vector<Tensor>& in) {
        return attention::neural_clustering(in[0], in[1], Tensor(), lengths, losses).clustering_loss;
      },
      {x, centroids});
  check_error([&] { attention::neural_clustering(x, centroids, uniform({2, 3}, 8), lengths, losses); },
              {"neural_clustering", "w_c", "(3, 3)", "(2, 3)"});
  check_error([&] { attention::neural_clustering(x, uniform({4, 2}, 9), Tensor(), lengths, losses); },
              {"neural_clustering", "centroids", "(4, 2)"});
}

TEST_CASE("cluster: bad input is refused with a message naming the file or the flag") {
  TempDir dir;
  ClusterOptions o = on_idx_pair(dir, "kmeans");
  const std::string images = o.images;
  SUBCASE("a tiny IDX pair clusters perfectly") {
    const train::Report r = app::run_cluster(o);
    CHECK(r.metric("majority_accuracy") == 1.0);
  }
  SUBCASE("more clusters than points") {
    o.clusters = 7;
    check_error([&] { app::run_cluster(o); }, {"--clusters", "k = 7", "6 points"});
  }
  SUBCASE("a missing file") {
    o.images = dir.file("absent.idx");
    check_error([&] { app::run_cluster(o); }, {"idx", "absent.idx"});
  }
  SUBCASE("a corrupt IDX file") {
    write_bytes(images, {0, 0, 8, 3, 0, 0, 0, 6, 0, 0, 0, 2, 0, 0, 0, 2, 1, 2, 3});  // 3 of 24 pixels
    check_error([&] { app::run_cluster(o); }, {"idx", "images.idx"});
  }
  SUBCASE("not gzip, not IDX") {
    write_bytes(images, {0x1f, 0x8b, 8, 0, 1, 2, 3});
    check_error([&] { app::run_cluster(o); }, {"idx", "images.idx"});
  }
  SUBCASE("images without labels") {
    o.labels.clear();
    check_error([&] { app::check_cluster_options(o); }, {"--images", "--labels"});
  }
  SUBCASE("--data beside --images") {  // the images replace the data set: refused, not ignored
    o.data = "fashion-mnist";
    check_error([&] { app::check_cluster_options(o); }, {"--data", "--images"});
  }
  SUBCASE("k-means writes no checkpoint") {
    o.train.save = dir.file("model.ckpt");
    check_error([&] { app::check_cluster_options(o); }, {"--method", "--save"});
  }
}

TEST_CASE("som: an ordered map whose units settle on three separated blobs; bad input is refused") {
  std::vector<int64_t> truth;
  const Tensor x = blobs(truth);
  Generator gen(1);
  models::SomOptions o;
  o.units = 3;
  o.epochs = 20;
  const models::SomResult r = models::som(x, o, gen);
  CHECK(r.rows == 1);
  CHECK(r.cols == 3);
  const metrics::ContingencyTable table(r.assignment, truth);
  CHECK(metrics::matched_accuracy(table) == 1.0);
  // The last updates (σ_T = 0.1) are Lloyd's: each unit ends at its blob's mean, as K-means'
  // centroids do. With σ_T = 0.5 a unit keeps weight exp(-2) on its lattice neighbours' points and
  // sits off its blob's mean: the error grows, the clusters stay.
  const models::KMeansResult k = models::kmeans(x, 3, 100, gen);
  CHECK(r.quantization_error == doctest::Approx(k.inertia).epsilon(1e-4));
  o.final_sigma = 0.5;
  const models::SomResult smooth = models::som(x, o, gen);
  CHECK(smooth.quantization_error > k.inertia * 1.1);
  CHECK(metrics::matched_accuracy(metrics::ContingencyTable(smooth.assignment, truth)) == 1.0);
  o.final_sigma = 0.1;
  // The lattice of 12 units is 3 x 4; of 7 (prime) 1 x 7.
  o.units = 12;
  CHECK(models::som(x, o, gen).rows == 3);
  o.units = 7;
  CHECK(models::som(x, o, gen).cols == 7);

  o.units = 61;
  check_error([&] { models::som(x, o, gen); }, {"som", "[1, N = 60]", "61"});
  o.units = 3;
  o.epochs = 0;
  check_error([&] { models::som(x, o, gen); }, {"som", "epochs", "got 0"});
  o.epochs = 5;
  o.final_sigma = 0;
  check_error([&] { models::som(x, o, gen); }, {"som", "final_sigma"});
  o.final_sigma = 0.5;
  check_error([&] { models::som(reshape(x, {120}), o, gen); }, {"som", "(N, D)", "(120,)"});
  check_error([&] { models::som(to(x, DType::Int64), o, gen); }, {"som", "int64"});
}

TEST_CASE("cluster: the command line's --help, --json and usage errors") {
  TempDir dir;
  const CliRun help = run_cli(dir, "cluster --help");
  CHECK(help.code == 0);
  CHECK(help.out.find("--clusters") != std::string::npos);
  CHECK(help.out.find("--method") != std::string::npos);
  const CliRun zero = run_cli(dir, "cluster --clusters 0");
  CHECK(zero.code == 2);
  CHECK(zero.err.find("--clusters") != std::string::npos);
  const CliRun method = run_cli(dir, "cluster --method spectral");
  CHECK(method.code == 2);
  CHECK(method.err.find("neural | kmeans | som") != std::string::npos);
  const std::string images = dir.file("images.idx"), labels = dir.file("labels.idx");
  write_idx_pair(images, labels, 6);
  const CliRun json =
      run_cli(dir, "cluster --preset smoke --method kmeans --clusters 2 --images " + images + " --labels " + labels + " --json");
  INFO(json.err);
  REQUIRE(json.code == 0);
  const nlohmann::json report = nlohmann::json::parse(json.out);
  CHECK(report.at("majority_accuracy") == 1.0);
  CHECK(report.at("method") == "kmeans");
  const CliRun missing = run_cli(dir, "cluster --images " + dir.file("absent") + " --labels " + labels);
  CHECK(missing.code == 1);
  CHECK(missing.err.find("absent") != std::string::npos);

  // K-means and the SOM write their result to --log, as a training run does.
  for (const std::string method : {"kmeans", "som"}) {
    CAPTURE(method);
    const std::string log = dir.file(method + ".jsonl");
    const CliRun logged = run_cli(dir, "cluster --preset smoke --method " + method + " --clusters 2 --images " + images +
                                           " --labels " + labels + " --log " + log);
    CHECK(logged.code == 0);
    const std::vector<nlohmann::json> final = log_records(log, "final");
    REQUIRE(final.size() == 1);
    CHECK(final[0].at("method") == method);
    CHECK(final[0].contains("nmi"));
  }
  // Flags the chosen method or data would leave unused are refused, naming the flag; so is a
  // learning rate below the schedule's floor, before anything runs.
  const std::string data = " --images " + images + " --labels " + labels;
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"--method kmeans --inspect-every 1 --log " + dir.file("c.jsonl") + data, "--inspect-every"},
           {"--method kmeans --steps 50" + data, "--steps"},
           {"--method som --kmeans-iterations 3" + data, "--kmeans-iterations"},
           {"--method neural --som-epochs 3" + data, "--som-epochs"},
           {"--data mnist" + data, "--data"},
           {"--optimizer adam:lr=0" + data, "--schedule"},
           {"--scale ''" + data, "--scale"}}) {
    CAPTURE(args);
    const CliRun refused = run_cli(dir, "cluster " + args);
    CHECK(refused.code == 2);
    CHECK(refused.err.find(flag) != std::string::npos);
  }
}
