/// @file
/// The CTC recursions, written once for both backends (ops/ctc.cpp, ops/cuda/ctc.cu).
///
/// Shapes: T frames, C classes, S target length of one utterance; its extended label sequence z'
/// (Graves et al. 2006, §4.1) has L = 2S + 1 positions, blank at every even s and the label z_{(s−1)/2}
/// at every odd s. α and β are rows of L log-probabilities per frame.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/macros.h"

namespace tapestry::ctc {

/// −inf as a T.
template <class T>
TP_HOST_DEVICE T minus_infinity() {
  return static_cast<T>(-INFINITY);
}

/// log(e^a + e^b), stable; −inf when both are −inf (where the naive form gives NaN).
template <class T>
TP_HOST_DEVICE T log_add(T a, T b) {
  const T m = a > b ? a : b;
  if (m == minus_infinity<T>()) return m;
  const T d = a > b ? b - a : a - b;  // ≤ 0
  return m + std::log1p(std::exp(d));
}

/// z'_s: blank at even s, the target's label (s − 1) / 2 at odd s.
TP_HOST_DEVICE inline int64_t extended_label(const int64_t* z, int64_t s, int64_t blank) {
  return s % 2 == 1 ? z[s / 2] : blank;
}

/// α_0(s) (eq. 6–7): a path starts on the first blank or on the first label.
template <class T>
TP_HOST_DEVICE T alpha_start(const T* lp0, const int64_t* z, int64_t s, int64_t blank) {
  if (s == 0) return lp0[blank];
  if (s == 1) return lp0[z[0]];
  return minus_infinity<T>();
}

/// ``α_t(s) = y_t^{z'_s} · (α_{t−1}(s) + α_{t−1}(s−1) [+ α_{t−1}(s−2) when z'_s ≠ blank and z'_s ≠ z'_{s−2}])``
/// (eq. 6–8), in log space; prev is α_{t−1}, lp the frame's log-probabilities (C).
template <class T>
TP_HOST_DEVICE T alpha_step(const T* prev, const T* lp, const int64_t* z, int64_t s, int64_t blank) {
  const int64_t k = extended_label(z, s, blank);
  T a = prev[s];
  if (s >= 1) a = log_add(a, prev[s - 1]);
  if (s >= 2 && k != blank && k != extended_label(z, s - 2, blank)) a = log_add(a, prev[s - 2]);
  return lp[k] + a;
}

/// β_{T−1}(s) (eq. 10–11): a path ends on the last blank or on the last label (L = 2S + 1).
template <class T>
TP_HOST_DEVICE T beta_start(const T* lp_last, const int64_t* z, int64_t s, int64_t L, int64_t blank) {
  if (s == L - 1 || s == L - 2) return lp_last[extended_label(z, s, blank)];
  return minus_infinity<T>();
}

/// ``β_t(s) = y_t^{z'_s} · (β_{t+1}(s) + β_{t+1}(s+1) [+ β_{t+1}(s+2) when z'_s ≠ blank and z'_s ≠ z'_{s+2}])``
/// (eq. 10–13), in log space; next is β_{t+1}. Like Graves's, this β includes the frame's own y_t.
template <class T>
TP_HOST_DEVICE T beta_step(const T* next, const T* lp, const int64_t* z, int64_t s, int64_t L, int64_t blank) {
  const int64_t k = extended_label(z, s, blank);
  T b = next[s];
  if (s + 1 < L) b = log_add(b, next[s + 1]);
  if (s + 2 < L && k != blank && k != extended_label(z, s + 2, blank)) b = log_add(b, next[s + 2]);
  return lp[k] + b;
}

/// log p(z|x) from the last frame's α (eq. 8): paths end on the last blank or the last label.
template <class T>
TP_HOST_DEVICE T log_likelihood(const T* alpha_last, int64_t L) {
  return L >= 2 ? log_add(alpha_last[L - 1], alpha_last[L - 2]) : alpha_last[L - 1];
}

/// ∂ℓ/∂(log y_t^k) = −e^{lcab − log y_t^k − log p}, lcab = log Σ_{s: z'_s = k} α_t(s) β_t(s) (eq. 14–16);
/// 0 when k lies on no path through frame t (lcab = −inf).
template <class T>
TP_HOST_DEVICE T ctc_gradient(T dy, T lcab, T lp, T log_p) {
  if (lcab == minus_infinity<T>()) return T(0);
  return -dy * std::exp(lcab - lp - log_p);
}

}  // namespace tapestry::ctc
