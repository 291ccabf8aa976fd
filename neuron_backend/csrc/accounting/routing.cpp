// Runtime registrations: route ops that have no PrivateUse1 kernel through the fallback (the
// distributed c10d ops, the foreach ops, the structured ops' CPU kernels).
#include "accounting/accounting.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>

namespace neuron_sim {

static std::vector<std::unique_ptr<torch::Library>> g_libs;

// Route every op of a namespace (or every aten op with a name prefix) through the fallback on
// PrivateUse1, e.g. "c10d" for distributed, "aten::_foreach_" for the foreach ops.
int route_through_fallback(const std::string& ns, const std::string& prefix) {
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1,
                                              "neuron_backend", 0);
  int n = 0;
  c10::WarningUtils::WarningHandlerGuard guard(nullptr);
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    auto full = name.name;
    if (full.rfind(ns + "::", 0) != 0) continue;
    if (!prefix.empty() && prefix != "*structured*" && full.rfind(ns + "::" + prefix, 0) != 0) continue;
    auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || !handle->hasSchema()) continue;
    if (handle->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    if (prefix == "*structured*") {
      // ops whose PrivateUse1 entry would be the CompositeExplicitAutogradNonFunctional wrapper of a
      // structured CPU kernel: run the CPU functional / in-place kernel directly (one dispatch, no
      // second meta pass, no separate output allocation)
      if (!handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
          !handle->hasKernelForDispatchKey(c10::DispatchKey::CPU))
        continue;
    }
    std::string qual = full + (name.overload_name.empty() ? "" : "." + name.overload_name);
    lib->impl(qual.c_str(), torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
    ++n;
  }
  g_libs.push_back(std::move(lib));
  return n;
}

}  // namespace neuron_sim
