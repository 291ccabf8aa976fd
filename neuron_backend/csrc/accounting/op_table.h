// The op table: one OpInfo per operator seen by the fallback (schema facts, policy, counters and
// signatures). OpInfo objects live forever; their counters and signatures are guarded by g_ops_mu.
#pragma once

#include "accounting/accounting.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace neuron_sim {

struct SigInfo {
  int64_t calls = 0;
  int site = -2;  // -2: capture pending, -1: unknown
  uint32_t flags = 0;
  std::string unsupported;  // feature name when this signature hits an unsupported feature
  std::vector<std::string> desc;
};

struct OpInfo {
  std::string name;  // aten::add.Tensor
  std::string base;  // add
  std::string overload;
  int policy = kFallback;
  int64_t calls = 0;
  std::unordered_map<uint64_t, SigInfo> sigs;
  // schema facts
  int gen_arg = -1, memfmt_arg = -1, sparse_arg = -1;
  std::vector<int> dtype_args;
  bool mixed_device_ok = false;
  bool is_mha = false;
  int mha_mask = -1, mha_need_weights = -1, mha_avg = -1, mha_mask_type = -1;
};

extern std::mutex g_ops_mu;
// Switches set from Python and read by every op on any thread (relaxed loads: a plain flag, no
// ordering with other data is needed).
extern std::atomic<bool> g_accounting;   // per-op accounting on (off while torch.compile traces)
extern std::atomic<bool> g_emulate_f64;  // NEURON_PORT_FLOAT64=emulate
inline bool accounting_on() { return g_accounting.load(std::memory_order_relaxed); }
inline bool emulate_f64() { return g_emulate_f64.load(std::memory_order_relaxed); }
// Find or create the OpInfo of an operator (takes g_ops_mu). The fallback caches the result per
// thread.
OpInfo* find_or_add_op(const c10::OperatorHandle& op);

}  // namespace neuron_sim
