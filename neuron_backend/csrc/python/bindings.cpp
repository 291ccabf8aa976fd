// The Python module of the C++ core (loaded as neuron_backend._C). Bindings only: every function
// is implemented in runtime/ or accounting/.
#include <torch/csrc/utils/pybind.h>  // pybind11 with torch's casters (not torch/extension.h: compile time)

#include "accounting/accounting.h"
#include "accounting/alias.h"
#include "accounting/callbacks.h"
#include "accounting/op_table.h"
#include "accounting/records.h"
#include "python/fake_calls.h"
#include "runtime/device.h"
#include "runtime/generator.h"
#include "runtime/memory_stats.h"

#include <pybind11/stl.h>
#include <torch/csrc/Generator.h>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace neuron_sim;
  m.doc() = "neuron-port simulated neuron device (C++ core)";

  // Enums shared with the Python side (neuron_backend/events/aggregate.py reads names and bits from here).
  py::enum_<Policy>(m, "Policy", "Policy of an op on Trainium (op_stats); names as in the events file")
      .value("native", kNative)
      .value("native_no_neff", kNativeNoNeff)
      .value("fallback", kFallback);
  py::enum_<SigFlag>(m, "SigFlag", py::arithmetic(), "Flag bits of a signature (op_stats)")
      .value("F64", kF64)
      .value("I64", kI64)
      .value("COMPLEX", kComplex)
      .value("NEURON_ARG", kNeuronArg);
  py::enum_<ErrorKind>(m, "ErrorKind", "Python exception raised for an unsupported feature (report_unsupported)")
      .value("RuntimeError", kRuntimeError)
      .value("NotImplementedError", kNotImplementedError)
      .value("TypeError", kTypeError);
  py::tuple explicit_ops(static_cast<size_t>(kNumExplicitOps));
  for (int i = 0; i < kNumExplicitOps; ++i) explicit_ops[i] = py::str(kExplicitNames[i]);
  m.attr("EXPLICIT_OPS") = explicit_ops;
  m.attr("UNCOUNTED_KERNELS") = py::tuple(py::cast(uncounted_kernels()));  // names of the explicit_counts() keys, in ExplicitOp order
  m.attr("COMPOSITE_KERNELS") = py::tuple(py::cast(composite_kernels()));
  m.attr("MIXED_DEVICE_OPS") = py::tuple(py::cast(mixed_device_ops()));

  m.def("set_device_count", &set_device_count);
  m.def("set_process_core", &set_process_core);
  m.def("device_count", &device_count);
  m.def("current_device", []() { return static_cast<int>(current_device()); });
  // Entry points that take a device index check it against device_count() before any table is
  // touched (int64_t: no silent narrowing to c10::DeviceIndex, an int8_t).
  m.def("set_device", [](int64_t d) { set_current_device(check_device_index(d, "set_device")); });
  m.def("set_policy", &set_policy);
  m.def("set_callbacks", [](py::object site_cb, py::object unsup_cb) {
    set_callbacks(site_cb.is_none() ? nullptr : site_cb.ptr(), unsup_cb.is_none() ? nullptr : unsup_cb.ptr());
  });
  m.def("set_feature_policy", &set_feature_policy, py::arg("complex_decompose"), py::arg("complex_decomposed"),
        py::arg("complex_views"), py::arg("memory_format_notes"), py::arg("static_scalars"));
  m.def("set_note_callback", [](py::object cb) { set_note_callback(cb.is_none() ? nullptr : cb.ptr()); });
  m.def("set_accounting", &set_accounting);
  m.def("accounting_enabled", []() { return accounting_on(); });
  m.def("set_emulate_float64", &set_emulate_float64);
  m.def("op_stats", &op_stats);
  m.def("explicit_counts", []() {
    py::dict d;
    for (const auto& kv : explicit_counts()) d[py::str(kv.first)] = kv.second;
    return d;
  });
  m.def("fallback_host_ns", &fallback_host_ns);
  m.def("reset_stats", &reset_stats);
  // Crash-proof records (accounting/records.h, EVENTS.md "Records").
  m.def("records_open", &records_open, py::arg("counters_path"), py::arg("journal_path"), py::arg("token"));
  m.def("records_is_open", &records_is_open);
  m.def("records_append", &records_append);
  m.def("records_new_counter", [](int64_t initial) { return records_slot(records_new_counter(initial)); });
  m.def("records_add", &records_add);
  m.def("records_set_clock", &records_set_clock);
  m.def("records_format", []() { return kRecordsFormat; });
  // A CPU tensor over a neuron tensor's bytes that holds the neuron storage from C++ only (no Python
  // object: gloo's threads may drop it while the interpreter finalises).
  m.def("cpu_alias", [](const at::Tensor& t) { return cpu_alias(t); });
  m.def("memory_stats", [](int64_t dev) {
    auto s = mem_stats(check_device_index(dev, "memory_stats", true));
    py::dict d;
    d["allocated_bytes.all.current"] = s.allocated;
    d["allocated_bytes.all.peak"] = s.peak_allocated;
    d["allocated_bytes.all.allocated"] = s.total_allocated_bytes;
    d["reserved_bytes.all.current"] = s.reserved;
    d["reserved_bytes.all.peak"] = s.peak_reserved;
    d["allocation.all.allocated"] = s.alloc_count;
    d["allocation.all.freed"] = s.free_count;
    d["allocation.all.current"] = s.alloc_count - s.free_count;
    return d;
  });
  m.def("reset_peak_memory_stats",
        [](int64_t dev) { mem_reset_peak(check_device_index(dev, "reset_peak_memory_stats", true)); });
  m.def("empty_cache", [](int64_t dev) { mem_empty_cache(check_device_index(dev, "empty_cache", true)); });
  m.def("mem_graph_begin", &mem_graph_begin);
  m.def("mem_graph_end", &mem_graph_end);
  m.def("default_generator", [](int64_t dev) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(check_device_index(dev, "default_generator", true))));
  });
  m.def("account_fake_call", &account_fake_call, py::arg("name"), py::arg("overload"), py::arg("args"),
        py::arg("kwargs"));
  m.def("account_fake_complex_result", &account_fake_complex_result, py::arg("name"), py::arg("overload"),
        py::arg("hash"));
  m.def("account_fake_factory", &account_fake_factory, py::arg("name"), py::arg("overload"), py::arg("args"),
        py::arg("kwargs"));
  m.def("count_explicit", &count_explicit_by_name, py::arg("name"));
  m.def("mem_on_alloc", [](int64_t dev, int64_t nbytes) { mem_on_alloc(static_cast<int>(dev), static_cast<size_t>(nbytes)); });
  m.def("mem_on_free", [](int64_t dev, int64_t nbytes) { mem_on_free(static_cast<int>(dev), static_cast<size_t>(nbytes)); });
  m.def("route_through_fallback", &route_through_fallback, py::arg("ns"), py::arg("prefix") = "");
  m.def("report_unsupported", [](const std::string& feature, const std::string& op, const std::string& msg, int kind) {
    report_unsupported(feature, op, msg, kind);
  });
}
