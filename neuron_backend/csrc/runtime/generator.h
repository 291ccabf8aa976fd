// Generators of the neuron device: they report neuron:N and wrap a CPU generator.
#pragma once

#include "common.h"

#include <ATen/core/Generator.h>

namespace neuron_sim {

// The default generator of device d (d < 0: the current device).
const at::Generator& default_generator(c10::DeviceIndex d);
// A new generator on device d (d < 0: the current device).
at::Generator make_neuron_generator(c10::DeviceIndex d);
// The CPU generator behind a neuron generator (used by the fallback to run CPU RNG kernels).
at::Generator cpu_generator_of(const at::Generator& g);

}  // namespace neuron_sim
