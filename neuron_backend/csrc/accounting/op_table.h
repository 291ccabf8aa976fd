// The op table: one OpInfo per operator seen by the fallback (schema facts, policy, counters and
// signatures). OpInfo objects live forever; their counters and signatures are guarded by g_ops_mu.
#pragma once

#include "accounting/accounting.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace neuron_sim {

// How a signature runs, decided once (on its first call) and read by every later call.
enum SigMode : uint32_t {
  kModeDecided = 1,      // the CPU kernel ran with these dtypes (or an upcast plan was found)
  kModeUpcast = 2,       // the CPU kernel lacks a dtype: run through SigInfo::plan (dtype_upcast.h)
  kModeComplexDone = 4,  // complex handling decided and reported (TORCH_NEURONX_COMPLEX_DECOMPOSE)
  kModeNoSig = 1u << 31  // accounting off: no signature, nothing cached
};

// A CPU kernel lacks a dtype: compute the tensors (and dtype arguments) of dtype from[i] as to[i],
// cast results back to out[j] (the dtypes the op returns for the original arguments; Undefined:
// keep the result's dtype).
struct UpcastPlan {
  static constexpr int kMax = 3;
  c10::ScalarType from[kMax] = {}, to[kMax] = {};
  int n = 0;
  std::vector<c10::ScalarType> out;
};

struct SigInfo {
  int64_t* calls = nullptr;  // a records counter (records.h): survives the process's death
  int site = -2;  // -2: capture pending, -1: unknown
  uint32_t flags = 0;
  uint32_t mode = 0;  // SigMode bits
  int policy = -1;    // >= 0: this signature's Policy differs from the op's (complex decomposition / CPU fallback)
  std::string unsupported;  // feature name when this signature hits an unsupported feature
  std::vector<std::string> desc;
  UpcastPlan plan;
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
  bool pad_memfmt_note = false;  // the CPU kernel allocates its result in suggest_memory_format(input)
  std::vector<int> writable_args;  // Tensor(a!) arguments (in-place self, out=)
  std::vector<int> index_args;     // integer index arguments (index, indices, ...): never upcast
  // Number arguments (schema Scalar / float, lists of them), by position: TorchNeuron lifts their
  // values to 0-d tensor inputs and keys its NEFF cache on their type only, unless its registration
  // of the op declares the argument static (docs/estimate.md, "Scalars in eager signatures").
  std::vector<std::pair<int, std::string>> number_args;
  uint64_t runtime_scalar_mask = 0;  // bit i: argument i's value is not part of the signature
  uint64_t static_arg_mask = 0;      // bit i: argument i is static (a wrapped number there keeps its value)
  int mha_mask = -1, mha_need_weights = -1, mha_avg = -1, mha_mask_type = -1;
  // Host time of this op's CPU-fallback kernel runs (ns): the cost model's fallback time (EVENTS.md).
  std::atomic<int64_t> fallback_host_ns{0};
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

// Journal a new signature (records.h) once its site id `seq` is known: op, policy, dtype flags,
// description and the slot of its counter. Nothing when the records are closed.
void journal_signature(const OpInfo& o, const SigInfo& s, int seq);
// Journal a signature's policy decided after its first call (a complex result).
void journal_signature_policy(const SigInfo& s, int policy);

// Native (with or without a NEFF) in the op policy: these get the dtype completion of dtype_upcast.h.
inline bool is_native(const OpInfo& o) { return o.policy != kFallback; }

// Complex dtypes (TORCH_NEURONX_COMPLEX_DECOMPOSE, set from Python): on (the 2.33 default for
// PyTorch >= 2.13) a complex signature is decomposed into real ops when its op is in the decomposed
// list, otherwise it runs on the CPU (CPU fallback); off, complex dtypes raise as before.
bool complex_decompose();
// The Policy a complex signature of `o` gets when decomposition is on.
int complex_policy(const OpInfo& o);

}  // namespace neuron_sim
