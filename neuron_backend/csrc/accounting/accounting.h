// What the rest of the core uses from the accounting layer: the boxed fallback, explicit-op
// counters, factory checks, unsupported-feature reports, policy and statistics export.
#pragma once

#include "common.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/MemoryFormat.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace neuron_sim {

// The enums below are exported to Python (python/bindings.cpp: Policy, SigFlag, ErrorKind,
// EXPLICIT_OPS); neuron_backend/events/aggregate.py reads the names and bits from there.

// Policy of an op on Trainium; the Python names are the events file's "policy" values.
enum Policy : int { kNative = 0, kNativeNoNeff = 1, kFallback = 2 };
// Flags of a signature.
enum SigFlag : uint32_t { kF64 = 1, kI64 = 2, kComplex = 4, kNeuronArg = 16 };
// Python exception type raised for an unsupported feature.
enum ErrorKind : int { kRuntimeError = 0, kNotImplementedError = 1, kTypeError = 2 };

// Explicit kernels, counted without signatures.
enum ExplicitOp : int {
  kOpEmpty = 0, kOpEmptyStrided, kOpAsStrided, kOpView, kOpReshapeAlias, kOpResize, kOpSet,
  kOpCopyFrom, kOpCopyFromAndResize, kOpLocalScalarDense, kOpConvolution, kOpConvolutionBackward,
  kOpUnfold, kNumExplicitOps
};
extern const char* const kExplicitNames[kNumExplicitOps];
void count_explicit(ExplicitOp op);
// Factory checks (complex dtypes, 64-bit dtypes, memory formats): slow path only when needed.
void check_factory(ExplicitOp op, c10::IntArrayRef sizes, c10::ScalarType dtype,
                   std::optional<c10::MemoryFormat> mf);

// Report an unsupported feature; raises (error_kind: an ErrorKind) unless the Python side is in
// record mode.
void report_unsupported(const std::string& feature, const std::string& op,
                        const std::string& message, int error_kind);

// Report a feature that does not raise on Trainium but changes what runs there (once per new
// signature; never on the hot path): action is "decomposed" (complex op decomposed into real ops),
// "cpu_fallback" (complex op run on the CPU) or "unconfirmed" (the simulator runs it, TorchNeuron's
// behaviour is not documented). Recorded as an `unsupported` event with that action (EVENTS.md).
void report_note(const std::string& feature, const std::string& op, const std::string& message,
                 const std::string& action);

// The boxed fallback, also registered for selected ops explicitly.
void neuron_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The fallback with a runner in place of the CPU redispatch: the runner pops the (CPU-aliased)
// arguments and pushes the returns.
using Runner = void (*)(torch::jit::Stack*);
void neuron_fallback_with_runner(const c10::OperatorHandle& op, torch::jit::Stack* stack, Runner runner);
// Count one call as the fallback does (op, signature, site, unsupported checks), without running it:
// a shape-only run's call on fake tensors (python/fake_calls.cpp). `stack` holds the op's arguments.
// Returns the signature's hash (0 with accounting off).
uint64_t account_without_running(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
// A complex result of the call `hash` accounted: the policy a real call's complex result decides
// (fallback.cpp's on_complex_result: view_as_complex is a view, fft a CPU fallback).
void account_complex_result(const c10::OperatorHandle& op, uint64_t hash);
// The PrivateUse1 kernels (aten/minimal.cpp) that count nothing: metadata queries and stream notes.
const std::vector<std::string>& uncounted_kernels();
// The PrivateUse1 kernels composed of ATen calls on the device tensors (aten/rnn.cpp), counted where those
// calls land, not as one call: a shape-only run runs them on its fakes (shape_only/mode.py). Filled as the
// kernels register (impl_composite, aten/composite.h), so the list is what the library registers.
std::vector<std::string>& composite_kernels();
// The ops whose fallback accepts a CPU tensor of one or more dimensions beside device tensors (an index
// tensor, a copy's source): any other op refuses one, as on Trainium. A shape-only run accepts the same.
const std::vector<std::string>& mixed_device_ops();
// Count one call of an explicit kernel by its name in kExplicitNames; false when it is not one.
bool count_explicit_by_name(const std::string& name);
// Route every op of a namespace (or with a name prefix) through the fallback at run time.
int route_through_fallback(const std::string& ns, const std::string& prefix);

// Switches set from Python.
void set_accounting(bool on);
void set_emulate_float64(bool on);
void set_policy(const std::vector<std::string>& native, const std::vector<std::string>& native_no_neff);
// Complex decomposition (TORCH_NEURONX_COMPLEX_DECOMPOSE) and its op lists, the ops whose
// memory-format behaviour is noted as unconfirmed, and the number arguments TorchNeuron compiles in
// by value ("op:arg", rules/op_policy.toml [complex], [memory_format], [static_scalars]).
void set_feature_policy(bool complex_decompose, const std::vector<std::string>& complex_decomposed,
                        const std::vector<std::string>& complex_views, const std::vector<std::string>& memfmt_note_ops,
                        const std::vector<std::string>& static_scalars);

// Statistics export: per op (name, policy, calls, signatures), per signature (calls, site id,
// SigFlag bits, unsupported feature, description).
using SigStats = std::tuple<int64_t, int, uint32_t, std::string, std::vector<std::string>>;
using OpStats = std::tuple<std::string, int, int64_t, std::vector<SigStats>>;
std::vector<OpStats> op_stats();
std::vector<std::pair<std::string, int64_t>> explicit_counts();  // in ExplicitOp order
// (op, ns) of the fallback ops whose kernels ran on the host, in order of first use
std::vector<std::pair<std::string, int64_t>> fallback_host_ns();
void reset_stats();

}  // namespace neuron_sim
