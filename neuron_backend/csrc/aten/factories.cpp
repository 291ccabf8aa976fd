// Factory kernels: empty.memory_format and empty_strided allocate with the neuron allocator on the
// requested device; 64-bit, complex and memory-format checks go through the accounting layer.
#include "accounting/accounting.h"
#include "runtime/allocator.h"

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace neuron_sim {

static at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                      std::optional<at::Layout> layout, std::optional<at::Device> device,
                                      std::optional<bool> /*pin_memory*/,
                                      std::optional<at::MemoryFormat> memory_format) {
  count_explicit(kOpEmpty);
  auto st = c10::dtype_or_default(dtype);
  check_factory(kOpEmpty, size, st, memory_format);
  if (layout.has_value() && *layout != c10::kStrided)
    report_unsupported("sparse", "aten::empty.memory_format",
                       "Sparse tensors are not supported on Neuron (layout " + c10::toString(*layout) + ")",
                       kNotImplementedError);
  const c10::OptionalDeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, neuron_allocator(), ks, st, memory_format);
}

static at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                                std::optional<at::Layout> /*layout*/, std::optional<at::Device> device,
                                std::optional<bool> /*pin_memory*/) {
  count_explicit(kOpEmptyStrided);
  auto st = c10::dtype_or_default(dtype);
  check_factory(kOpEmptyStrided, size, st, std::nullopt);
  const c10::OptionalDeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, neuron_allocator(), ks, st);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
}

}  // namespace neuron_sim
