// The boxed CPU fallback with per-op accounting, and the Python bindings.
//
// Every op without an explicit PrivateUse1 kernel lands in neuron_fallback(). It
//   1. counts the call by op and by signature (op + shapes + dtypes + scalar arguments): a new
//      signature is an eager NEFF compile on Trainium, a repeated one a cache hit;
//   2. on a *new* signature only, calls into Python once to capture the user's source line;
//   3. replaces neuron tensors by zero-copy CPU aliases and redispatches to the CPU kernel;
//   4. turns CPU results back into neuron tensors without copying.
// Nothing calls Python on the hot path (a repeated signature).
#include "neuron.h"

#include <c10/core/CPUAllocator.h>
#include <ATen/native/transformers/attention.h>
#include <torch/csrc/Generator.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace neuron_sim {

// ------------------------------------------------------------------ zero-copy aliases
static void alias_deleter(void* ctx) { c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(ctx)); }

at::Tensor cpu_alias(const at::Tensor& t) {
  c10::StorageImpl* si = t.storage().unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(si);
  c10::DataPtr dp(si->data_ptr().get(), si, &alias_deleter, c10::Device(c10::kCPU));
  auto csi = c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), si->nbytes(),
                                                   std::move(dp), c10::GetCPUAllocator(), /*resizable=*/true);
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(std::move(csi)),
                                                   c10::DispatchKeySet(c10::DispatchKey::CPU), t.dtype());
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  if (t.is_neg()) impl->_set_neg(true);
  if (t.is_conj()) impl->_set_conj(true);
  return at::Tensor(std::move(impl));
}

struct WrapCtx {
  c10::StorageImpl* csi;
  size_t nbytes;
  int dev;
};
static void wrap_deleter(void* p) {
  auto* c = static_cast<WrapCtx*>(p);
  mem_on_free(c->dev, c->nbytes);
  c10::raw::intrusive_ptr::decref(c->csi);
  delete c;
}
static c10::DataPtr wrap_storage(c10::StorageImpl* csi, int dev) {
  c10::raw::intrusive_ptr::incref(csi);
  size_t n = csi->nbytes();
  mem_on_alloc(dev, n);
  return c10::DataPtr(csi->data_ptr().get(), new WrapCtx{csi, n, dev}, &wrap_deleter,
                      c10::Device(kNeuron, static_cast<c10::DeviceIndex>(dev)));
}

at::Tensor wrap_cpu_result(const at::Tensor& r, c10::DeviceIndex dev) {
  c10::StorageImpl* csi = r.storage().unsafeGetStorageImpl();
  c10::Storage nst;
  if (csi->data_ptr().get_deleter() == &alias_deleter) {
    // A view of a neuron tensor's memory: share that neuron storage.
    auto* nsi = static_cast<c10::StorageImpl*>(csi->data_ptr().get_context());
    nst = c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(nsi));
  } else {
    nst = c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), csi->nbytes(),
                                                             wrap_storage(csi, dev), neuron_allocator(), true));
  }
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(nst), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                   r.dtype());
  impl->set_sizes_and_strides(r.sizes(), r.strides(), r.storage_offset());
  if (r.is_neg()) impl->_set_neg(true);
  if (r.is_conj()) impl->_set_conj(true);
  return at::Tensor(std::move(impl));
}

// An out= argument whose CPU alias was resized or restrided by the kernel: re-point the neuron tensor.
static void sync_back(const at::Tensor& orig, const at::Tensor& alias) {
  auto* oi = orig.unsafeGetTensorImpl();
  auto* ai = alias.unsafeGetTensorImpl();
  c10::StorageImpl* asi = ai->storage().unsafeGetStorageImpl();
  c10::StorageImpl* osi = oi->storage().unsafeGetStorageImpl();
  const bool same_mem = asi->data_ptr().get_deleter() == &alias_deleter && asi->data_ptr().get_context() == osi;
  if (!same_mem) {
    osi->set_data_ptr_noswap(wrap_storage(asi, orig.device().index()));
    osi->set_nbytes(asi->nbytes());
  }
  if (oi->sizes() != ai->sizes() || oi->strides() != ai->strides() || oi->storage_offset() != ai->storage_offset())
    oi->set_sizes_and_strides(ai->sizes(), ai->strides(), ai->storage_offset());
}

