// Device count and the current device (per thread).
#pragma once

#include "common.h"

#include <cstdint>

namespace neuron_sim {

int device_count();
void set_device_count(int n);
c10::DeviceIndex current_device();
// Checked: 0 <= d < device_count(), else "Invalid device id" (RuntimeError).
void set_current_device(c10::DeviceIndex d);
// Unchecked (DeviceGuardImplInterface::uncheckedSetDevice, noexcept).
void set_current_device_unchecked(c10::DeviceIndex d) noexcept;

// Device index passed to a Python entry point (`what` names it in the error): raises RuntimeError
// "<what>: Invalid device id: <d>. Valid range is 0 to <n-1> (device_count() is <n>)" unless
// 0 <= d < device_count(). With allow_no_device, index 0 also stays valid when no device is
// visible (device_count() == 0): tensors then still land on neuron:0, whose statistics and
// generator the Python side reads.
c10::DeviceIndex check_device_index(int64_t d, const char* what, bool allow_no_device = false);

}  // namespace neuron_sim
