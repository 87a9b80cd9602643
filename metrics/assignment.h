/// @file
/// The linear assignment problem, solved exactly by the Hungarian method (Kuhn–Munkres with row and
/// column potentials, the shortest-augmenting-path form): O(R²·C) for R ≤ C.
///
/// Given a cost matrix of R rows and C columns, choose min(R, C) cells, no two in one row or one
/// column, with the smallest total cost:
///   minimise Σ_r cost(r, σ(r))  over injections σ from rows to columns     (R ≤ C)
/// and the same with rows and columns exchanged when R > C. Clustering accuracy uses it to match
/// clusters to classes one to one (metrics/clustering.h).
#pragma once

#include <cstdint>
#include <vector>

namespace tapestry::metrics {

/// |cost| up to kMaxAssignmentCost keeps every potential and path length exact in int64.
constexpr int64_t kMaxAssignmentCost = int64_t(1) << 40;

/// cost: R × C, row-major (cost[r·C + c]). Returns, for each row, its column, or -1 for the rows
/// left unmatched when R > C. Among several optimal assignments any one may be returned. Throws when
/// cost.size() ≠ R·C or an entry's magnitude exceeds kMaxAssignmentCost; R = 0 or C = 0 gives every
/// row -1.
std::vector<int64_t> min_cost_assignment(const std::vector<int64_t>& cost, int64_t rows, int64_t cols);

}  // namespace tapestry::metrics