// ------------------------------------------------------------------ accounting state
enum SigFlag : uint32_t { kF64 = 1, kI64 = 2, kComplex = 4, kNeuronArg = 16 };
enum Policy : int { kNative = 0, kNativeNoNeff = 1, kFallback = 2 };

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

static std::mutex g_mu;
static std::unordered_map<const void*, OpInfo*> g_ops;
static std::vector<OpInfo*> g_op_list;
static std::unordered_set<std::string> g_native, g_native_no_neff;
static bool g_policy_set = false;
static std::array<std::atomic<int64_t>, kNumExplicitOps> g_explicit{};
static const char* kExplicitNames[kNumExplicitOps] = {
    "aten::empty.memory_format", "aten::empty_strided", "aten::as_strided", "aten::view",
    "aten::_reshape_alias", "aten::resize_", "aten::set_", "aten::_copy_from", "aten::_copy_from_and_resize",
    "aten::_local_scalar_dense", "aten::convolution_overrideable", "aten::convolution_backward_overrideable",
    "aten::unfold"};
static bool g_accounting = true;
static bool g_emulate_f64 = false;  // NEURON_PORT_FLOAT64=emulate: round float64 results to float32 precision

static void round_to_f32(const at::Tensor& t) {
  if (t.defined() && t.scalar_type() == at::kDouble && t.numel() > 0) t.copy_(t.to(at::kFloat));
}

static PyObject* g_site_cb = nullptr;
static PyObject* g_unsup_cb = nullptr;

void count_explicit(ExplicitOp op) { g_explicit[op].fetch_add(1, std::memory_order_relaxed); }

static int classify(const OpInfo& o) {
  if (!g_policy_set) return kNative;
  std::string full = o.overload.empty() ? o.base : o.base + "." + o.overload;
  if (g_native_no_neff.count(full) || g_native_no_neff.count(o.base)) return kNativeNoNeff;
  if (g_native.count(full) || g_native.count(o.base)) return kNative;
  return kFallback;
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
  }
  static const std::unordered_set<std::string> mixed_ok = {
      "copy_", "_copy_from", "_to_copy", "index", "index_put_", "_index_put_impl_", "index_put",
      "set_", "_foreach_copy_", "_fused_adamw_", "_fused_adam_", "_fused_sgd_"};
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
  return o;
}

static OpInfo* get_op_info_locked(const c10::OperatorHandle& op) {
  const void* key = &op.schema();
  std::lock_guard<std::mutex> l(g_mu);
  auto it = g_ops.find(key);
  if (it != g_ops.end()) return it->second;
  OpInfo* o = make_op_info(op);
  g_ops.emplace(key, o);
  g_op_list.push_back(o);
  return o;
}

// OpInfo objects live forever, so each thread keeps a lock-free lookup cache.
static OpInfo* get_op_info(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, OpInfo*> cache;
  const void* key = &op.schema();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  OpInfo* o = get_op_info_locked(op);
  cache.emplace(key, o);
  return o;
}

