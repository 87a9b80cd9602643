#include "ops/elementwise.h"

#include "core/tape_graph.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/cpu_capability.h"
#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/elementwise.h"
#include "ops/dispatch.h"
#include "ops/elementwise_math.h"
#include "ops/loops.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launcher of ops/cuda/elementwise.h) ----

template <class F>
Tensor unary_forward(const char* op, const F& f, const Tensor& x) {
  Tensor y = empty(x.shape(), x.options());
  if (on_cuda(op, x, [&] { cuda::unary_forward(op, f, y, x); })) return y;
  visit_numeric_or_bfloat16(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    cpu_map<T, T>(y, [f](T v) { return T(f.forward(C(v))); }, x);
  });
  return y;
}

template <class F>
Tensor unary_backward(const char* op, const F& f, const Tensor& dy, const Tensor& x, const Tensor& y) {
  Tensor dx = empty(x.shape(), x.options());
  if (on_cuda(op, dy, [&] { cuda::unary_backward(op, f, dx, dy, x, y); })) return dx;
  visit_floating_or_bfloat16(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    cpu_map<T, T, T, T>(dx, [f](T d, T xv, T yv) { return T(f.backward(C(d), C(xv), C(yv))); }, dy, x, y);
  });
  return dx;
}

template <class F>
Tensor binary_forward(const char* op, const F& f, const Tensor& a, const Tensor& b, const Shape& shape) {
  Tensor y = empty(shape, a.options());
  if (on_cuda(op, a, [&] { cuda::binary_forward(op, f, y, a, b); })) return y;
  visit_numeric_or_bfloat16(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    cpu_map<T, T, T>(y, [f](T u, T v) { return T(f.forward(C(u), C(v))); }, a, b);
  });
  return y;
}

// The CPU's where: cpu_map's loop, but a run (along the last dim) whose condition is one value (a
// mask over rows, as masked_fill's padding masks are) is a copy or a fill from one side, where the
// element-by-element loop read three strided operands.
Tensor where_forward(const Tensor& cond, const Tensor& a, const Tensor& b, const Shape& shape) {
  Tensor y = empty(shape, a.options());
  if (on_cuda("where", a, [&] { cuda::where(y, cond, a, b); })) return y;
  visit_all(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* out = y.data<T>();  // fresh, so contiguous: its step along a run is 1
    const bool* c = static_cast<const bool*>(cond.raw_data());
    const T* sides[2] = {static_cast<const T*>(b.raw_data()), static_cast<const T*>(a.raw_data())};
    const std::array<Strides, 4> strides{y.strides(), broadcast_strides(cond, shape), broadcast_strides(a, shape),
                                         broadcast_strides(b, shape)};
    for_each_run(shape, strides, [&](const auto& base, int64_t count, const auto& step) {
      T* dst = out + base[0];
      if (step[1] != 0) {
        for (int64_t j = 0; j < count; ++j)
          dst[j] = c[base[1] + j * step[1]] ? sides[1][base[2] + j * step[2]] : sides[0][base[3] + j * step[3]];
        return;
      }
      const int side = c[base[1]] ? 1 : 0;  // the run's one condition: a where true, b where false
      const T* src = sides[side] + base[3 - side];
      const int64_t at = step[3 - side];
      if (at == 1) std::copy(src, src + count, dst);
      else if (at == 0) std::fill(dst, dst + count, src[0]);
      else for (int64_t j = 0; j < count; ++j) dst[j] = src[j * at];
    });
  });
  return y;
}

enum class Side { A, B };

