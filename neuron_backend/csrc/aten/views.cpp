// View and metadata kernels: as_strided, view, _reshape_alias, unfold, resize_, set_. They only
// touch tensor metadata (or resize host storage), like the CPU versions.
#include "accounting/accounting.h"
#include "runtime/allocator.h"

#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

namespace neuron_sim {

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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_storage_offset));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
}

}  // namespace neuron_sim