// ------------------------------------------------------------------ signatures
static inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}
static inline uint32_t dtype_flags(c10::ScalarType st) {
  switch (st) {
    case c10::ScalarType::Double: return kF64;
    case c10::ScalarType::Long: return kI64;
    case c10::ScalarType::ComplexFloat:
    case c10::ScalarType::ComplexDouble:
    case c10::ScalarType::ComplexHalf: return kComplex;
    default: return 0;
  }
}
static uint64_t hash_tensor(uint64_t h, const at::Tensor& t, uint32_t& flags) {
  if (!t.defined()) return mix(h, 0x11);
  auto st = t.scalar_type();
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
    // A Python scalar (x * 0.5): hash its value like a Scalar argument; its double/long dtype is not
    // a 64-bit tensor reaching the device.
    uint64_t b = 0;
    std::memcpy(&b, t.const_data_ptr(), std::min<size_t>(t.element_size(), sizeof b));
    return mix(mix(h, 0x12 + static_cast<uint64_t>(st)), b);
  }
  flags |= dtype_flags(st);
  if (t.device().type() == kNeuron) flags |= kNeuronArg;
  h = mix(h, static_cast<uint64_t>(st) + 0x100);
  h = mix(h, static_cast<uint64_t>(t.dim()));
  for (auto s : t.sizes()) h = mix(h, static_cast<uint64_t>(s));
  h = mix(h, t.is_contiguous() ? 3 : 5);
  h = mix(h, static_cast<uint64_t>(t.device().type()));
  return h;
}
static uint64_t hash_ivalue(uint64_t h, const c10::IValue& v, uint32_t& flags) {
  if (v.isTensor()) return hash_tensor(h, v.toTensor(), flags);
  if (v.isInt()) return mix(mix(h, 0x21), static_cast<uint64_t>(v.toInt()));
  if (v.isDouble()) {
    double d = v.toDouble();
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return mix(mix(h, 0x22), b);
  }
  if (v.isBool()) return mix(h, v.toBool() ? 0x23 : 0x24);
  if (v.isNone()) return mix(h, 0x25);
  if (v.isComplexDouble()) {
    flags |= kComplex;
    return mix(h, 0x26);
  }
  if (v.isIntList()) {
    h = mix(h, 0x27);
    for (int64_t x : v.toIntList()) h = mix(h, static_cast<uint64_t>(x));
    return h;
  }
  if (v.isList()) {
    h = mix(h, 0x28);
    for (const c10::IValue& e : v.toListRef()) h = hash_ivalue(h, e, flags);
    return h;
  }
  if (v.isString()) return mix(mix(h, 0x29), std::hash<std::string_view>()(v.toStringView()));
  if (v.isDevice()) return mix(mix(h, 0x2a), static_cast<uint64_t>(v.toDevice().type()) * 1000 + v.toDevice().index());
  return mix(h, 0x30 + static_cast<uint64_t>(v.tagKind().size()));
}

static const char* dtype_short(c10::ScalarType st) {
  switch (st) {
    case c10::ScalarType::Float: return "f32";
    case c10::ScalarType::Double: return "f64";
    case c10::ScalarType::Half: return "f16";
    case c10::ScalarType::BFloat16: return "bf16";
    case c10::ScalarType::Long: return "i64";
    case c10::ScalarType::Int: return "i32";
    case c10::ScalarType::Short: return "i16";
    case c10::ScalarType::Char: return "i8";
    case c10::ScalarType::Byte: return "u8";
    case c10::ScalarType::Bool: return "b8";
    case c10::ScalarType::ComplexFloat: return "c64";
    case c10::ScalarType::ComplexDouble: return "c128";
    default: return c10::toString(st);
  }
}
static std::string describe(const c10::IValue& v, int depth = 0) {
  std::ostringstream os;
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (!t.defined()) return "None";
    os << dtype_short(t.scalar_type()) << "[";
    for (int64_t i = 0; i < t.dim(); ++i) os << (i ? "," : "") << t.size(i);
    os << "]";
    if (!t.is_contiguous()) os << "nc";
    if (t.device().type() == c10::kCPU) os << "@cpu";
    return os.str();
  }
  if (v.isList() && depth < 2) {
    const auto& l = v.toListRef();
    os << "[";
    size_t n = l.size();
    for (size_t i = 0; i < n && i < 8; ++i) os << (i ? ", " : "") << describe(l[i], depth + 1);
    if (n > 8) os << ", ...+" << (n - 8);
    os << "]";
    return os.str();
  }
  if (v.isString()) return "'" + std::string(v.toStringView()) + "'";
  if (v.isDevice()) return v.toDevice().str();
  if (v.isGenerator()) return "<generator>";
  os << v;
  return os.str();
}

// ------------------------------------------------------------------ Python callbacks (slow path only)
static bool python_ok() { return Py_IsInitialized() && !_Py_IsFinalizing(); }