template <class F>
Tensor binary_backward(const char* op, const F& f, Side side, const Tensor& dy, const Tensor& a,
                       const Tensor& b, const Tensor& y) {
  Tensor grad = empty(y.shape(), y.options());  // the broadcast shape; Gradients sums it down
  if (on_cuda(op, dy, [&] {
        cuda::binary_backward(op, f, side == Side::A ? cuda::Operand::A : cuda::Operand::B, grad, dy, a, b, y);
      }))
    return grad;
  visit_floating_or_bfloat16(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    if (side == Side::A)
      cpu_map<T, T, T, T, T>(
          grad, [f](T d, T u, T v, T w) { return T(f.grad_a(C(d), C(u), C(v), C(w))); }, dy, a, b, y);
    else
      cpu_map<T, T, T, T, T>(
          grad, [f](T d, T u, T v, T w) { return T(f.grad_b(C(d), C(u), C(v), C(w))); }, dy, a, b, y);
  });
  return grad;
}

// ---- ops ----

// A differentiable unary op from its functor (ops/elementwise_math.h).
template <class F>
Tensor unary(const char* op, const Tensor& x, F f = {}) {
  check_floating(op, x);
  Tensor y = unary_forward(op, f, x);
  // Only what the backward reads is saved (math::BackwardReads); the functor ignores its other
  // argument, which gets the same tensor (or dy, of the same shape, when it reads neither).
  constexpr math::BackwardReads reads = F::kBackwardReads;
  Saved saved;
  if constexpr (reads != math::BackwardReads::Neither) saved = Saved(reads == math::BackwardReads::Input ? x : y);
  record(op, {x}, {y}, [op, f, saved](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor& read = reads == math::BackwardReads::Neither ? dy[0] : saved.get();
    g.accumulate(0, unary_backward(op, f, dy[0], read, read));
  });
  return y;
}

enum class Domain { Numeric, Floating };

template <class F>
Tensor binary(const char* op, const Tensor& a_in, const Tensor& b_in, Domain domain, F f = {}) {
  const auto [a, b] = autocast_promote(a_in, b_in);  // ops/autocast.h
  check_same_device(op, {&a, &b});
  check_same_dtype(op, a, b);
  if (domain == Domain::Floating) check_floating(op, a);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), op);
  Tensor y = binary_forward(op, f, a, b, shape);
  // y is saved only where a gradient reads it (pow's db), and an input only where a gradient that
  // will be wanted reads it: x · c for a constant c keeps c alone (da = dy ⊙ b reads no a). Where a
  // tensor is not saved the functor ignores that argument, which gets dy (of y's shape) instead.
  const bool grad_a = a.requires_grad(), grad_b = b.requires_grad();
  const bool keep_a = grad_b || (grad_a && F::kGradAReadsA), keep_b = grad_a || (grad_b && F::kGradBReadsB);
  Saved ys, as, bs;
  if constexpr (F::kBackwardReadsOutput) ys = Saved(y);
  if (keep_a) as = Saved(a);
  if (keep_b) bs = Saved(b);
  record(op, {a, b}, {y}, [op, f, keep_a, keep_b, as, bs, ys](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor& out = F::kBackwardReadsOutput ? ys.get() : dy[0];
    const Tensor& a_or_dy = keep_a ? as.get() : dy[0];
    const Tensor& b_or_dy = keep_b ? bs.get() : dy[0];
    if (g.needs(0)) g.accumulate(0, binary_backward(op, f, Side::A, dy[0], a_or_dy, b_or_dy, out));
    if (g.needs(1)) g.accumulate(1, binary_backward(op, f, Side::B, dy[0], a_or_dy, b_or_dy, out));
  });
  return y;
}

enum class Sign { Plus, Minus };

// a + b and a − b: da = dy, db = ±dy (each summed down to its input's shape by accumulate). They
// need neither their inputs nor their output, so they save none, and dy is passed on uncopied.
template <class F>
Tensor additive(const char* op, const Tensor& a_in, const Tensor& b_in, Sign sign_b) {
  const auto [a, b] = autocast_promote(a_in, b_in);  // ops/autocast.h
  check_same_device(op, {&a, &b});
  check_same_dtype(op, a, b);
  Tensor y = binary_forward(op, F{}, a, b, broadcast_shapes(a.shape(), b.shape(), op));
  record(op, {a, b}, {y}, [sign_b](const std::vector<Tensor>& dy, Gradients& g) {
    if (g.needs(0)) g.accumulate(0, dy[0]);
    if (g.needs(1)) g.accumulate(1, sign_b == Sign::Plus ? dy[0] : neg(dy[0]));
  });
  return y;
}

