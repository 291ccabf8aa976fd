// The device guard: current device, streams (ids only) and events (host timestamps).
// The simulator runs ops synchronously, so synchronisation is a no-op.
#include "runtime/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <chrono>

namespace neuron_sim {

static std::atomic<int64_t> g_stream_counter{0};
static thread_local std::array<c10::StreamId, kMaxDevices> t_streams{};
// The slot of a device in the per-thread stream table.
static size_t stream_slot(c10::DeviceIndex i) {
  TORCH_CHECK(i >= 0 && i < kMaxDevices, "neuron streams: device index ", static_cast<int>(i),
              " is outside the per-device stream table (0 to ", kMaxDevices - 1, ")");
  return static_cast<size_t>(i);
}
static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct NeuronGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = current_device();
    if (d.index() >= 0 && d.index() != old) set_current_device(d.index());
    return c10::Device(kNeuron, old);
  }
  c10::Device getDevice() const override { return c10::Device(kNeuron, current_device()); }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) set_current_device_unchecked(d.index());
  }
  c10::Stream getStream(c10::Device d) const override {
    auto i = d.index() < 0 ? current_device() : d.index();
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, i), t_streams[stream_slot(i)]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kNeuron, d.index() < 0 ? current_device() : d.index()));
  }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, d.index() < 0 ? current_device() : d.index()),
                       ++g_stream_counter);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high*/) const override { return getNewStream(d, 0); }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = getStream(s.device());
    t_streams[stream_slot(s.device_index())] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void record(void** event, const c10::Stream& /*stream*/, const c10::DeviceIndex /*idx*/,
              const c10::EventFlag /*flag*/) const override {
    if (*event == nullptr) *event = new double(0);
    *static_cast<double*>(*event) = now_ms();
  }
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex /*idx*/) const noexcept override {
    delete static_cast<double*>(event);
  }
  bool queryStream(const c10::Stream& /*stream*/) const override { return true; }
  void synchronizeStream(const c10::Stream& /*stream*/) const override {}
  void synchronizeEvent(void* /*event*/) const override {}
  void synchronizeDevice(const c10::DeviceIndex /*idx*/) const override {}
  void recordDataPtrOnStream(const c10::DataPtr& /*dp*/, const c10::Stream& /*stream*/) const override {}
  double elapsedTime(void* e1, void* e2, const c10::DeviceIndex /*idx*/) const override {
    TORCH_CHECK(e1 && e2, "Both events must be recorded before calculating elapsed time.");
    return *static_cast<double*>(e2) - *static_cast<double*>(e1);
  }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

}  // namespace neuron_sim