static int capture_site() {
  if (!g_site_cb || !python_ok()) return -1;
  PyGILState_STATE st = PyGILState_Ensure();
  PyObject *et, *ev, *tb;
  PyErr_Fetch(&et, &ev, &tb);
  int site = -1;
  PyObject* r = PyObject_CallNoArgs(g_site_cb);
  if (r) {
    site = static_cast<int>(PyLong_AsLong(r));
    Py_DECREF(r);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  PyErr_Restore(et, ev, tb);
  PyGILState_Release(st);
  return site;
}

void report_unsupported(const std::string& feature, const std::string& op, const std::string& message,
                        int error_kind) {
  bool raise = true;
  if (g_unsup_cb && python_ok()) {
    PyGILState_STATE st = PyGILState_Ensure();
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyObject* r = PyObject_CallFunction(g_unsup_cb, "sss", feature.c_str(), op.c_str(), message.c_str());
    if (r) {
      raise = PyObject_IsTrue(r) == 1;
      Py_DECREF(r);
    }
    if (PyErr_Occurred()) PyErr_Clear();
    PyErr_Restore(et, ev, tb);
    PyGILState_Release(st);
  }
  if (!raise) return;
  const std::string msg = "[neuron-port simulator] " + message;
  if (error_kind == 1) TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
  if (error_kind == 2) TORCH_CHECK_TYPE(false, msg);
  TORCH_CHECK(false, msg);
}

struct UnsupportedHit {
  std::string feature, message;
  int kind = 0;
};

// Decide, once per signature, whether the call hits an unsupported feature.
static UnsupportedHit check_unsupported(const OpInfo& o, const torch::jit::Stack& stack, size_t begin,
                                        uint32_t flags) {
  UnsupportedHit u;
  const std::string short_name = o.base;
  if (flags & kComplex) {
    u = {"complex", o.name + ": complex dtypes are not supported natively on Neuron", 0};
    return u;
  }
  if (o.memfmt_arg >= 0) {
    const auto& v = stack[begin + o.memfmt_arg];
    if (v.isInt()) {
      auto mf = static_cast<c10::MemoryFormat>(v.toInt());
      if (mf != c10::MemoryFormat::Contiguous && mf != c10::MemoryFormat::Preserve)
        return {"memory_format", short_name + ": Neuron tensors only support contiguous or preserve memory format", 0};
    }
  }
  if (o.sparse_arg >= 0) {
    const auto& v = stack[begin + o.sparse_arg];
    if (v.isBool() && v.toBool()) {
      if (o.base == "embedding")
        return {"sparse_embedding", "Sparse is currently not supported for embedding.", 1};
      return {"gather_sparse_grad", "sparse_grad=True is not supported on Neuron", 1};
    }
  }
  if (o.is_mha) {
    bool has_mask = o.mha_mask >= 0 && stack[begin + o.mha_mask].isTensor() &&
                    stack[begin + o.mha_mask].toTensor().defined();
    int64_t mask_type = -1;
    if (o.mha_mask_type >= 0 && stack[begin + o.mha_mask_type].isInt())
      mask_type = stack[begin + o.mha_mask_type].toInt();
    if (has_mask && mask_type != 1)
      return {"mha_arbitrary_mask",
              "Arbitrary mask tensors not yet supported in Neuron implementation. Please use mask_type=1 for "
              "causal masking or mask=None.",
              1};
    bool need = o.mha_need_weights >= 0 && stack[begin + o.mha_need_weights].isBool() &&
                stack[begin + o.mha_need_weights].toBool();
    bool avg = o.mha_avg < 0 || !stack[begin + o.mha_avg].isBool() || stack[begin + o.mha_avg].toBool();
    if (need && !avg)
      return {"mha_per_head_weights",
              "Returning per-head attention weights not yet supported in Neuron implementation. Please use "
              "average_attn_weights=True or need_weights=False.",
              1};
  }
  return u;
}

// Count one call; slow path (site capture, unsupported check) only for a new signature.
static void account(OpInfo* o, const torch::jit::Stack& stack, size_t begin, size_t nargs) {
  uint32_t flags = 0;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < nargs; ++i) h = hash_ivalue(h, stack[begin + i], flags);
  for (int i : o->dtype_args) {
    const auto& v = stack[begin + i];
    if (v.isInt()) flags |= dtype_flags(static_cast<c10::ScalarType>(v.toInt()));
  }
  std::string unsup;
  {
    std::lock_guard<std::mutex> l(g_mu);
    o->calls++;
    auto it = o->sigs.find(h);
    if (it != o->sigs.end()) {
      it->second.calls++;
      if (it->second.unsupported.empty()) return;
      unsup = it->second.unsupported;
    }
  }
  if (!unsup.empty()) {  // repeated signature of an unsupported call: report (raises by default)
    auto u = check_unsupported(*o, stack, begin, flags);
    report_unsupported(u.feature, o->name, u.message, u.kind);
    return;
  }
  // New signature: describe it, capture the user site, check unsupported features.
  SigInfo si;
  si.calls = 1;
  si.flags = flags;
  for (size_t i = 0; i < nargs; ++i) si.desc.push_back(describe(stack[begin + i]));
  for (int i : o->dtype_args)  // ScalarType arguments arrive as ints: print their names
    if (stack[begin + i].isInt()) si.desc[i] = c10::toString(static_cast<c10::ScalarType>(stack[begin + i].toInt()));
  if (o->memfmt_arg >= 0 && stack[begin + o->memfmt_arg].isInt()) {
    std::ostringstream mf;
    mf << static_cast<c10::MemoryFormat>(stack[begin + o->memfmt_arg].toInt());
    si.desc[o->memfmt_arg] = mf.str();
  }
  auto u = check_unsupported(*o, stack, begin, flags);
  si.unsupported = u.feature;
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto res = o->sigs.emplace(h, si);
    if (!res.second) {  // another thread inserted it meanwhile
      res.first->second.calls++;
      if (u.feature.empty()) return;
    }
  }
  int site = capture_site();
  {
    std::lock_guard<std::mutex> l(g_mu);
    auto it = o->sigs.find(h);
    if (it != o->sigs.end() && it->second.site == -2) it->second.site = site;
  }
  if (!u.feature.empty()) report_unsupported(u.feature, o->name, u.message, u.kind);
}