template <class F>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, F f = {}) {
  check_same_device(op, {&a, &b});
  check_same_dtype(op, a, b);
  Tensor y = empty(broadcast_shapes(a.shape(), b.shape(), op), {DType::Bool, a.device()});
  if (!on_cuda(op, a, [&] { cuda::compare(op, f, y, a, b); })) {
    visit_all(a.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cpu_map<bool, T, T>(y, f, a, b);
    });
  }
  record_cut(op, {a, b}, {y});  // a truth value has no gradient
  return y;
}

Tensor like(const Tensor& t, double value) { return scalar(value, t.options()); }

void check_writable(const char* op, const Tensor& self) {
  TP_CHECK(self.defined(), op, "got an undefined tensor");
  TP_CHECK(!(grad_mode_enabled() && self.requires_grad()), op,
           "in-place change of a tensor of shape ", to_string(self.shape()),
           " that requires grad; in-place ops are not recorded, so run it under NoGradGuard");
  for (int64_t d = 0; d < self.dim(); ++d) {
    TP_CHECK(self.strides()[d] != 0 || self.shape()[d] <= 1, op,
             "cannot write in place into an expanded tensor of shape ", to_string(self.shape()),
             " (several elements share memory); clone() it first");
  }
}

// The source of an in-place op, safe to read while `self` is written: a copy when the two share
// memory, since the loop would otherwise read elements it has already overwritten
// (add_(x, transpose(x)), x[1:] += x[:-1]).
Tensor unaliased(const Tensor& self, const Tensor& src) {
  return &src.storage() == &self.storage() ? clone(src.detach()) : src;
}

void check_broadcasts_to(const char* op, const Tensor& other, const Shape& shape) {
  TP_CHECK(broadcast_shapes(other.shape(), shape, op) == shape, op, "a tensor of shape ",
           to_string(other.shape()), " cannot be broadcast to ", to_string(shape));
}

// ---- float32 ↔ bfloat16: copy_'s conversions, compiled for each CPU capability ----
// Rounding to bfloat16 (core/bfloat16.h) narrows 32 bits to 16, which SSE2 has no instruction for:
// compiled for the x86-64 baseline alone, the loop ran element by element, and a bf16 speech step's
// conversions took 11 % of it (docs/PERFORMANCE.md). Compiled for AVX2 and AVX-512 the same loop
// runs in vector lanes; each element is the constructor's value, the same bits.
template <class Out, class In>
[[gnu::always_inline]] inline void convert(const In* x, Out* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<Out>(x[i]);
}
template <class Out, class In>
void convert_baseline(const In* x, Out* y, int64_t n) {
  convert(x, y, n);
}
#if TP_CPU_DISPATCH
template <class Out, class In>
TP_TARGET_AVX2 void convert_avx2(const In* x, Out* y, int64_t n) {
  convert(x, y, n);
}
template <class Out, class In>
TP_TARGET_AVX512 void convert_avx512(const In* x, Out* y, int64_t n) {
  convert(x, y, n);
}
#endif

