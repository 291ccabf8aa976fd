// Shared declarations of the simulated `neuron` device (PrivateUse1 on host memory).
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace neuron_sim {

constexpr c10::DeviceType kNeuron = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 128;

// ---- device state (neuron_device.cpp) ----
int device_count();
void set_device_count(int n);
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex d);
c10::Allocator* neuron_allocator();
const at::Generator& default_generator(c10::DeviceIndex d);
// The CPU generator behind a neuron generator (used by the fallback to run CPU RNG kernels).
at::Generator cpu_generator_of(const at::Generator& g);

// Byte accounting shared by the allocator and by the fallback's wrapped CPU results.
void mem_on_alloc(int dev, size_t nbytes);
void mem_on_free(int dev, size_t nbytes);
struct MemStats {
  int64_t allocated, peak_allocated, reserved, peak_reserved, alloc_count, free_count,
      total_allocated_bytes;
};
MemStats mem_stats(int dev);
void mem_reset_peak(int dev);
void mem_empty_cache(int dev);

// ---- zero-copy aliasing (neuron_dispatch.cpp) ----
at::Tensor cpu_alias(const at::Tensor& t);          // CPU tensor over a neuron tensor's bytes
at::Tensor wrap_cpu_result(const at::Tensor& cpu, c10::DeviceIndex d);  // neuron tensor over CPU result

// ---- accounting used by explicit kernels (neuron_dispatch.cpp) ----
enum ExplicitOp : int {
  kOpEmpty = 0, kOpEmptyStrided, kOpAsStrided, kOpView, kOpReshapeAlias, kOpResize, kOpSet,
  kOpCopyFrom, kOpCopyFromAndResize, kOpLocalScalarDense, kOpConvolution, kOpConvolutionBackward,
  kOpUnfold, kNumExplicitOps
};
void count_explicit(ExplicitOp op);
// Factory checks (complex dtypes, 64-bit dtypes, memory formats): slow path only when needed.
void check_factory(ExplicitOp op, c10::IntArrayRef sizes, c10::ScalarType dtype,
                   std::optional<c10::MemoryFormat> mf);
// Report an unsupported feature; raises unless the Python side is in record mode.
// kind: 0 RuntimeError, 1 NotImplementedError, 2 TypeError
void report_unsupported(const std::string& feature, const std::string& op,
                        const std::string& message, int error_kind);

// The boxed fallback (neuron_dispatch.cpp), also registered for selected ops explicitly.
void neuron_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace neuron_sim
