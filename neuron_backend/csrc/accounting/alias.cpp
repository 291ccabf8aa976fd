// Zero-copy aliases: CPU views of neuron storages for the CPU kernels, and neuron tensors over
// the CPU kernels' results. Wrapped results are counted in the device's memory statistics.
#include "accounting/alias.h"

#include "runtime/allocator.h"
#include "runtime/memory_stats.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

namespace neuron_sim {

// PyTorch's efficient zero tensors (at::_efficientzerotensor: what autograd formulas return for a gradient
// known to be zero, e.g. sgn's and sign's of a real input) have a storage without memory (a null data
// pointer) and the ZeroTensor dispatch key, which makes every op that reads them see zeros
// (aten/src/ATen/ZeroTensorFallback.cpp): ops the ZeroTensor key passes through (copies, clones, views,
// factories like *_like) reach the device's kernels with the tensor as it is. The key crosses the alias
// boundary both ways, so the CPU kernels see a zero tensor as on the CPU and a zero tensor they return
// stays one on the device; dropping it left a tensor of N elements over no memory, read from address 0.
static c10::DispatchKeySet with_zero_key(c10::DispatchKey backend, const at::Tensor& like) {
  c10::DispatchKeySet ks(backend);
  return like._is_zerotensor() ? ks.add(c10::DispatchKey::ZeroTensor) : ks;
}

void alias_deleter(void* ctx) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx)); }

at::Tensor cpu_alias(const at::Tensor& t) {
  c10::StorageImpl* si = t.storage().unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(si);
  c10::DataPtr dp(si->data_ptr().get(), si, &alias_deleter, c10::Device(c10::kCPU));
  auto csi = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), si->nbytes(),
                                                   std::move(dp), c10::GetCPUAllocator(), /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(std::move(csi)), with_zero_key(c10::DispatchKey::CPU, t),
                                                   t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_neg()) impl->_set_neg(true);
  if (t.is_conj()) impl->_set_conj(true);
  return at::Tensor(std::move(impl));
}

struct WrapCtx {
  c10::StorageImpl* csi;
  size_t nbytes;
  int dev;
};
static void wrap_deleter(void* p) {
  auto* c = static_cast<WrapCtx*>(p);
  mem_on_free(c->dev, c->nbytes);
  c10::raw::intrusive_ptr::decref(c->csi);
  delete c;
}
static c10::DataPtr wrap_storage(c10::StorageImpl* csi, int dev) {
  c10::raw::intrusive_ptr::incref(csi);
  size_t n = csi->nbytes();
  mem_on_alloc(dev, n);
  return c10::DataPtr(csi->data_ptr().get(), new WrapCtx{csi, n, dev}, &wrap_deleter,
                      c10::Device(kNeuron, static_cast<c10::DeviceIndex>(dev)));
}

at::Tensor wrap_cpu_result(const at::Tensor& r, c10::DeviceIndex dev) {
  c10::StorageImpl* csi = r.storage().unsafeGetStorageImpl();
  c10::Storage nst;
  if (csi->data_ptr().get_deleter() == &alias_deleter) {
    // A view of a neuron tensor's memory: share that neuron storage.
    auto* nsi = static_cast<c10::StorageImpl*>(csi->data_ptr().get_context());
    nst = c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(nsi));
  } else if (r._is_zerotensor()) {
    // A new zero tensor: no memory, as PyTorch's ZeroTensorAllocator gives on any device.
    nst = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), csi->nbytes(),
        c10::DataPtr(nullptr, c10::Device(kNeuron, static_cast<c10::DeviceIndex>(dev))), nullptr, false));
  } else {
    nst = c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), csi->nbytes(),
                                                             wrap_storage(csi, dev), neuron_allocator(), true));
  }
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(nst), with_zero_key(c10::DispatchKey::PrivateUse1, r),
                                                   r.dtype());
  impl->set_sizes_and_strides(r.sizes(), r.strides(), r.storage_offset());
  if (r.is_neg()) impl->_set_neg(true);
  if (r.is_conj()) impl->_set_conj(true);
  return at::Tensor(std::move(impl));
}

void sync_back(const at::Tensor& orig, const at::Tensor& alias) {
  auto* oi = orig.unsafeGetTensorImpl();
  auto* ai = alias.unsafeGetTensorImpl();
  c10::StorageImpl* asi = ai->storage().unsafeGetStorageImpl();
  c10::StorageImpl* osi = oi->storage().unsafeGetStorageImpl();
  const bool same_mem = asi->data_ptr().get_deleter() == &alias_deleter && asi->data_ptr().get_context() == osi;
  if (!same_mem) {
    osi->set_data_ptr_noswap(wrap_storage(asi, orig.device().index()));
    osi->set_nbytes(asi->nbytes());
  }
  if (oi->sizes() != ai->sizes() || oi->strides() != ai->strides() || oi->storage_offset() != ai->storage_offset())
    oi->set_sizes_and_strides(ai->sizes(), ai->strides(), ai->storage_offset());
}

}  // namespace neuron_sim