// out = in converted (in broadcast to out's shape): runs of unit stride through convert as the
// widest capability in use compiled it, others element by element.
template <class Out, class In>
void convert_runs(const Tensor& out, const Tensor& in) {
  auto kernel = convert_baseline<Out, In>;
#if TP_CPU_DISPATCH
  if (cpu_capability() == CpuCapability::Avx512) kernel = convert_avx512<Out, In>;
  if (cpu_capability() == CpuCapability::Avx2) kernel = convert_avx2<Out, In>;
#endif
  Out* o = static_cast<Out*>(out.raw_data());
  const In* x = static_cast<const In*>(in.raw_data());
  const std::array<Strides, 2> strides{out.strides(), broadcast_strides(in, out.shape())};
  for_each_run(out.shape(), strides, [&](const auto& base, int64_t count, const auto& step) {
    if (step[0] == 1 && step[1] == 1) return kernel(x + base[1], o + base[0], count);
    for (int64_t j = 0; j < count; ++j) o[base[0] + j * step[0]] = static_cast<Out>(x[base[1] + j * step[1]]);
  });
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return additive<math::Add>("add", a, b, Sign::Plus); }
Tensor sub(const Tensor& a, const Tensor& b) { return additive<math::Sub>("sub", a, b, Sign::Minus); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary<math::Mul>("mul", a, b, Domain::Numeric); }
Tensor div(const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autocast_promote(a_in, b_in);  // ops/autocast.h
  // An integer division by zero traps the CPU (SIGFPE): refuse it before the kernel runs.
  check_same_device("div", {&a, &b});
  check_same_dtype("div", a, b);
  if (is_integer(b.dtype())) {
    const std::vector<int64_t> divisor = b.to_vector<int64_t>();
    TP_CHECK(std::find(divisor.begin(), divisor.end(), 0) == divisor.end(), "div",
             "integer division by zero (divisor of shape ", to_string(b.shape()), ", ", b.dtype(), ")");
  }
  return binary<math::Div>("div", a, b, Domain::Numeric);
}
Tensor pow(const Tensor& a, const Tensor& b) { return binary<math::Pow>("pow", a, b, Domain::Floating); }
Tensor pow(const Tensor& x, double exponent) { return unary("pow", x, math::PowScalar{exponent}); }

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, like(a, b)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, like(a, b)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, like(a, b)); }
Tensor operator/(const Tensor& a, double b) { return div(a, like(a, b)); }
Tensor operator+(double a, const Tensor& b) { return add(like(b, a), b); }
Tensor operator-(double a, const Tensor& b) { return sub(like(b, a), b); }
Tensor operator*(double a, const Tensor& b) { return mul(like(b, a), b); }
Tensor operator/(double a, const Tensor& b) { return div(like(b, a), b); }
Tensor operator-(const Tensor& x) { return neg(x); }

Tensor neg(const Tensor& x) {
  return is_floating(x.dtype()) ? unary<math::Neg>("neg", x) : unary_forward("neg", math::Neg{}, x);
}
Tensor abs(const Tensor& x) {
  return is_floating(x.dtype()) ? unary<math::Abs>("abs", x) : unary_forward("abs", math::Abs{}, x);
}
Tensor exp(const Tensor& x) { return unary<math::Exp>("exp", x); }
Tensor log(const Tensor& x) { return unary<math::Log>("log", x); }
Tensor sqrt(const Tensor& x) { return unary<math::Sqrt>("sqrt", x); }
Tensor rsqrt(const Tensor& x) { return unary<math::Rsqrt>("rsqrt", x); }
Tensor tanh(const Tensor& x) { return unary<math::Tanh>("tanh", x); }
Tensor sigmoid(const Tensor& x) { return unary<math::Sigmoid>("sigmoid", x); }
Tensor relu(const Tensor& x) { return unary<math::Relu>("relu", x); }
Tensor gelu(const Tensor& x) { return unary<math::Gelu>("gelu", x); }
Tensor clamp(const Tensor& x, double lo, double hi) {
  TP_CHECK(lo <= hi, "clamp", "needs lo <= hi, got lo=", lo, " hi=", hi);
  return unary("clamp", x, math::Clamp{lo, hi});
}

Tensor log1p(const Tensor& x) { return unary<math::Log1p>("log1p", x); }
Tensor expm1(const Tensor& x) { return unary<math::Expm1>("expm1", x); }
Tensor sin(const Tensor& x) { return unary<math::Sin>("sin", x); }
Tensor cos(const Tensor& x) { return unary<math::Cos>("cos", x); }
Tensor silu(const Tensor& x) { return unary<math::Silu>("silu", x); }
Tensor leaky_relu(const Tensor& x, double negative_slope) {
  TP_CHECK(std::isfinite(negative_slope), "leaky_relu", "needs a finite negative_slope, got ", negative_slope);
  return unary("leaky_relu", x, math::LeakyRelu{negative_slope});
}
Tensor softplus(const Tensor& x, double beta, double threshold) {
  TP_CHECK(beta > 0 && std::isfinite(beta) && std::isfinite(threshold), "softplus",
           "needs a finite beta > 0 and a finite threshold, got beta=", beta, " threshold=", threshold);
  return unary("softplus", x, math::Softplus{beta, threshold});
}

