// Copies and host reads: _copy_from(+_and_resize) between neuron and CPU (both are host memory:
// a CPU copy_ on zero-copy aliases), _local_scalar_dense (.item()), the shallow-copy check that
// keeps Parameter identity in module.to(), record_stream (a no-op), and the ops TorchNeuron
// implements natively that must go through the accounting fallback instead of decomposing.
#include "accounting/accounting.h"
#include "accounting/alias.h"

#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/resize_native.h>
#include <torch/library.h>

namespace neuron_sim {

static at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  count_explicit(kOpCopyFrom);
  as_cpu(dst).copy_(as_cpu(self), non_blocking);
  return dst;
}
static at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  count_explicit(kOpCopyFromAndResize);
  if (dst.device().type() == kNeuron) {
    at::native::resize_(dst, self.sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  as_cpu(dst).copy_(as_cpu(self), false);
  return dst;
}
static at::Scalar local_scalar_dense(const at::Tensor& self) {
  count_explicit(kOpLocalScalarDense);
  return at::native::_local_scalar_dense_cpu(cpu_alias(self));
}
static bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return self.layout() == c10::kStrided && from.layout() == c10::kStrided &&
         !self.is_nested() && !from.is_nested() && !self.is_quantized() && !from.is_quantized();
}

// record_stream: streams are no-ops in the simulator (TorchNeuron registers record_stream natively).
static void record_stream(at::Tensor& /*self*/, c10::Stream /*s*/) {}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("record_stream", TORCH_FN(record_stream));
  // CompositeExplicitAutograd ops that TorchNeuron implements natively: route them through the
  // accounting fallback (one counted op instead of its decomposition; argument checks).
  for (const char* name : {"_to_copy", "clone", "copy_", "embedding"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

}  // namespace neuron_sim
