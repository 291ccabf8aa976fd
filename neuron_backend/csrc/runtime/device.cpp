// Device count and the current device (per thread, like CUDA's).
#include "runtime/device.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace neuron_sim {

static std::atomic<int> g_device_count{4};
// A thread's current device; -1: it never set one and uses the process's default, neuron:0, or under
// init_process_group(backend="neuron") the process's core (c10_neuron's global_default_device: worker threads
// inherit the device the distributed setup chose).
static thread_local c10::DeviceIndex t_current_device = -1;
static std::atomic<int> g_default_device{0};

int device_count() { return g_device_count.load(std::memory_order_relaxed); }
void set_device_count(int n) {
  TORCH_CHECK(n >= 0 && n < kMaxDevices,
              "[neuron-port simulator] ", n, " visible Neuron devices requested. Reduce the number of "
              "visible Neuron devices (e.g., via NEURON_RT_NUM_CORES or NEURON_RT_VISIBLE_CORES) or "
              "avoid configurations that expose >= 128 devices.");
  g_device_count.store(n);
}
c10::DeviceIndex current_device() {
  return t_current_device >= 0 ? t_current_device
                               : static_cast<c10::DeviceIndex>(g_default_device.load(std::memory_order_relaxed));
}
static void check_index(c10::DeviceIndex d) {
  TORCH_CHECK(d >= 0 && d < device_count(), "Invalid device id: ", static_cast<int>(d),
              ". Valid range is 0 to ", device_count() - 1);
}
void set_current_device(c10::DeviceIndex d) {
  check_index(d);
  t_current_device = d;
}
void set_current_device_unchecked(c10::DeviceIndex d) noexcept { t_current_device = d; }

c10::DeviceIndex check_device_index(int64_t d, const char* what, bool allow_no_device) {
  const int n = device_count();
  const int valid = allow_no_device && n == 0 ? 1 : n;  // always <= kMaxDevices
  TORCH_CHECK(d >= 0 && d < valid, what, ": Invalid device id: ", d, ". Valid range is 0 to ", valid - 1,
              " (device_count() is ", n, ")");
  return static_cast<c10::DeviceIndex>(d);
}

static std::atomic<int> g_process_core{-1};
void set_process_core(int d) {
  g_process_core.store(d);
  g_default_device.store(d);
}
void check_process_core(int d) {
  const int core = g_process_core.load(std::memory_order_relaxed);
  if (core < 0 || d == core) return;
  TORCH_CHECK(d > core, "Attempted to access device that doesn't attach to this process, received ", d,
              " expected to be equal or greater than ", core);
  TORCH_CHECK(false, "[neuron-port simulator] neuron:", d, " is not a NeuronCore of this process: its core is neuron:",
              core, " (LOCAL_RANK), the only one the runtime lets it allocate on");
}

}  // namespace neuron_sim
