// pixel_shuffle on PrivateUse1: the CPU kernel on zero-copy aliases (counted by the accounting fallback
// like any op), with a contiguous result. PyTorch's meta kernel keeps a channels_last layout on the CPU
// only (torch/_meta_registrations.py meta_pixel_shuffle: "only CPU preserves channels_last; everything
// else is contiguous"), and a compiled graph reads the result with those strides; the CPU kernel would
// return channels_last for a channels_last input (issue 39, found by bench/zoo/stride_audit.py).
#include "accounting/accounting.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <ATen/ops/pixel_shuffle.h>
#include <torch/library.h>

namespace neuron_sim {

// pixel_shuffle(Tensor self, int upscale_factor) -> Tensor
static void pixel_shuffle_runner(torch::jit::Stack* s) {
  auto a = torch::jit::last(*s, 2);
  at::Tensor out = at::pixel_shuffle(a[0].toTensor(), a[1].toInt()).contiguous();
  torch::jit::drop(*s, 2);
  torch::jit::push(*s, out);
}

static void pixel_shuffle_boxed(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  neuron_fallback_with_runner(op, stack, &pixel_shuffle_runner);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("pixel_shuffle", torch::CppFunction::makeFromBoxedFunction<&pixel_shuffle_boxed>());
}

}  // namespace neuron_sim
