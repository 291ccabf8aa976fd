// The minimal explicit kernels of the device (like OpenReg's Minimal.cpp): factories, views and
// metadata ops, copies and host reads. They are counted as explicit ops (no signatures); every
// other op goes through the accounting fallback.
#include "accounting/accounting.h"
#include "accounting/alias.h"
#include "runtime/allocator.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace neuron_sim {

// ------------------------------------------------------------------ factories
// empty.memory_format / empty_strided allocate with the neuron allocator on the requested device;
// 64-bit, complex and memory-format checks go through the accounting layer.
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

// ------------------------------------------------------------------ views and metadata
// They only touch tensor metadata (or resize host storage), like the CPU versions.
static at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                             std::optional<int64_t> storage_offset) {
  count_explicit(kOpAsStrided);
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

static at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  count_explicit(kOpView);
  return at::native::view(self, size);
}

static at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  count_explicit(kOpReshapeAlias);
  return at::native::_reshape_alias(self, size, stride);
}

static at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  count_explicit(kOpUnfold);
  return at::native::unfold(self, dimension, size, step);
}

static const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                                 std::optional<at::MemoryFormat> memory_format) {
  count_explicit(kOpResize);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Contiguous &&
      *memory_format != c10::MemoryFormat::Preserve)
    report_unsupported("memory_format", "aten::resize_",
                       "resize_: Neuron tensors only support contiguous or preserve memory format",
                       kRuntimeError);
  return at::native::resize_(self, size, std::nullopt);
}

static at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  count_explicit(kOpSet);
  return at::native::set_(self, std::move(source));
}
static at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage source, int64_t offset,
                                             c10::IntArrayRef size, c10::IntArrayRef stride) {
  count_explicit(kOpSet);
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}
static at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  count_explicit(kOpSet);
  return at::native::set_tensor_(self, source);
}
static at::Tensor& set_empty(at::Tensor& self) {
  count_explicit(kOpSet);
  c10::Storage st(c10::Storage::use_byte_size_t(), 0, neuron_allocator(), true);
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(st));
  self.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  return self;
}

// ------------------------------------------------------------------ copies and host reads
// _copy_from(+_and_resize) between neuron and CPU is a CPU copy_ on zero-copy aliases (both are
// host memory); _local_scalar_dense is .item(); the shallow-copy check keeps Parameter identity in
// module.to(); record_stream is a no-op (streams are ids only).
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

const std::vector<std::string>& uncounted_kernels() {
  static const std::vector<std::string> names = {"aten::_has_compatible_shallow_copy_type", "aten::record_stream"};
  return names;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_storage_offset));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));  // kUncountedKernels
  m.impl("record_stream", TORCH_FN(record_stream));
  // CompositeExplicitAutograd ops that TorchNeuron implements natively: route them through the
  // accounting fallback (one counted op instead of its decomposition; argument checks). The norms
  // and all/any.dims also have CPU kernels, which then compute them like the CPU does (their
  // decompositions round differently and return other dtypes for the statistics); constant_pad_nd's
  // decomposition would allocate its result on the device with suggest_memory_format(input).
  for (const char* name : {"_to_copy", "clone", "copy_", "embedding", "constant_pad_nd", "native_layer_norm",
                           "native_group_norm", "all.dims", "any.dims"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

}  // namespace neuron_sim
