#include "nn/attention/reformer.h"

#include <cmath>
#include <limits>
#include <vector>

#include "nn/attention/full.h"
#include "ops/common.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/sort.h"

namespace tapestry::attention {

namespace {

// Gathers x (B, H, N) at the positions of `where` (B, H, N, L) -> (B, H, N, L).
Tensor gather_positions(const Tensor& x, const Tensor& where) {
  const int64_t B = where.size(0), H = where.size(1), N = where.size(2), L = where.size(3);
  return reshape(gather(x, 2, reshape(where, {B, H, N * L})), {B, H, N, L});
}

// The slots each query's candidates sit in, (B, H, N, L), −1 for none. Non-causal (the chunks): the
// slots of its chunk of W and of the previous chunk, cyclically (the chunk alone when there is one).
// Causal: the 2W slots up to its own.
Tensor candidate_slots(const Tensor& slot, int64_t W, Causal causal) {
  const int64_t B = slot.size(0), H = slot.size(1), N = slot.size(2);
  const Device device = slot.device();
  if (causal == Causal::Yes) {
    const Tensor offsets = reshape(arange(double(1 - 2 * W), 1.0, 1.0, {DType::Int64, device}), {1, 1, 1, 2 * W});
    const Tensor slots = unsqueeze(slot, 3) + offsets;
    return where(ge(slots, scalar(0.0, {DType::Int64, device})), slots, full({}, -1.0, {DType::Int64, device}));
  }
  const int64_t chunks = (N + W - 1) / W, P = chunks * W;
  // Slot numbers laid out in chunks (B, H, chunks, W); slots past N are −1.
  const Tensor numbers = arange(double(P), {DType::Int64, device});
  const Tensor laid = reshape(where(lt(numbers, scalar(double(N), {DType::Int64, device})), numbers,
                                    full({}, -1.0, {DType::Int64, device})),
                              {1, 1, chunks, W});
  const Tensor window = chunks == 1 ? laid : concat({concat({slice(laid, 2, chunks - 1, chunks), slice(laid, 2, 0, chunks - 1)}, 2), laid}, 3);
  const int64_t L = window.size(3);
  // Each slot's window (P, L), then each query's by its slot: the chunk of slot s is s / W.
  const Tensor per_slot = reshape(expand(unsqueeze(window, 3), {1, 1, chunks, W, L}), {P, L});
  return reshape(index_select(per_slot, 0, flatten(slot)), {B, H, N, L});
}

}  // namespace

Tensor reformer_attention(const Tensor& q, const Tensor& k, const Tensor& v, const ReformerOptions& options,
                          Generator& gen, const Padding& padding, Causal causal, SelfMask self_mask) {
  const char* op = "reformer_attention";
  const QkvShape s = check_qkv(op, q, k, v);
  TP_CHECK(s.N == s.S, op, "LSH attention sorts one sequence of positions: it needs as many queries as keys, got N = ",
           s.N, ", S = ", s.S);
  TP_CHECK(options.rounds >= 1, op, "rounds must be at least 1, got ", options.rounds);
  TP_CHECK(options.bucket >= 1, op, "bucket must be at least 1, got ", options.bucket);
  if (padding.query_lengths.defined()) valid_positions(padding.query_lengths, s.B, s.N, q.device(), op);
  const int64_t N = s.N, W = options.bucket;
  const Device device = q.device();
  const Options int64{DType::Int64, device};
  int64_t buckets = (N + W - 1) / W;
  if (buckets > 1 && buckets % 2 == 1) ++buckets;
  const Tensor real = contiguous(expand(reshape(valid_positions(padding.key_lengths, s.B, N, device, op), {s.B, 1, N}),
                                        {s.B, s.H, N}));  // (B, H, N)
  const Tensor position = reshape(arange(N, int64), {1, 1, N, 1});

  std::vector<Tensor> bucket_of, lists, keeps;  // per round: (B, H, N); (B, H, N, L); (B, H, N, L)
  {
    NoGradGuard no_grad;  // hashing and sorting pass no gradient
    for (int64_t r = 0; r < options.rounds; ++r) {
      Tensor bucket = zeros({s.B, s.H, N}, int64);
      if (buckets > 1) {
        // h(x) = argmax([xR; −xR]), R (E, b/2) random: angular LSH.
        const Tensor rotated = matmul(k.detach(), randn({s.E, buckets / 2}, gen, q.options()));
        bucket = argmax(concat({rotated, -rotated}, -1), -1);
      }
      bucket = where(real, bucket, full({}, double(buckets), int64));  // padding: a last bucket of its own
      const Tensor order = argsort(bucket, -1);  // slot -> position, stable
      const Tensor slot = argsort(order, -1);    // position -> slot
      const Tensor slots = candidate_slots(slot, W, causal);
      const Tensor has = ge(slots, scalar(0.0, int64));
      const Tensor where_slot = where(has, slots, zeros({}, int64));
      const Tensor candidate = gather_positions(order, where_slot);  // (B, H, N, L) positions
      // P_i: only keys of the query's own bucket; real keys; causal: j ≤ i.
      Tensor keep = logical_and(logical_and(has, eq(gather_positions(bucket, candidate), unsqueeze(bucket, 3))),
                                gather_positions(real, candidate));
      if (causal == Causal::Yes) keep = logical_and(keep, le(candidate, position));
      bucket_of.push_back(bucket);
      lists.push_back(candidate);
      keeps.push_back(keep);
    }
  }
  const Tensor indices = concat(lists, 3);  // (B, H, N, rounds·L)
  Tensor keep = concat(keeps, 3);
  Tensor shared_rounds = zeros(indices.shape(), q.options());  // N_ij: rounds in which i and j share a bucket
  {
    NoGradGuard no_grad;
    for (const Tensor& bucket : bucket_of)
      shared_rounds = shared_rounds + to(eq(gather_positions(bucket, indices), unsqueeze(bucket, 3)), q.dtype());
    if (self_mask == SelfMask::Yes) {
      // Not to itself unless alone: the own position stays only in a row that keeps nothing else.
      const Tensor self = eq(indices, position);
      const Tensor others = gt(sum(to(logical_and(keep, logical_not(self)), DType::Int64), {-1}, KeepDim::Yes),
                               scalar(0.0, int64));
      keep = logical_and(keep, logical_not(logical_and(self, others)));
    }
  }
  // The rounds' softmaxes combined by their log-sum-exp weights are one softmax over all candidates;
  // −log N_ij counts a key found in several rounds about once.
  const Tensor mask = where(keep, -log(clamp(shared_rounds, 1.0, std::numeric_limits<double>::infinity())),
                            full({}, -std::numeric_limits<double>::infinity(), q.options()));
  return listed_keys_attention(q, k, v, indices, mask);
}

}  // namespace tapestry::attention
