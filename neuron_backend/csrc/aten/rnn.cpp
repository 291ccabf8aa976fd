// Fused RNN cells (CUDA-only kernels upstream, used by LSTM/GRU on PrivateUse1 devices).
#include "aten/composite.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace neuron_sim {

// Every result contiguous: PyTorch's meta kernels declare them so (torch/_meta_registrations.py
// _thnn_fused_lstm_cell: empty_like(..., contiguous_format)), and a compiled graph reads them with those
// strides; the elementwise ops below would follow a transposed input's layout instead (issue 39).
static at::Tensor dense(const at::Tensor& t) { return t.defined() ? t.contiguous() : t; }

// Fused RNN cells: PyTorch's LSTM/GRU use these on PrivateUse1 devices (CUDA-only kernels upstream).
// Composed from ATen ops on the neuron tensors, which go through the accounting fallback.
static std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = input_gates + hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) gates = gates + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) gates = gates + *hidden_bias;
  auto ch = gates.chunk(4, 1);
  at::Tensor i = ch[0].sigmoid(), f = ch[1].sigmoid(), g = ch[2].tanh(), o = ch[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {dense(hy), dense(cy), at::cat({i, f, g, o}, 1)};
}
static std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward_impl(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  auto ch = workspace.chunk(4, 1);
  const at::Tensor &i = ch[0], &f = ch[1], &g = ch[2], &o = ch[3];
  at::Tensor tcy = cy.tanh();
  at::Tensor gh = grad_hy.has_value() && grad_hy->defined() ? *grad_hy : at::zeros_like(cy);
  at::Tensor gcx = gh * o * (1 - tcy * tcy);
  if (grad_cy.has_value() && grad_cy->defined()) gcx = gcx + *grad_cy;
  at::Tensor go = gh * tcy * o * (1 - o);
  at::Tensor gi = gcx * g * i * (1 - i);
  at::Tensor gf = gcx * cx * f * (1 - f);
  at::Tensor gg = gcx * i * (1 - g * g);
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, dense(gcx * f), grad_bias};
}
static std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates,
                                                        const at::Tensor& hidden_gates, const at::Tensor& hx,
                                                        const std::optional<at::Tensor>& input_bias,
                                                        const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor ig = input_gates, hg = hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) ig = ig + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) hg = hg + *hidden_bias;
  auto ic = ig.chunk(3, 1);
  auto hc = hg.chunk(3, 1);
  at::Tensor r = (ic[0] + hc[0]).sigmoid(), z = (ic[1] + hc[1]).sigmoid();
  at::Tensor n = (ic[2] + r * hc[2]).tanh();
  at::Tensor hy = (hx - n) * z + n;
  return {dense(hy), at::cat({r, z, n, hx, hc[2]}, 1)};
}
static std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward_impl(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  at::Tensor gn = grad_hy * (1 - z) * (1 - n * n);
  at::Tensor gz = grad_hy * (hx - n) * z * (1 - z);
  at::Tensor gr = gn * hn * r * (1 - r);
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  at::Tensor gib = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor ghb = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, dense(grad_hy * z), gib, ghb};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  impl_composite(m, "_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  impl_composite(m, "_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward_impl));
  impl_composite(m, "_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  impl_composite(m, "_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward_impl));
}

}  // namespace neuron_sim
