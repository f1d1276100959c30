#include "model/linear.h"

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace mt {

namespace {

// The adapter's view of x: x itself, or dropout(x) drawn into the scratch.
Tensor adapter_input(Backend& be, const Tensor& x, const AdapterDropout* drop) {
  if (!drop) return x;
  const Tensor dropped = drop->scratch.flat_slice(0, x.numel()).view(x.rows, x.cols);
  be.dropout(dropped, x, drop->mask, /*accumulate=*/false);
  return dropped;
}

}  // namespace

void bias_forward(Backend& be, const Tensor& y, const LinearWeights& w) {
  if (w.b) be.bias_add(y, w.b);
}

void bias_backward(Backend& be, const Tensor& dy, const LinearWeights& w) {
  if (w.db) be.bias_backward(w.db, dy);
}

void lora_inner(Backend& be, const Tensor& u, const Tensor& x, const LinearWeights& w,
                const AdapterDropout* drop) {
  if (w.A) be.linear_forward(u, adapter_input(be, x, drop), w.A);
}

void lora_outer(Backend& be, const Tensor& y, const Tensor& u, const LinearWeights& w) {
  if (w.A) be.linear_forward(y, u, w.B, w.scale, /*accumulate=*/true);
}

void lora_forward(Backend& be, const Tensor& y, const Tensor& u, const Tensor& x,
                  const LinearWeights& w, const AdapterDropout* drop) {
  lora_inner(be, u, x, w, drop);
  lora_outer(be, y, u, w);
}

void lora_backward(Backend& be, const Tensor& dx, const Tensor& du, const Tensor& dy,
                   const Tensor& x, const Tensor& u, const LinearWeights& w,
                   const AdapterDropout* drop) {
  if (!w.A) return;
  be.linear_backward_input(du, dy, w.B, w.scale, false);           // du = s dy B
  if (w.dB) be.linear_backward_weight(w.dB, dy, u, w.scale);       // dB += s dy^T u
  if (!drop) {
    if (w.dA) be.linear_backward_weight(w.dA, du, x);                // dA += du^T x
    be.linear_backward_input(dx, du, w.A, 1.0f, /*accumulate=*/true);  // dx += du A
    return;
  }
  if (w.dA) be.linear_backward_weight(w.dA, du, adapter_input(be, x, drop));  // dA += du^T dropout(x)
  const Tensor dx_adapter = drop->scratch.flat_slice(0, dx.numel()).view(dx.rows, dx.cols);
  be.linear_backward_input(dx_adapter, du, w.A, 1.0f, /*accumulate=*/false);  // du A
  be.dropout(dx, dx_adapter, drop->mask, /*accumulate=*/true);  // dx += the kept part, scaled
}

void linear_layer_forward(Backend& be, const Tensor& y, const Tensor& u, const Tensor& x,
                          const LinearWeights& w, const AdapterDropout* drop) {
  be.linear_forward(y, x, w.W);
  bias_forward(be, y, w);
  lora_forward(be, y, u, x, w, drop);
}

void linear_base_backward(Backend& be, const Tensor& dx, bool accumulate_dx, const Tensor& dy,
                          const Tensor& x, const LinearWeights& w) {
  be.linear_backward_input(dx, dy, w.W, 1.0f, accumulate_dx);
  if (w.dW) be.linear_backward_weight(w.dW, dy, x);
  bias_backward(be, dy, w);
}

void linear_layer_backward(Backend& be, const Tensor& dx, bool accumulate_dx, const Tensor& du,
                           const Tensor& dy, const Tensor& x, const Tensor& u,
                           const LinearWeights& w, const AdapterDropout* drop) {
  linear_base_backward(be, dx, accumulate_dx, dy, x, w);
  lora_backward(be, dx, du, dy, x, u, w, drop);
}

// ---- adapters batched over projections that share an input

namespace {

constexpr size_t kMaxGroup = 4;  // q, k, v (gate, up): more never share an input

// The group's adapters, in order.
struct Active {
  std::array<size_t, kMaxGroup> idx{};
  size_t n = 0;
};

Active active_adapters(const LoraGroup& g) {
  Active a;
  for (size_t i = 0; i < g.w.size(); ++i)
    if (g.w[i]->A) {
      MT_CHECK(a.n < kMaxGroup, "lora group: too many adapters on one input");
      a.idx[a.n++] = i;
    }
  return a;
}

// The scratch's parts: the f32 rows of dA_cat first (4-byte aligned inside a 2-byte arena), then
// A_cat, then one [N, R] product (u_cat forward, du_cat backward), then the k du's one by one.
struct Staging {
  Tensor da, a, cat, parts;
};

Staging carve(const Tensor& scratch, int64_t N, int64_t R, int64_t in) {
  const size_t E = dtype_size(scratch.dtype);
  char* base = static_cast<char*>(scratch.data);
  const size_t pad = (4 - reinterpret_cast<uintptr_t>(base) % 4) % 4;
  Staging s;
  s.da = Tensor(base + pad, DType::f32, R, in, scratch.device);
  int64_t off = int64_t((pad + size_t(R * in) * 4 + E - 1) / E);
  s.a = scratch.flat_slice(off, R * in).view(R, in), off += R * in;
  s.cat = scratch.flat_slice(off, N * R).view(N, R), off += N * R;
  s.parts = scratch.flat_slice(off, N * R);
  return s;
}

// Whether the tensors t(i) of the active adapters follow one another in memory, one [R, in]
// block (then it is used in place rather than staged).
template <class Get>
bool adjacent(const LoraGroup& g, const Active& act, Get t) {
  for (size_t j = 1; j < act.n; ++j) {
    const Tensor &prev = t(*g.w[act.idx[j - 1]]), &next = t(*g.w[act.idx[j]]);
    if (!prev || !next || next.dtype != prev.dtype ||
        next.data != static_cast<const char*>(prev.data) + prev.bytes())
      return false;
  }
  return true;
}

// A_cat: the A's in place where adjacent, else copied into the staging rows.
Tensor stacked_a(Backend& be, const LoraGroup& g, const Active& act, const Staging& st) {
  const Tensor& A0 = g.w[act.idx[0]]->A;
  const int64_t r = A0.rows, R = r * int64_t(act.n);
  if (adjacent(g, act, [](const LinearWeights& w) -> const Tensor& { return w.A; }))
    return Tensor(A0.data, A0.dtype, R, A0.cols, A0.device);
  for (size_t j = 0; j < act.n; ++j) be.copy(st.a.rows_slice(int64_t(j) * r, r), g.w[act.idx[j]]->A);
  return st.a;
}

}  // namespace

int64_t lora_group_scratch_elems(int64_t N, int64_t in, int64_t rank, int64_t k) {
  if (rank <= 0) return 0;
  const int64_t R = k * rank;
  return 2 * R * in + 2 + R * in + 2 * N * R;  // dA_cat as f32 in 2-byte units, with alignment
}

bool lora_group_batches(const LoraGroup& g, const Tensor& scratch, int64_t N) {
  if (!scratch) return false;
  for (const AdapterDropout* d : g.drop)
    if (d) return false;  // per-module masks: each adapter reads its own input
  const Active act = active_adapters(g);
  if (act.n < 2) return false;
  const Tensor& A0 = g.w[act.idx[0]]->A;
  if (A0.dtype != scratch.dtype) return false;
  for (size_t j = 1; j < act.n; ++j) {
    const Tensor& A = g.w[act.idx[j]]->A;
    if (A.rows != A0.rows || A.cols != A0.cols || A.dtype != A0.dtype) return false;
  }
  return scratch.numel() >= lora_group_scratch_elems(N, A0.cols, A0.rows, int64_t(act.n));
}

void lora_group_forward(Backend& be, std::span<const Tensor> ys, std::span<const Tensor> us,
                        const Tensor& x, const LoraGroup& g, const Tensor& scratch) {
  const Active act = active_adapters(g);
  const int64_t r = g.w[act.idx[0]]->rank(), R = r * int64_t(act.n), N = x.rows;
  const Staging st = carve(scratch, N, R, x.cols);
  be.linear_forward(st.cat, x, stacked_a(be, g, act, st));  // u_cat = x A_cat^T
  std::array<Tensor, kMaxGroup> u;
  for (size_t j = 0; j < act.n; ++j) u[j] = us[act.idx[j]];
  be.split_columns(st.cat, std::span<const Tensor>(u.data(), act.n));
  for (size_t j = 0; j < act.n; ++j) {
    const size_t i = act.idx[j];
    lora_outer(be, ys[i], us[i], *g.w[i]);  // y += s u B^T
  }
}

void lora_group_backward(Backend& be, const Tensor& dx, std::span<const Tensor> dys,
                         const Tensor& x, std::span<const Tensor> us, const LoraGroup& g,
                         const Tensor& scratch) {
  const Active act = active_adapters(g);
  const int64_t r = g.w[act.idx[0]]->rank(), R = r * int64_t(act.n), N = x.rows;
  const Staging st = carve(scratch, N, R, x.cols);
  std::array<Tensor, kMaxGroup> du;
  bool any_da = false, every_da = true;
  for (size_t j = 0; j < act.n; ++j) {
    const LinearWeights& w = *g.w[act.idx[j]];
    const Tensor& dy = dys[act.idx[j]];
    du[j] = st.parts.flat_slice(int64_t(j) * N * r, N * r).view(N, r);
    be.linear_backward_input(du[j], dy, w.B, w.scale, false);                // du = s dy B
    if (w.dB) be.linear_backward_weight(w.dB, dy, us[act.idx[j]], w.scale);  // dB += s dy^T u
    any_da = any_da || bool(w.dA);
    every_da = every_da && bool(w.dA);
  }
  be.concat_columns(st.cat, std::span<const Tensor>(du.data(), act.n));  // du_cat [N, R]
  if (any_da) {
    if (every_da && adjacent(g, act, [](const LinearWeights& w) -> const Tensor& { return w.dA; })) {
      const Tensor& dA0 = g.w[act.idx[0]]->dA;
      be.linear_backward_weight(Tensor(dA0.data, dA0.dtype, R, x.cols, dA0.device), st.cat, x);
    } else {
      be.matmul(st.da, st.cat, true, x, false, 1.0f, false);  // dA_cat = du_cat^T x
      for (size_t j = 0; j < act.n; ++j)
        if (const Tensor& dA = g.w[act.idx[j]]->dA) be.add(dA, st.da.rows_slice(int64_t(j) * r, r));
    }
  }
  // dx += du_cat A_cat: onto the base products' dx, one product for every adapter.
  be.linear_backward_input(dx, st.cat, stacked_a(be, g, act, st), 1.0f, /*accumulate=*/true);
}

}  // namespace mt
