// The op table: every operator seen by the fallback with its policy (native / native without a
// NEFF / CPU fallback), call counts and signatures; the explicit-op counters; the factory checks;
// the statistics export read by neuron_backend/events/aggregate.py.
#include "accounting/op_table.h"

#include "accounting/callbacks.h"
#include "accounting/records.h"
#include "accounting/signatures.h"

#include <array>
#include <atomic>
#include <sstream>
#include <unordered_set>

namespace neuron_sim {

std::mutex g_ops_mu;
static std::unordered_map<const void*, OpInfo*> g_ops;  // by &op.schema()
static std::vector<OpInfo*> g_op_list;                 // in order of first use
static std::unordered_set<std::string> g_native, g_native_no_neff;
// Feature policy (set_feature_policy): complex decomposition and the memory-format notes.
static std::atomic<bool> g_complex_decompose{true};
static std::unordered_set<std::string> g_complex_decomposed, g_complex_views, g_memfmt_note_ops;
static std::unordered_set<std::string> g_static_scalars;  // "base:arg" or "base.overload:arg"
static std::atomic<bool> g_policy_set{false};  // written under g_ops_mu, atomic for any other reader
std::atomic<bool> g_accounting{true};
std::atomic<bool> g_emulate_f64{false};  // NEURON_PORT_FLOAT64=emulate: round float64 results to float32 precision

void set_accounting(bool on) { g_accounting.store(on, std::memory_order_relaxed); }
void set_emulate_float64(bool on) { g_emulate_f64.store(on, std::memory_order_relaxed); }

// ------------------------------------------------------------------ explicit-op counters
static_assert(kNumExplicitOps <= kMaxExplicit, "the counters file header holds every explicit op");
const char* const kExplicitNames[kNumExplicitOps] = {
    "aten::empty.memory_format", "aten::empty_strided", "aten::as_strided", "aten::view",
    "aten::_reshape_alias", "aten::resize_", "aten::set_", "aten::_copy_from", "aten::_copy_from_and_resize",
    "aten::_local_scalar_dense", "aten::convolution_overrideable", "aten::convolution_backward_overrideable",
    "aten::unfold"};

void count_explicit(ExplicitOp op) { records_explicit()[op].fetch_add(1, std::memory_order_relaxed); }
bool count_explicit_by_name(const std::string& name) {
  for (int i = 0; i < kNumExplicitOps; ++i) {
    if (name == kExplicitNames[i]) {
      count_explicit(static_cast<ExplicitOp>(i));
      return true;
    }
  }
  return false;
}

// ------------------------------------------------------------------ op registry and policy
static int classify(const OpInfo& o) {
  if (!g_policy_set.load(std::memory_order_relaxed)) return kNative;
  std::string full = o.overload.empty() ? o.base : o.base + "." + o.overload;
  if (g_native_no_neff.count(full) || g_native_no_neff.count(o.base)) return kNativeNoNeff;
  if (g_native.count(full) || g_native.count(o.base)) return kNative;
  return kFallback;
}

static bool listed(const std::unordered_set<std::string>& set, const OpInfo& o) {
  return set.count(o.overload.empty() ? o.base : o.base + "." + o.overload) || set.count(o.base);
}

bool complex_decompose() { return g_complex_decompose.load(std::memory_order_relaxed); }

int complex_policy(const OpInfo& o) {
  std::lock_guard<std::mutex> l(g_ops_mu);
  if (listed(g_complex_views, o)) return kNativeNoNeff;
  if (listed(g_complex_decomposed, o)) return o.policy == kFallback ? kNative : o.policy;
  return kFallback;
}

static bool static_arg(const OpInfo& o, const std::string& arg) {
  std::string full = o.overload.empty() ? o.base : o.base + "." + o.overload;
  return g_static_scalars.count(full + ":" + arg) || g_static_scalars.count(o.base + ":" + arg);
}

// Which number arguments keep their value in the signature (under g_ops_mu).
static void classify_scalars(OpInfo& o, const c10::FunctionSchema& schema) {
  o.runtime_scalar_mask = o.static_arg_mask = 0;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size() && i < 64; ++i)
    if (static_arg(o, args[i].name())) o.static_arg_mask |= 1ULL << i;
  for (const auto& [i, name] : o.number_args)
    if (i < 64 && !(o.static_arg_mask & (1ULL << i))) o.runtime_scalar_mask |= 1ULL << i;
}

