// Unsupported layouts: every op on a sparse or nested neuron tensor reports the feature.
#include "accounting/accounting.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

namespace neuron_sim {

static void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  report_unsupported("sparse", op.schema().name(),
                     "Sparse tensors are not supported on Neuron (" + op.schema().name() + ")",
                     kNotImplementedError);
  TORCH_CHECK_NOT_IMPLEMENTED(false, "[neuron-port simulator] sparse neuron tensors cannot run in record mode (",
                              op.schema().name(), ")");
}
static void nested_fallback(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  report_unsupported("nested_tensor", op.schema().name(),
                     "NestedTensor is not supported on Neuron (" + op.schema().name() + ")",
                     kNotImplementedError);
  TORCH_CHECK_NOT_IMPLEMENTED(false, "[neuron-port simulator] nested neuron tensors cannot run in record mode (",
                              op.schema().name(), ")");
}
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_fallback>());
}

}  // namespace neuron_sim
