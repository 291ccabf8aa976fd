// Scaled dot-product attention through the "overrideable" backend.
#include "accounting/accounting.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

namespace neuron_sim {

// Like TorchNeuron (csrc/aten/SdpBackendSelection.cpp), 4-D SDPA on neuron selects the overrideable
// backend; the simulator computes it with PyTorch's CPU flash-attention kernels on the aliases.
static void sdpa_fwd_runner(torch::jit::Stack* s) {
  auto a = torch::jit::last(*s, 8);
  at::Tensor q = a[0].toTensor(), k = a[1].toTensor(), v = a[2].toTensor();
  std::optional<at::Tensor> bias;
  if (a[3].isTensor() && a[3].toTensor().defined()) bias = a[3].toTensor();
  double dropout = a[4].toDouble();
  bool causal = a[5].toBool(), debug = a[6].toBool();
  std::optional<double> scale;
  if (!a[7].isNone()) scale = a[7].toDouble();
  TORCH_CHECK_NOT_IMPLEMENTED(!debug, "[neuron-port simulator] Debug mask not supported in Neuron implementation.");
  auto res = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout, causal, bias, scale);
  int64_t lq = q.size(-2), lk = k.size(-2);
  torch::jit::drop(*s, 8);
  torch::jit::push(*s, std::get<0>(res), std::get<1>(res), at::Tensor(), at::Tensor(), c10::IValue(lq),
                   c10::IValue(lk), at::Tensor(), at::Tensor(), at::Tensor());
}
static void sdpa_bwd_runner(torch::jit::Stack* s) {
  auto a = torch::jit::last(*s, 17);
  std::optional<at::Tensor> bias;
  if (a[4].isTensor() && a[4].toTensor().defined()) bias = a[4].toTensor();
  std::optional<double> scale;
  if (!a[16].isNone()) scale = a[16].toDouble();
  auto res = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor(), a[6].toTensor(), a[7].toTensor(),
      a[12].toDouble(), a[13].toBool(), bias, scale);
  torch::jit::drop(*s, 17);
  torch::jit::push(*s, std::get<0>(res), std::get<1>(res), std::get<2>(res), at::Tensor());
}
static void sdpa_fwd(const c10::OperatorHandle& op, torch::jit::Stack* stack) { neuron_fallback_with_runner(op, stack, &sdpa_fwd_runner); }
static void sdpa_bwd(const c10::OperatorHandle& op, torch::jit::Stack* stack) { neuron_fallback_with_runner(op, stack, &sdpa_bwd_runner); }

static int64_t neuron_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const std::optional<at::Tensor>& /*mask*/, double dropout_p, bool /*is_causal*/,
                                 std::optional<double> /*scale*/, bool enable_gqa) {
  auto fp = [](const at::Tensor& t) {
    auto st = t.scalar_type();
    return st == at::kFloat || st == at::kBFloat16 || st == at::kHalf;
  };
  bool ok = dropout_p == 0.0 && !enable_gqa && q.dim() == 4 && k.dim() == 4 && v.dim() == 4 &&
            q.size(1) == k.size(1) && k.size(1) == v.size(1) && fp(q) && q.scalar_type() == k.scalar_type() &&
            q.scalar_type() == v.scalar_type();
  return ok ? static_cast<int64_t>(4) /* SDPBackend::overrideable */ : static_cast<int64_t>(0) /* math */;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", torch::CppFunction::makeFromBoxedFunction<&sdpa_fwd>());
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         torch::CppFunction::makeFromBoxedFunction<&sdpa_bwd>());
}

}  // namespace neuron_sim

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &neuron_sim::neuron_sdp_choice)
}