// Explicit factory kernels: only 64-bit, complex dtypes and memory formats need attention.
static OpInfo* g_factory_ops[kNumExplicitOps] = {};
void check_factory(ExplicitOp op, c10::IntArrayRef sizes, c10::ScalarType dtype, std::optional<c10::MemoryFormat> mf) {
  uint32_t flags = dtype_flags(dtype);
  bool bad_mf = mf.has_value() && *mf != c10::MemoryFormat::Contiguous && *mf != c10::MemoryFormat::Preserve;
  if (!flags && !bad_mf) return;
  if (flags & kComplex)
    report_unsupported("complex", kExplicitNames[op],
                       std::string(kExplicitNames[op]) + ": complex dtypes are not supported natively on Neuron", 0);
  if (bad_mf)
    report_unsupported("memory_format", kExplicitNames[op],
                       std::string(op == kOpEmpty ? "empty" : "empty_strided") +
                           ": Neuron tensors only support contiguous or preserve memory format",
                       0);
  if (!(flags & (kF64 | kI64)) || !g_accounting) return;
  uint64_t h = mix(mix(0x77, static_cast<uint64_t>(dtype)), sizes.size());
  for (auto s : sizes) h = mix(h, static_cast<uint64_t>(s));
  OpInfo* o;
  bool is_new = false;
  {
    std::lock_guard<std::mutex> l(g_mu);
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
      it->second.calls++;
    } else {
      SigInfo si;
      si.calls = 1;
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
    std::lock_guard<std::mutex> l(g_mu);
    auto it = o->sigs.find(h);
    if (it != o->sigs.end()) it->second.site = site;
  }
}

// ------------------------------------------------------------------ the fallback
// A runner replaces the CPU redispatch: it pops the (CPU-aliased) arguments and pushes the returns.
using Runner = void (*)(torch::jit::Stack*);

