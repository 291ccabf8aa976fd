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

// Under init_process_group(backend="neuron") the process has one core, neuron:<LOCAL_RANK> (set_process_core;
// -1 before). Memory on another index fails as TorchNeuron's allocator does (c10_neuron::get_vnc_id): below the
// core "Attempted to access device that doesn't attach to this process, received <d> expected to be equal or
// greater than <core>"; above it a core the process does not see. It is also the current device of the threads
// that never set one (c10_neuron's global default device).
void set_process_core(int d);
void check_process_core(int d);

}  // namespace neuron_sim
