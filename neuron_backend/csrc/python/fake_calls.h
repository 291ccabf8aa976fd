// Shape-only runs (neuron_backend/shape_only/): calls made on fake tensors, accounted by the same
// op table, signatures, sites and records as the fallback's, without running a kernel.
#pragma once

#include <torch/csrc/utils/pybind.h>

#include <cstdint>
#include <string>

namespace neuron_sim {

// Account one call of `name.overload` (an ATen schema) with the Python arguments a
// TorchDispatchMode received: one counted op, as neuron_fallback counts it. Returns the signature's
// hash (0 with accounting off), for account_fake_complex_result.
uint64_t account_fake_call(const std::string& name, const std::string& overload, const py::tuple& args,
                           const py::dict& kwargs);

// The call `hash` of `name.overload` made a complex result from arguments that were not complex
// (view_as_complex, fft): decided as the fallback decides a real call's complex result.
void account_fake_complex_result(const std::string& name, const std::string& overload, uint64_t hash);

// A factory call (aten::empty.memory_format, aten::empty_strided): counted and checked (64-bit and complex
// dtypes, memory formats) as the explicit kernels of aten/minimal.cpp do.
void account_fake_factory(const std::string& name, const std::string& overload, const py::tuple& args,
                          const py::dict& kwargs);

}  // namespace neuron_sim