static void fallback_impl(const c10::OperatorHandle& op, torch::jit::Stack* stack, Runner runner = nullptr) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t begin = stack->size() - nargs;
  OpInfo* o = get_op_info(op);
  if (g_accounting) account(o, *stack, begin, nargs);

  // Replace neuron tensors by CPU aliases.
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 6> aliased;  // (neuron original, cpu alias)
  c10::SmallVector<c10::TensorImpl*, 4> cpu_inputs;
  c10::DeviceIndex dev = -1;
  bool explicit_cpu = false, saw_cpu_tensor = false;
  c10::Device cpu_dev(c10::kCPU);
  auto note_neuron = [&](const at::Tensor& t) {
    auto d = t.device().index();
    if (dev < 0) {
      dev = d;
    } else if (d != dev && !o->mixed_device_ok) {
      TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, neuron:",
                  static_cast<int>(dev), " and neuron:", static_cast<int>(d), "!");
    }
  };
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = (*stack)[begin + i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) continue;
      if (t.device().type() == kNeuron) {
        note_neuron(t);
        at::Tensor a = cpu_alias(t);
        aliased.emplace_back(t, a);
        v = c10::IValue(std::move(a));
      } else {
        cpu_inputs.push_back(t.unsafeGetTensorImpl());
        if (t.dim() > 0 && t.device().type() == c10::kCPU) saw_cpu_tensor = true;
      }
    } else if (v.isList()) {
      c10::List<c10::IValue> l = v.toList();
      bool any = false;
      for (size_t j = 0; j < l.size(); ++j) {
        c10::IValue e = l.get(j);
        if (e.isTensor() && e.toTensor().defined()) {
          if (e.toTensor().device().type() == kNeuron) {
            any = true;
          } else if (e.toTensor().dim() > 0) {
            saw_cpu_tensor = true;
          }
        }
      }
      if (any) {
        c10::List<c10::IValue> nl = l.copy();
        for (size_t j = 0; j < nl.size(); ++j) {
          c10::IValue e = nl.get(j);
          if (e.isTensor() && e.toTensor().defined() && e.toTensor().device().type() == kNeuron) {
            note_neuron(e.toTensor());
            nl.set(j, c10::IValue(cpu_alias(e.toTensor())));
          }
        }
        v = c10::IValue(nl);
      }
    } else if (v.isDevice()) {
      auto d = v.toDevice();
      if (d.type() == kNeuron) {
        if (d.index() >= 0) dev = d.index();
        v = c10::IValue(cpu_dev);
      } else if (d.type() == c10::kCPU) {
        explicit_cpu = true;
      }
    } else if (v.isGenerator()) {
      v = c10::IValue(cpu_generator_of(v.toGenerator()));
    }
  }
  if (saw_cpu_tensor && dev >= 0 && !o->mixed_device_ok && !explicit_cpu) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, neuron:",
                static_cast<int>(dev), " and cpu!");
  }
  if (dev < 0) dev = current_device();
  if (o->gen_arg >= 0 && (*stack)[begin + o->gen_arg].isNone())
    (*stack)[begin + o->gen_arg] = c10::IValue(cpu_generator_of(default_generator(dev)));

  if (runner) {
    runner(stack);
  } else {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  }

  // Results back to neuron.
  auto convert = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined() || r.device().type() != c10::kCPU) return r;
    if (g_emulate_f64 && !explicit_cpu) round_to_f32(r);  // Trainium computes float64 in float32
    for (auto& p : aliased)
      if (p.second.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) return p.first;
    for (auto* ci : cpu_inputs)
      if (ci == r.unsafeGetTensorImpl()) return r;
    if (explicit_cpu) return r;
    if (c10::isComplexType(r.scalar_type()))  // e.g. torch.fft on a real input
      report_unsupported("complex", o->name, o->name + ": complex dtypes are not supported natively on Neuron", 0);
    if (r.layout() != c10::kStrided) {
      report_unsupported("sparse", o->name, "Sparse tensors are not supported on Neuron (" + o->name + ")", 1);
      return r;  // record mode: the sparse result stays on the CPU
    }
    return wrap_cpu_result(r, dev);
  };
  const size_t nret = schema.returns().size();
  const size_t rbegin = stack->size() - nret;
  for (size_t j = 0; j < nret; ++j) {
    c10::IValue& v = (*stack)[rbegin + j];
    if (v.isTensor()) {
      v = c10::IValue(convert(v.toTensor()));
    } else if (v.isList()) {
      c10::List<c10::IValue> l = v.toList();
      c10::List<c10::IValue> nl = l.copy();
      for (size_t k = 0; k < nl.size(); ++k) {
        c10::IValue e = nl.get(k);
        if (e.isTensor()) nl.set(k, c10::IValue(convert(e.toTensor())));
      }
      v = c10::IValue(nl);
    }
  }
  // out= arguments (or in-place metadata ops) whose CPU alias the kernel resized or restrided.
  for (auto& p : aliased) {
    const auto* ai = p.second.unsafeGetTensorImpl();
    const auto* oi = p.first.unsafeGetTensorImpl();
    if (ai->sizes() != oi->sizes() || ai->storage_offset() != oi->storage_offset() ||
        ai->strides() != oi->strides() ||
        ai->storage().unsafeGetStorageImpl()->data_ptr().get_deleter() != &alias_deleter)
      sync_back(p.first, p.second);
  }
}