Tensor maximum(const Tensor& a, const Tensor& b) { return binary<math::Maximum>("maximum", a, b, Domain::Numeric); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary<math::Minimum>("minimum", a, b, Domain::Numeric); }

Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  check_same_device("clamp", {&x, &lo, &hi});
  check_same_dtype("clamp", x, lo);
  check_same_dtype("clamp", x, hi);
  check_floating("clamp", x);
  // Refuses bounds that do not broadcast with x, naming clamp rather than maximum / minimum.
  broadcast_shapes(broadcast_shapes(x.shape(), lo.shape(), "clamp"), hi.shape(), "clamp");
  Tensor y;
  {
    NoGradGuard no_grad;
    y = minimum(maximum(x, lo), hi);
  }
  // dx = dy ⊙ [lo ≤ x ≤ hi],  dlo = dy ⊙ [x < lo ∧ lo < hi],  dhi = dy ⊙ [x > hi ∨ hi < lo]
  // (y = min(max(x, lo), hi): where lo > hi every element is hi, PyTorch's rule.)
  record("clamp", {x, lo, hi}, {y},
         [xs = Saved(x), ls = Saved(lo), hs = Saved(hi)](const std::vector<Tensor>& dy, Gradients& g) {
           const Tensor &x = xs.get(), &lo = ls.get(), &hi = hs.get();
           const Tensor zero = zeros({}, dy[0].options());
           if (g.needs(0)) g.accumulate(0, where(logical_and(ge(x, lo), le(x, hi)), dy[0], zero));
           if (g.needs(1)) g.accumulate(1, where(logical_and(lt(x, lo), lt(lo, hi)), dy[0], zero));
           if (g.needs(2)) g.accumulate(2, where(logical_or(gt(x, hi), lt(hi, lo)), dy[0], zero));
         });
  return y;
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare<math::Eq>("eq", a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare<math::Ne>("ne", a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare<math::Lt>("lt", a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare<math::Le>("le", a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare<math::Gt>("gt", a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare<math::Ge>("ge", a, b); }

Tensor logical_and(const Tensor& a, const Tensor& b) {
  TP_CHECK(a.defined() && a.dtype() == DType::Bool, "logical_and", "expected bool tensors, got ", a.defined() ? dtype_name(a.dtype()) : "undefined");
  return compare<math::And>("logical_and", a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  TP_CHECK(a.defined() && a.dtype() == DType::Bool, "logical_or", "expected bool tensors, got ", a.defined() ? dtype_name(a.dtype()) : "undefined");
  return compare<math::Or>("logical_or", a, b);
}
Tensor logical_not(const Tensor& x) {
  TP_CHECK(x.defined() && x.dtype() == DType::Bool, "logical_not", "expected a bool tensor, got ", x.defined() ? dtype_name(x.dtype()) : "undefined");
  return eq(x, zeros({}, x.options()));
}

Tensor where(const Tensor& cond, const Tensor& a_in, const Tensor& b_in) {
  const auto [a, b] = autocast_promote(a_in, b_in);  // ops/autocast.h
  check_same_device("where", {&cond, &a, &b});
  TP_CHECK(cond.dtype() == DType::Bool, "where", "the condition must be bool, got ", cond.dtype(),
           " of shape ", to_string(cond.shape()));
  check_same_dtype("where", a, b);
  const Shape shape = broadcast_shapes(cond.shape(), broadcast_shapes(a.shape(), b.shape(), "where"), "where");
  Tensor y = where_forward(cond, a, b, shape);
  // da = dy ⊙ [cond], db = dy ⊙ [¬cond]   (at the broadcast shape; summed down by accumulate)
  record("where", {cond, a, b}, {y}, [cs = Saved(cond)](const std::vector<Tensor>& dy, Gradients& g) {
    const Tensor zero = zeros({}, dy[0].options());
    if (g.needs(1)) g.accumulate(1, where(cs.get(), dy[0], zero));
    if (g.needs(2)) g.accumulate(2, where(cs.get(), zero, dy[0]));
  });
  return y;
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  TP_CHECK(x.defined() && mask.defined(), "masked_fill", "got an undefined tensor");
  TP_CHECK(mask.dtype() == DType::Bool, "masked_fill", "the mask must be bool, got ", mask.dtype(),
           " of shape ", to_string(mask.shape()));
  check_broadcasts_to("masked_fill", mask, x.shape());
  return where(mask, like(x, value), x);
}

void add_(const Tensor& self, const Tensor& other) {
  check_writable("add_", self);
  check_same_device("add_", {&self, &other});
  check_same_dtype("add_", self, other);
  check_broadcasts_to("add_", other, self.shape());
  const Tensor from = unaliased(self, other);
  if (!on_cuda("add_", self, [&] { cuda::add_(self, from); })) {
    visit_numeric_or_bfloat16(self.dtype(), "add_", [&](auto tag) {
      using T = decltype(tag);
      using C = compute_t<T>;
      cpu_map<T, T, T>(self, [](T u, T v) { return T(C(u) + C(v)); }, self, from);
    });
  }
  self.storage().bump_version();
}

void mul_(const Tensor& self, double factor) {
  check_writable("mul_", self);
  if (!on_cuda("mul_", self, [&] { cuda::mul_(self, factor); })) {
    visit_numeric_or_bfloat16(self.dtype(), "mul_", [&](auto tag) {
      using T = decltype(tag);
      using C = compute_t<T>;
      cpu_map<T, T>(self, [f = static_cast<C>(factor)](T u) { return T(C(u) * f); }, self);
    });
  }
  self.storage().bump_version();
}

void fill_(const Tensor& self, double value) {
  check_writable("fill_", self);
  if (!on_cuda("fill_", self, [&] { cuda::fill_(self, value); })) {
    visit_all(self.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cpu_map<T>(self, [v = static_cast<T>(value)]() { return v; });
    });
  }
  self.storage().bump_version();
}

void copy_(const Tensor& self, const Tensor& src) {
  check_writable("copy_", self);
  TP_CHECK(src.defined(), "copy_", "got an undefined source tensor");
  check_broadcasts_to("copy_", src, self.shape());
  Tensor from = unaliased(self, src);
  if (src.device() != self.device()) {
    // Bring a contiguous copy of src to self's device, then convert/broadcast there.
    const Tensor packed = contiguous(src.detach());
    from = empty(src.shape(), {src.dtype(), self.device()});
    copy_bytes(from.raw_data(), self.device(), packed.raw_data(), src.device(),
               static_cast<size_t>(src.numel()) * element_size(src.dtype()));
  }
  const DType to_dtype = self.dtype(), from_dtype = from.dtype();
  if (!on_cuda("copy_", self, [&] { cuda::copy_(self, from); })) {
    if (to_dtype == DType::BFloat16 && from_dtype == DType::Float32) {
      convert_runs<bfloat16, float>(self, from);
    } else if (to_dtype == DType::Float32 && from_dtype == DType::BFloat16) {
      convert_runs<float, bfloat16>(self, from);
    } else {
      visit_all(to_dtype, [&](auto out_tag) {
        using Out = decltype(out_tag);
        visit_all(from_dtype, [&](auto in_tag) {
          using In = decltype(in_tag);
          cpu_map<Out, In>(self, [](In v) { return static_cast<Out>(v); }, from);
        });
      });
    }
  }
  self.storage().bump_version();
}

}  // namespace tapestry
