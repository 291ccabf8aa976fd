// Unsupported features detected in the fallback (once per new signature, and again on every
// repeated call of a signature that hit one).
#pragma once

#include "accounting/op_table.h"

namespace neuron_sim {

struct UnsupportedHit {
  std::string feature, message;  // feature empty: supported
  int kind = kRuntimeError;      // ErrorKind of report_unsupported
};

UnsupportedHit check_unsupported(const OpInfo& o, const torch::jit::Stack& stack, size_t begin, uint32_t flags);

}  // namespace neuron_sim