void neuron_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) { fallback_impl(op, stack); }

// ------------------------------------------------------------------ SDPA through the "overrideable" backend
// Like TorchNeuron (csrc/aten/SdpBackendSelection.cpp), 4-D SDPA on neuron selects the overrideable
// backend; the simulator computes it with PyTorch's CPU flash-attention kernels on the aliases.
static void sdpa_fwd_runner(torch::jit::Stack* s) {
  auto a = torch::jit::last(*s, 8);
  at::Tensor q = a[0].toTensor(), k = a[1].toTensor(), v = a[2].toTensor();
  std::optional<at::Tensor> bias;
  if (a[3].isTensor() && a[3].toTensor().defined()) bias = a[3].toTensor();
  double dropout = a[4].toDouble();
  bool causal = a[5].toBool(), debug = a[6].toBool();
  std::optional<double> scale;
  if (!a[7].isNone()) scale = a[7].toDouble();
  TORCH_CHECK_NOT_IMPLEMENTED(!debug, "[neuron-port simulator] Debug mask not supported in Neuron implementation.");
  auto res = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout, causal, bias, scale);
  int64_t lq = q.size(-2), lk = k.size(-2);
  torch::jit::drop(*s, 8);
  torch::jit::push(*s, std::get<0>(res), std::get<1>(res), at::Tensor(), at::Tensor(), c10::IValue(lq),
                   c10::IValue(lk), at::Tensor(), at::Tensor(), at::Tensor());
}
static void sdpa_bwd_runner(torch::jit::Stack* s) {
  auto a = torch::jit::last(*s, 17);
  std::optional<at::Tensor> bias;
  if (a[4].isTensor() && a[4].toTensor().defined()) bias = a[4].toTensor();
  std::optional<double> scale;
  if (!a[16].isNone()) scale = a[16].toDouble();
  auto res = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      a[0].toTensor(), a[1].toTensor(), a[2].toTensor(), a[3].toTensor(), a[6].toTensor(), a[7].toTensor(),
      a[12].toDouble(), a[13].toBool(), bias, scale);
  torch::jit::drop(*s, 17);
  torch::jit::push(*s, std::get<0>(res), std::get<1>(res), std::get<2>(res), at::Tensor());
}
static void sdpa_fwd(const c10::OperatorHandle& op, torch::jit::Stack* stack) { fallback_impl(op, stack, &sdpa_fwd_runner); }
static void sdpa_bwd(const c10::OperatorHandle& op, torch::jit::Stack* stack) { fallback_impl(op, stack, &sdpa_bwd_runner); }

static int64_t neuron_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const std::optional<at::Tensor>& /*mask*/, double dropout_p, bool /*is_causal*/,
                                 std::optional<double> /*scale*/, bool enable_gqa) {
  auto fp = [](const at::Tensor& t) {
    auto st = t.scalar_type();
    return st == at::kFloat || st == at::kBFloat16 || st == at::kHalf;
  };
  bool ok = dropout_p == 0.0 && !enable_gqa && q.dim() == 4 && k.dim() == 4 && v.dim() == 4 &&
            q.size(1) == k.size(1) && k.size(1) == v.size(1) && fp(q) && q.scalar_type() == k.scalar_type() &&
            q.scalar_type() == v.scalar_type();
  return ok ? static_cast<int64_t>(4) /* SDPBackend::overrideable */ : static_cast<int64_t>(0) /* math */;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", torch::CppFunction::makeFromBoxedFunction<&sdpa_fwd>());
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         torch::CppFunction::makeFromBoxedFunction<&sdpa_bwd>());
}

