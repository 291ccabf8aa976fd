// Convolutions on PrivateUse1 go through convolution_overrideable / convolution_backward_overrideable.
#include "accounting/accounting.h"
#include "accounting/alias.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <vector>

namespace neuron_sim {

// convolution_overrideable / convolution_backward_overrideable: the backend-specific entry points
// PyTorch uses for PrivateUse1 convolutions; run the CPU convolution on zero-copy aliases.
static at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                           const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                           c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                           c10::IntArrayRef output_padding, int64_t groups) {
  count_explicit(kOpConvolution);
  std::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = as_cpu(*bias);
  auto out = at::convolution(as_cpu(input), as_cpu(weight), b, stride, padding, dilation, transposed,
                             output_padding, groups);
  return wrap_cpu_result(out, input.device().index());
}
static std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  count_explicit(kOpConvolutionBackward);
  std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
  auto res = at::convolution_backward(as_cpu(grad_output), as_cpu(input), as_cpu(weight), bias_sizes, stride,
                                      padding, dilation, transposed, output_padding, groups, output_mask);
  auto d = input.device().index();
  auto w = [d](const at::Tensor& t) { return t.defined() ? wrap_cpu_result(t, d) : t; };
  return {w(std::get<0>(res)), w(std::get<1>(res)), w(std::get<2>(res))};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
}

}  // namespace neuron_sim
