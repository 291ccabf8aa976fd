// Common definitions of the simulated `neuron` device (PrivateUse1 on host memory).
// Every source file includes this first; it stays small (c10 only).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>

namespace neuron_sim {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;
// Size of the per-device tables (memory statistics, streams, default generators). The visible
// device count (set_device_count) is always below it.
constexpr int kMaxDevices = 128;

}  // namespace neuron_sim