// ------------------------------------------------------------------ runtime registrations
static std::vector<std::unique_ptr<torch::Library>> g_libs;

// Route every op of a namespace (or every aten op with a name prefix) through the fallback on
// PrivateUse1, e.g. "c10d" for distributed, "aten::_foreach_" for the foreach ops.
static int route_through_fallback(const std::string& ns, const std::string& prefix) {
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

// ------------------------------------------------------------------ stats export
static py::list op_stats() {
  py::list out;
  std::vector<std::tuple<std::string, int, int64_t, std::vector<std::tuple<int64_t, int, uint32_t, std::string,
                                                                           std::vector<std::string>>>>>
      snap;
  {
    std::lock_guard<std::mutex> l(g_mu);
    for (auto* o : g_op_list) {
      std::vector<std::tuple<int64_t, int, uint32_t, std::string, std::vector<std::string>>> sigs;
      for (auto& kv : o->sigs)
        sigs.emplace_back(kv.second.calls, kv.second.site, kv.second.flags, kv.second.unsupported, kv.second.desc);
      snap.emplace_back(o->name, o->policy, o->calls, std::move(sigs));
    }
  }
  for (auto& s : snap) {
    py::list sigs;
    for (auto& g : std::get<3>(s))
      sigs.append(py::make_tuple(std::get<0>(g), std::get<1>(g), std::get<2>(g), std::get<3>(g), std::get<4>(g)));
    out.append(py::make_tuple(std::get<0>(s), std::get<1>(s), std::get<2>(s), sigs));
  }
  return out;
}

static void reset_stats() {
  std::lock_guard<std::mutex> l(g_mu);
  for (auto* o : g_op_list) {
    o->calls = 0;
    o->sigs.clear();
  }
  for (auto& c : g_explicit) c.store(0);
}

static void set_policy(const std::vector<std::string>& native, const std::vector<std::string>& native_no_neff) {
  std::lock_guard<std::mutex> l(g_mu);
  g_native = std::unordered_set<std::string>(native.begin(), native.end());
  g_native_no_neff = std::unordered_set<std::string>(native_no_neff.begin(), native_no_neff.end());
  g_policy_set = true;
  for (auto& kv : g_ops) kv.second->policy = classify(*kv.second);
}

}  // namespace neuron_sim

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &neuron_sim::neuron_sdp_choice)
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace neuron_sim;
  m.doc() = "neuron-port simulated neuron device (C++ core)";
  m.def("set_device_count", &set_device_count);
  m.def("device_count", &device_count);
  m.def("current_device", []() { return static_cast<int>(current_device()); });
  m.def("set_device", [](int d) { set_current_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("set_policy", &set_policy);
  m.def("set_callbacks", [](py::object site_cb, py::object unsup_cb) {
    Py_XDECREF(g_site_cb);
    Py_XDECREF(g_unsup_cb);
    g_site_cb = site_cb.is_none() ? nullptr : site_cb.release().ptr();
    g_unsup_cb = unsup_cb.is_none() ? nullptr : unsup_cb.release().ptr();
  });
  m.def("set_accounting", [](bool on) { g_accounting = on; });
  m.def("set_emulate_float64", [](bool on) { g_emulate_f64 = on; });
  m.def("op_stats", &op_stats);
  m.def("explicit_counts", []() {
    py::dict d;
    for (int i = 0; i < kNumExplicitOps; ++i) d[kExplicitNames[i]] = g_explicit[i].load();
    return d;
  });
  m.def("reset_stats", &reset_stats);
  m.def("memory_stats", [](int dev) {
    TORCH_CHECK(dev >= 0 && dev < kMaxDevices, "Invalid device id: ", dev);
    auto s = mem_stats(dev);
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
  m.def("reset_peak_memory_stats", [](int dev) { mem_reset_peak(dev); });
  m.def("empty_cache", [](int dev) { mem_empty_cache(dev); });
  m.def("default_generator", [](int dev) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(dev))));
  });
  m.def("route_through_fallback", &route_through_fallback, py::arg("ns"), py::arg("prefix") = "");
  m.def("report_unsupported", [](const std::string& feature, const std::string& op, const std::string& msg, int kind) {
    report_unsupported(feature, op, msg, kind);
  });
}
