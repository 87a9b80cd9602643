/// @file
/// Reformer's LSH attention (Kitaev, Kaiser, Levskaya, "Reformer: The Efficient Transformer", ICLR
/// 2020, "Locality-sensitive hashing attention"), the lsh-X baseline of the clustered-attention
/// paper (§4, Table 1). That paper is not in papers/; the steps below name its subsections.
///
/// Positions are hashed with random rotations, h(x) = argmax([xR; −xR]) for R of shape (E, b/2)
/// drawn N(0, 1) ("Locality sensitive hashing", angular LSH), sorted by bucket (stable: by position
/// within a bucket), and cut into chunks of W; each query attends to the keys of its own bucket
/// (P_i = {j : h(q_i) = h(k_j)}, the others masked by m(j, P_i) = ∞) within its chunk and the
/// previous one, cyclically ("LSH attention"). Several rounds with independent rotations are
/// combined as one softmax over all the rounds' candidates, each key j weighted down by log N_ij,
/// the number of rounds in which i and j share a bucket ("Multi-round LSH attention"), so that a
/// key found in several rounds counts about once. A query never attends to its own position unless
/// nothing else is left ("Causal masking for shared-QK attention").
///
/// Choices where the paper leaves room:
///   - b = ⌈S/W⌉ buckets, rounded up to even (the rotations need b/2 columns), so buckets hold about
///     W positions; one bucket (no hashing at all) when S ≤ W;
///   - padded positions go to a bucket b of their own, after every real one, so that their values
///     cannot move a real position's chunk;
///   - causal form: the sort by bucket puts position i after every earlier position of its bucket,
///     but where a chunk starts depends on the whole sequence, so chunks would let later positions
///     move earlier ones' neighbours. The causal form therefore gives each query the last 2W slots
///     up to its own in the sorted order: with the bucket mask, the (up to) 2W most recent positions
///     j ≤ i of its bucket, which depend on positions ≤ i alone.
///
/// Shared QK: the Reformer's keys are the unit-length query projection. attend() normalises k
/// (unit_rows) and MultiheadAttention projects the keys with q_proj for this type; the function
/// below attends with the k it is given and hashes the positions by k (in a shared-QK layer q_p and
/// k_p point the same way, so queries and keys fall in one bucket).
#pragma once

#include "core/random.h"
#include "nn/attention/common.h"

namespace tapestry::attention {

/// Whether a query may attend to its own position while other keys are left (No) or only when it
/// is alone (Yes, the Reformer's rule).
enum class SelfMask { No, Yes };

/// Reformer settings: hashing rounds and bucket (chunk) size W.
struct ReformerOptions {
  int64_t rounds = 4;   ///< hashing rounds (the paper's lsh-1, lsh-4)
  int64_t bucket = 32;  ///< W, the chunk size (32 in the clustered-attention paper's experiments)
};

/// LSH attention of q (B, H, N, E) over k (B, H, N, E), v (B, H, N, M), the same N positions
/// -> (B, H, N, M); see the top of this file. The rotations are drawn from gen (each call, each
/// round). Differentiable in q, k, v; hashing and sorting pass no gradient. One round with S ≤ W
/// and SelfMask::No is full attention of q over k (causal or not).
Tensor reformer_attention(const Tensor& q, const Tensor& k, const Tensor& v, const ReformerOptions& options,
                          Generator& gen, const Padding& padding = {}, Causal causal = Causal::No,
                          SelfMask self_mask = SelfMask::Yes);

}  // namespace tapestry::attention
