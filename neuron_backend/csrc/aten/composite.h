// Registering a PrivateUse1 kernel composed of ATen calls on the device tensors (no accounting of its own:
// each inner call is counted where it lands). The name goes on composite_kernels(), which a shape-only run
// reads to run the kernel on its fakes, so the same inner calls are counted as in a real run.
#pragma once

#include "accounting/accounting.h"

#include <torch/library.h>

#include <string>
#include <utility>

namespace neuron_sim {

template <class Fn>
void impl_composite(torch::Library& m, const char* name, Fn&& fn) {
  composite_kernels().push_back(std::string("aten::") + name);
  m.impl(name, std::forward<Fn>(fn));
}

}  // namespace neuron_sim
