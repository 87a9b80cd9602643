// CUDA launchers of fused attention (ops/cuda/attention.cu). Plain C++: ops/attention.cpp checks the
// arguments, makes every tensor contiguous and calls these for tensors on a GPU.
//
// Shapes: q (G, N, E), k (G, S, E), v (G, S, M), out and dout (G, N, M), lse (G, N), with G = B · H
// and the H heads of sample b at g = b · H … b · H + H − 1; float32 or float64, one dtype; E, M ≤
// kFusedAttentionMaxHeadDim (ops/attention.h). key_lengths is (B,) int64 on the device, or undefined
// (no key padding); key_ends (B, N) int64 on the device, or undefined. Query i of head g sees key j
// when j < key_ends[g / H, i] where key_ends is defined; otherwise when j < key_lengths[g / H] (if
// defined) and, with causal (N = S), j ≤ i.
#pragma once

#include "core/tensor.h"

namespace tapestry::cuda {

struct FusedAttentionShape {
  int64_t B = 0, H = 0, N = 0, S = 0, E = 0, M = 0;
  bool causal = false;
  double scale = 1.0;  // the scores are scale · q_i · k_j (1/√E)
};

// out_i = Σ_j p_ij v_j with p_ij = e^(s_ij − lse_i) over the keys query i sees, s_ij = scale · q_i · k_j,
// lse_i = log Σ_j e^(s_ij) (computed with a running maximum). A query that sees no key: out_i = 0,
// lse_i = −inf. Writes every element of out and lse.
void fused_attention_forward(const FusedAttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& key_lengths, const Tensor& key_ends, const Tensor& out, const Tensor& lse);

// From the forward's out and lse and the output gradients dout and dlse (undefined: lse is no output,
// dlse = 0), with D_i = Σ_m dout_im · out_im − dlse_i and dp_ij = dout_i · v_j, ds_ij = p_ij (dp_ij − D_i):
//   dq_i = scale Σ_j ds_ij k_j,   dk_j = scale Σ_i ds_ij q_i,   dv_j = Σ_i p_ij dout_i.
// Writes every element of dq, dk and dv (zeros where nothing reaches them).
void fused_attention_backward(const FusedAttentionShape& s, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& key_lengths, const Tensor& key_ends, const Tensor& out, const Tensor& lse,
                              const Tensor& dout, const Tensor& dlse, const Tensor& dq, const Tensor& dk,
                              const Tensor& dv);

}  // namespace tapestry::cuda