static bool number_kind(c10::TypeKind k) { return k == c10::TypeKind::NumberType || k == c10::TypeKind::FloatType; }

const std::vector<std::string>& mixed_device_ops() {
  static const std::vector<std::string> names = {
      "copy_", "_copy_from", "_to_copy", "index", "index_put_", "_index_put_impl_", "index_put",
      "set_", "_foreach_copy_", "_fused_adamw_", "_fused_adam_", "_fused_sgd_"};
  return names;
}

std::vector<std::string>& composite_kernels() {
  static std::vector<std::string> names;  // a function-local static: kernels register during static init
  return names;
}

static OpInfo* make_op_info(const c10::OperatorHandle& op) {
  auto* o = new OpInfo();
  const auto& schema = op.schema();
  const auto& on = schema.operator_name();
  o->name = on.name + (on.overload_name.empty() ? "" : "." + on.overload_name);
  auto pos = on.name.find("::");
  o->base = pos == std::string::npos ? on.name : on.name.substr(pos + 2);
  o->overload = on.overload_name;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    const auto& ty = a.real_type();
    auto kind = ty->kind();
    if (kind == c10::TypeKind::OptionalType) kind = ty->castRaw<c10::OptionalType>()->getElementType()->kind();
    if (kind == c10::TypeKind::GeneratorType) o->gen_arg = static_cast<int>(i);
    if (kind == c10::TypeKind::MemoryFormatType || a.name() == "memory_format") o->memfmt_arg = static_cast<int>(i);
    if (kind == c10::TypeKind::ScalarTypeType) o->dtype_args.push_back(static_cast<int>(i));
    if ((o->base == "embedding" && a.name() == "sparse") || (o->base == "gather" && a.name() == "sparse_grad"))
      o->sparse_arg = static_cast<int>(i);
    if (a.alias_info() && a.alias_info()->isWrite()) o->writable_args.push_back(static_cast<int>(i));
    static const std::unordered_set<std::string> index_names = {"index", "indices", "idx", "offsets", "target",
                                                                "offsets2bag", "lengths", "batch_sizes"};
    if (index_names.count(a.name())) o->index_args.push_back(static_cast<int>(i));
    bool number = number_kind(kind);
    if (kind == c10::TypeKind::ListType) {
      auto el = ty->kind() == c10::TypeKind::OptionalType ? ty->castRaw<c10::OptionalType>()->getElementType() : ty;
      number = number_kind(el->castRaw<c10::ListType>()->getElementType()->kind());
    }
    if (number) o->number_args.emplace_back(static_cast<int>(i), a.name());
  }
  classify_scalars(*o, schema);
  static const std::unordered_set<std::string> mixed_ok(mixed_device_ops().begin(), mixed_device_ops().end());
  o->mixed_device_ok = mixed_ok.count(o->base) > 0;
  if (o->base == "_native_multi_head_attention") {
    o->is_mha = true;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].name() == "mask") o->mha_mask = static_cast<int>(i);
      if (args[i].name() == "need_weights") o->mha_need_weights = static_cast<int>(i);
      if (args[i].name() == "average_attn_weights") o->mha_avg = static_cast<int>(i);
      if (args[i].name() == "mask_type") o->mha_mask_type = static_cast<int>(i);
    }
  }
  o->policy = classify(*o);
  o->pad_memfmt_note = listed(g_memfmt_note_ops, *o);
  return o;
}

OpInfo* find_or_add_op(const c10::OperatorHandle& op) {
  const void* key = &op.schema();
  std::lock_guard<std::mutex> l(g_ops_mu);
  auto it = g_ops.find(key);
  if (it != g_ops.end()) return it->second;
  OpInfo* o = make_op_info(op);
  g_ops.emplace(key, o);
  g_op_list.push_back(o);
  return o;
}

