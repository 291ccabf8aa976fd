// PrivateUse1 hooks: availability, generators, pinned memory, device switching, storage resize.
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/generator.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>

namespace neuron_sim {

struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override { return make_neuron_generator(d); }
  at::Device getDeviceFromPtr(void* /*data*/) const override { return c10::Device(kNeuron, current_device()); }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex /*d*/) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = current_device();
    if (d >= 0) set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
  }
};
static bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

}  // namespace neuron_sim
