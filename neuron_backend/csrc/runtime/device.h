// Device count and the current device (per thread).
#pragma once

#include "common.h"

namespace neuron_sim {

int device_count();
void set_device_count(int n);
c10::DeviceIndex current_device();
// Checked: 0 <= d < device_count(), else "Invalid device id" (RuntimeError).
void set_current_device(c10::DeviceIndex d);
// Unchecked (DeviceGuardImplInterface::uncheckedSetDevice, noexcept).
void set_current_device_unchecked(c10::DeviceIndex d) noexcept;

}  // namespace neuron_sim