// ------------------------------------------------------------------ factory checks
// Explicit factory kernels: only 64-bit, complex dtypes and memory formats need attention.
static OpInfo* g_factory_ops[kNumExplicitOps] = {};
void check_factory(ExplicitOp op, c10::IntArrayRef sizes, c10::ScalarType dtype, std::optional<c10::MemoryFormat> mf) {
  uint32_t flags = dtype_flags(dtype);
  bool bad_mf = mf.has_value() && *mf != c10::MemoryFormat::Contiguous && *mf != c10::MemoryFormat::Preserve;
  if (!flags && !bad_mf) return;
  if ((flags & kComplex) && !complex_decompose())  // decomposed: reported by the ops that use the tensor
    report_unsupported("complex", kExplicitNames[op],
                       std::string(kExplicitNames[op]) + ": complex dtypes are not supported natively on Neuron",
                       kRuntimeError);
  if (bad_mf)
    report_unsupported("memory_format", kExplicitNames[op],
                       std::string(op == kOpEmpty ? "empty" : "empty_strided") +
                           ": Neuron tensors only support contiguous or preserve memory format",
                       kRuntimeError);
  if (!(flags & (kF64 | kI64)) || !accounting_on()) return;
  uint64_t h = mix(mix(0x77, static_cast<uint64_t>(dtype)), sizes.size());
  for (auto s : sizes) h = mix(h, static_cast<uint64_t>(s));
  OpInfo* o;
  bool is_new = false;
  {
    std::lock_guard<std::mutex> l(g_ops_mu);
    if (!g_factory_ops[op]) {
      o = new OpInfo();
      o->name = kExplicitNames[op];
      o->base = op == kOpEmpty ? "empty" : "empty_strided";
      o->overload = op == kOpEmpty ? "memory_format" : "";
      o->policy = kNativeNoNeff;
      g_factory_ops[op] = o;
      g_op_list.push_back(o);
    }
    o = g_factory_ops[op];
    o->calls++;
    auto it = o->sigs.find(h);
    if (it != o->sigs.end()) {
      ++*it->second.calls;
    } else {
      SigInfo si;
      si.calls = records_new_counter(1);
      si.flags = flags;
      std::ostringstream os;
      os << dtype_short(dtype) << "[";
      for (size_t i = 0; i < sizes.size(); ++i) os << (i ? "," : "") << sizes[i];
      os << "]";
      si.desc.push_back(os.str());
      o->sigs.emplace(h, std::move(si));
      is_new = true;
    }
  }
  if (is_new) {
    int site = capture_site();
    std::lock_guard<std::mutex> l(g_ops_mu);
    auto it = o->sigs.find(h);
    if (it != o->sigs.end()) {
      it->second.site = site;
      journal_signature(*o, it->second, site);
    }
  }
}

// ------------------------------------------------------------------ statistics export
std::vector<OpStats> op_stats() {
  std::vector<OpStats> snap;
  std::lock_guard<std::mutex> l(g_ops_mu);
  for (auto* o : g_op_list) {
    // Signatures whose policy differs from the op's (complex decomposed / CPU fallback) are exported
    // as a second entry of the same op name with that policy.
    std::vector<SigStats> sigs;
    std::unordered_map<int, std::pair<int64_t, std::vector<SigStats>>> other;
    int64_t other_calls = 0;
    for (auto& kv : o->sigs) {
      const SigInfo& g = kv.second;
      SigStats st(*g.calls, g.site, g.flags, g.unsupported, g.desc);
      if (g.policy >= 0 && g.policy != o->policy) {
        auto& slot = other[g.policy];
        slot.first += *g.calls;
        slot.second.push_back(std::move(st));
        other_calls += *g.calls;
      } else {
        sigs.push_back(std::move(st));
      }
    }
    if (!sigs.empty() || other.empty() || o->calls > other_calls)
      snap.emplace_back(o->name, o->policy, o->calls - other_calls, std::move(sigs));
    for (auto& kv : other) snap.emplace_back(o->name, kv.first, kv.second.first, std::move(kv.second.second));
  }
  return snap;
}

std::vector<std::pair<std::string, int64_t>> explicit_counts() {
  std::vector<std::pair<std::string, int64_t>> out;
  for (int i = 0; i < kNumExplicitOps; ++i) out.emplace_back(kExplicitNames[i], records_explicit()[i].load());
  return out;
}

