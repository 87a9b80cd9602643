#include "data/copy_task.h"

#include "ops/creation.h"

namespace tapestry::data {

CopyTaskBatch CopyTask::sample(int64_t batch, Generator& gen) const {
  TP_CHECK(length >= 1, "copy task", "the word length L must be at least 1, got ", length);
  TP_CHECK(batch >= 1, "copy task", "the batch must be at least 1, got ", batch);
  TP_CHECK(mask_fraction >= 0 && mask_fraction <= 0.5, "copy task",
           "the mask fraction must be in [0, 0.5], got ", mask_fraction);
  const int64_t L = length, N = sequence_length();
  const std::vector<int64_t> words = randint(1, kSymbols + 1, {batch, L}, gen).to_vector<int64_t>();
  const std::vector<double> draws = rand({batch, L}, gen, {DType::Float64}).to_vector<double>();
  std::vector<int64_t> input(batch * N), target(batch * N);
  std::vector<bool> masked(batch * N, false);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t* t = target.data() + b * N;
    t[0] = t[L + 1] = kSeparator;
    for (int64_t i = 0; i < L; ++i) t[1 + i] = t[L + 2 + i] = words[b * L + i];
    // Position i of the word is hidden in at most one copy: in the first when u < f, in the
    // second when f ≤ u < 2f; so each copy loses a fraction f and every symbol stays visible.
    for (int64_t i = 0; i < L; ++i) {
      const double u = draws[b * L + i];
      if (u < mask_fraction) masked[b * N + 1 + i] = true;
      else if (u < 2 * mask_fraction) masked[b * N + L + 2 + i] = true;
    }
    for (int64_t n = 0; n < N; ++n) input[b * N + n] = masked[b * N + n] ? kMask : t[n];
  }
  return {from_vector(input, {batch, N}), from_vector(target, {batch, N}), from_vector(masked, {batch, N})};
}

}  // namespace tapestry::data
