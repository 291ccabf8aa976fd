// Convolutions on PrivateUse1 go through convolution_overrideable / convolution_backward_overrideable.
// They run through the accounting fallback with a runner (like SDPA): each call is counted per signature
// (its shapes feed the cost model and the NEFF count), the CPU convolution runs on zero-copy aliases.
//
// Results are contiguous, whatever the input's layout: that is what PyTorch's fake kernel declares for a
// PrivateUse1 convolution (torch/_subclasses/fake_impls.py conv: ConvBackend::Overrideable, and
// _determine_backend_memory_format gives channels_last to XPU tensors only), and a compiled graph reads
// every intermediate with its traced strides. The CPU kernel would return channels_last for a
// channels_last input: a saved activation and its gradient then disagree with the graph's metadata, the
// backward skips a `.contiguous()` the trace found unnecessary, and a CPU kernel that requires equal
// layouts (native_group_norm_backward) reads the gradient with the wrong strides (issue 39).
#include "accounting/accounting.h"
#include "accounting/alias.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <torch/library.h>

#include <array>
#include <tuple>
#include <vector>

namespace neuron_sim {

// convolution_overrideable(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
static void convolution_runner(torch::jit::Stack* s) {
  count_explicit(kOpConvolution);
  auto a = torch::jit::last(*s, 9);
  std::optional<at::Tensor> bias;
  if (a[2].isTensor() && a[2].toTensor().defined()) bias = a[2].toTensor();
  auto out = at::convolution(a[0].toTensor(), a[1].toTensor(), bias, a[3].toIntVector(), a[4].toIntVector(),
                             a[5].toIntVector(), a[6].toBool(), a[7].toIntVector(), a[8].toInt());
  torch::jit::drop(*s, 9);
  torch::jit::push(*s, out.contiguous());
}

// convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed,
// output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias)
static void convolution_backward_runner(torch::jit::Stack* s) {
  count_explicit(kOpConvolutionBackward);
  auto a = torch::jit::last(*s, 10);
  const at::Tensor weight = a[2].toTensor();
  const bool transposed = a[6].toBool();
  const int64_t groups = a[8].toInt();
  auto mask_list = a[9].toBoolList();
  std::array<bool, 3> mask{mask_list.get(0), mask_list.get(1), mask_list.get(2)};
  std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
  auto res = at::convolution_backward(a[0].toTensor(), a[1].toTensor(), weight, bias_sizes, a[3].toIntVector(),
                                      a[4].toIntVector(), a[5].toIntVector(), transposed, a[7].toIntVector(), groups,
                                      mask);
  torch::jit::drop(*s, 10);
  // grad_input and grad_weight in the fake kernel's layout (contiguous, like the forward); grad_bias is 1-D
  auto dense = [](const at::Tensor& t) { return t.defined() ? t.contiguous() : t; };
  torch::jit::push(*s, dense(std::get<0>(res)), dense(std::get<1>(res)), std::get<2>(res));
}

static void convolution_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  neuron_fallback_with_runner(op, stack, &convolution_runner);
}
static void convolution_backward_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  neuron_fallback_with_runner(op, stack, &convolution_backward_runner);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", torch::CppFunction::makeFromBoxedFunction<&convolution_boxed>());
  m.impl("convolution_backward_overrideable", torch::CppFunction::makeFromBoxedFunction<&convolution_backward_boxed>());
}

}  // namespace neuron_sim
