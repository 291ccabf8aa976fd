// Zero-copy aliasing between neuron tensors and CPU tensors over the same bytes.
#pragma once

#include "common.h"

#include <ATen/core/Tensor.h>

namespace neuron_sim {

// CPU tensor over a neuron tensor's bytes (its storage's DataPtr holds a reference to the neuron
// StorageImpl and has alias_deleter as deleter).
at::Tensor cpu_alias(const at::Tensor& t);
void alias_deleter(void* ctx);
// Neuron tensor over a CPU result, without copying (a view of an alias shares the neuron storage).
at::Tensor wrap_cpu_result(const at::Tensor& cpu, c10::DeviceIndex d);
// An out= argument whose CPU alias the kernel resized or restrided: re-point the neuron tensor.
void sync_back(const at::Tensor& orig, const at::Tensor& alias);

inline at::Tensor as_cpu(const at::Tensor& t) { return t.device().type() == kNeuron ? cpu_alias(t) : t; }

}  // namespace neuron_sim
