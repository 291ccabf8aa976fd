// Dtype completion of native ops (slow path only).
//
// TorchNeuron lowers its native ops for the device, which accepts dtypes that some of PyTorch's CPU
// kernels lack (integer histc, some bool / half / bfloat16 kernels). The simulator computes such an
// op with the CPU kernel on a wider CPU dtype and casts the results back:
//   bool, uint8, int8, int16, int32 -> int64 -> float64;  int64 -> float64;
//   float16, bfloat16 -> float32 -> float64;  float32 -> float64.
// The decision is taken once per signature, on its first call (probe()), and cached in the
// signature (SigInfo::plan); later calls of an upcast signature go straight to run_upcast().
// The op is still counted as itself with its original signature (the casts run on CPU aliases and
// never reach the device).
#pragma once

#include "accounting/op_table.h"

#include <ATen/core/stack.h>

namespace neuron_sim {

// Run the op on the (CPU-aliased) stack with the CPU kernel. If the kernel lacks one of the
// argument dtypes ("... not implemented for 'Int'"), find a plan of wider dtypes, run with it and
// return true with *plan filled; other errors propagate unchanged. `backup`: copy the writable
// arguments of a non-float32/64 dtype first, so that a kernel that wrote before failing is undone.
bool probe_dtypes(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& o, bool backup,
                  UpcastPlan* plan);
// Run the op with a plan found by probe_dtypes().
void run_upcast(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& o, const UpcastPlan& plan);

}  // namespace neuron_sim