std::vector<std::pair<std::string, int64_t>> fallback_host_ns() {
  std::vector<std::pair<std::string, int64_t>> out;
  std::lock_guard<std::mutex> l(g_ops_mu);
  for (auto* o : g_op_list) {
    const int64_t ns = o->fallback_host_ns.load(std::memory_order_relaxed);
    if (ns > 0) out.emplace_back(o->name, ns);
  }
  return out;
}

void reset_stats() {
  std::lock_guard<std::mutex> l(g_ops_mu);
  for (auto* o : g_op_list) {
    o->calls = 0;
    o->fallback_host_ns.store(0, std::memory_order_relaxed);
    for (auto& kv : o->sigs) *kv.second.calls = 0;  // their slots are not reused
    o->sigs.clear();
  }
  for (int i = 0; i < kNumExplicitOps; ++i) records_explicit()[i].store(0);
  records_append("{\"kind\":\"reset\"}");  // readers drop the signatures journaled before
}

// ------------------------------------------------------------------ the journal
static const char* policy_name(int p) {
  return p == kNative ? "native" : p == kNativeNoNeff ? "native_no_neff" : "fallback";
}

void journal_signature(const OpInfo& o, const SigInfo& s, int seq) {
  if (!records_is_open()) return;
  std::string line = "{\"kind\":\"signature\",\"slot\":" + std::to_string(records_slot(s.calls)) +
                     ",\"seq\":" + std::to_string(seq) + ",\"op\":" + json_quote(o.name) + ",\"policy\":\"" +
                     policy_name(s.policy >= 0 ? s.policy : o.policy) + "\",\"dtypes\":[";
  const char* sep = "";
  for (auto [bit, name] : {std::pair<uint32_t, const char*>{kF64, "float64"}, {kI64, "int64"}, {kComplex, "complex"}})
    if (s.flags & bit) {
      line += sep + std::string("\"") + name + "\"";
      sep = ",";
    }
  line += "],\"signature\":[";
  for (size_t i = 0; i < s.desc.size(); ++i) line += (i ? "," : "") + json_quote(s.desc[i]);
  records_append(line + "]}");
}

void journal_signature_policy(const SigInfo& s, int policy) {
  if (!records_is_open()) return;
  records_append("{\"kind\":\"signature_policy\",\"slot\":" + std::to_string(records_slot(s.calls)) +
                 ",\"policy\":\"" + policy_name(policy) + "\"}");
}

void set_feature_policy(bool complex_decompose, const std::vector<std::string>& complex_decomposed,
                        const std::vector<std::string>& complex_views, const std::vector<std::string>& memfmt_note_ops,
                        const std::vector<std::string>& static_scalars) {
  std::lock_guard<std::mutex> l(g_ops_mu);
  g_static_scalars = std::unordered_set<std::string>(static_scalars.begin(), static_scalars.end());
  g_complex_decompose.store(complex_decompose, std::memory_order_relaxed);
  g_complex_decomposed = std::unordered_set<std::string>(complex_decomposed.begin(), complex_decomposed.end());
  g_complex_views = std::unordered_set<std::string>(complex_views.begin(), complex_views.end());
  g_memfmt_note_ops = std::unordered_set<std::string>(memfmt_note_ops.begin(), memfmt_note_ops.end());
  for (auto& kv : g_ops) {
    kv.second->pad_memfmt_note = listed(g_memfmt_note_ops, *kv.second);
    classify_scalars(*kv.second, *static_cast<const c10::FunctionSchema*>(kv.first));
  }
}

void set_policy(const std::vector<std::string>& native, const std::vector<std::string>& native_no_neff) {
  std::lock_guard<std::mutex> l(g_ops_mu);
  g_native = std::unordered_set<std::string>(native.begin(), native.end());
  g_native_no_neff = std::unordered_set<std::string>(native_no_neff.begin(), native_no_neff.end());
  g_policy_set.store(true, std::memory_order_relaxed);
  for (auto& kv : g_ops) kv.second->policy = classify(*kv.second);
}

}  // namespace neuron_sim
