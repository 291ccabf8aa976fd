// Autocast on neuron: CUDA's op lists (lower precision, fp32, promote, banned binary_cross_entropy)
// registered for AutocastPrivateUse1; every other op falls through.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace neuron_sim {

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

using namespace at;  // the AT_FORALL_* op lists use unqualified ATen names

#define NEURON_KERNEL_LOW(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_KERNEL_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_KERNEL_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_KERNEL_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

static at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&,
                                             const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NEURON_KERNEL_LOW)
  AT_FORALL_FP32(NEURON_KERNEL_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_KERNEL_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(NEURON_KERNEL_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace neuron_sim
