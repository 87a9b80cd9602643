#include "metrics/assignment.h"

#include <cstdlib>
#include <limits>

#include "core/error.h"

namespace tapestry::metrics {
namespace {

// The Hungarian method for R ≤ C. Rows are added one at a time; each addition grows a tree of
// alternating paths from the new row by Dijkstra over reduced costs a(r, c) − u_r − v_c ≥ 0, then
// flips the cheapest augmenting path. Index 0 is a virtual column that holds the row being added.
// match[c] is the row matched to column c (1-based; 0 for none).
std::vector<int64_t> hungarian(const std::vector<int64_t>& a, size_t rows, size_t cols) {
  const int64_t inf = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> u(rows + 1, 0), v(cols + 1, 0);
  std::vector<size_t> match(cols + 1, 0), way(cols + 1, 0);
  for (size_t r = 1; r <= rows; ++r) {
    match[0] = r;
    size_t col = 0;
    std::vector<int64_t> reach(cols + 1, inf);  // cheapest reduced path length to each column
    std::vector<bool> used(cols + 1, false);
    do {
      used[col] = true;
      const size_t row = match[col];
      int64_t delta = inf;
      size_t next = 0;
      for (size_t c = 1; c <= cols; ++c) {
        if (used[c]) continue;
        const int64_t reduced = a[(row - 1) * cols + (c - 1)] - u[row] - v[c];
        if (reduced < reach[c]) reach[c] = reduced, way[c] = col;
        if (reach[c] < delta) delta = reach[c], next = c;
      }
      // Shift the potentials so that the tree's edges stay tight and `next` joins it.
      for (size_t c = 0; c <= cols; ++c) {
        if (used[c]) u[match[c]] += delta, v[c] -= delta;
        else reach[c] -= delta;
      }
      col = next;
    } while (match[col] != 0);
    do {  // flip the augmenting path back to the virtual column
      const size_t previous = way[col];
      match[col] = match[previous];
      col = previous;
    } while (col != 0);
  }
  std::vector<int64_t> column_of(rows, -1);
  for (size_t c = 1; c <= cols; ++c)
    if (match[c] != 0) column_of[match[c] - 1] = int64_t(c - 1);
  return column_of;
}

}  // namespace

std::vector<int64_t> min_cost_assignment(const std::vector<int64_t>& cost, int64_t rows, int64_t cols) {
  TP_CHECK(rows >= 0 && cols >= 0 && cost.size() == size_t(rows) * size_t(cols), "min_cost_assignment",
           "expected a ", rows, " × ", cols, " cost matrix, got ", cost.size(), " entries");
  for (int64_t x : cost)
    TP_CHECK(x >= -kMaxAssignmentCost && x <= kMaxAssignmentCost, "min_cost_assignment", "cost ", x,
             " exceeds the supported magnitude ", kMaxAssignmentCost);
  if (rows == 0 || cols == 0) return std::vector<int64_t>(size_t(rows), -1);
  if (rows <= cols) return hungarian(cost, size_t(rows), size_t(cols));

  // More rows than columns: assign columns to rows on the transpose, then invert.
  std::vector<int64_t> transposed(cost.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) transposed[size_t(c * rows + r)] = cost[size_t(r * cols + c)];
  const std::vector<int64_t> row_of = hungarian(transposed, size_t(cols), size_t(rows));
  std::vector<int64_t> column_of(size_t(rows), -1);
  for (int64_t c = 0; c < cols; ++c) column_of[size_t(row_of[size_t(c)])] = c;
  return column_of;
}

}  // namespace tapestry::metrics
