// The boxed CPU fallback with per-op accounting.
//
// Every op without an explicit PrivateUse1 kernel lands in neuron_fallback(). It
//   1. counts the call by op and by signature (op + shapes + dtypes + integer and static arguments'
//      values, other numbers' types: signatures.h): a new
//      signature is an eager NEFF compile on Trainium, a repeated one a cache hit;
//   2. on a *new* signature only, calls into Python once to capture the user's source line;
//   3. replaces neuron tensors by zero-copy CPU aliases and redispatches to the CPU kernel;
//   4. turns CPU results back into neuron tensors without copying.
// Nothing calls Python on the hot path (a repeated signature). The per-call code (op lookup,
// account(), fallback_impl()) stays in this one file so the compiler can inline it as before.
#include "accounting/accounting.h"

#include "accounting/alias.h"
#include "accounting/callbacks.h"
#include "accounting/dtype_upcast.h"
#include "accounting/op_table.h"
#include "accounting/records.h"
#include "accounting/signatures.h"
#include "accounting/unsupported.h"
#include "runtime/device.h"
#include "runtime/generator.h"

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>

namespace neuron_sim {

static void round_to_f32(const at::Tensor& t) {
  if (t.defined() && t.scalar_type() == at::kDouble && t.numel() > 0) t.copy_(t.to(at::kFloat));
}

// OpInfo objects live forever, so each thread keeps a lock-free lookup cache.
static OpInfo* get_op_info(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const void*, OpInfo*> cache;
  const void* key = &op.schema();
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  OpInfo* o = find_or_add_op(op);
  cache.emplace(key, o);
  return o;
}

// What a call needs to know about its signature: the hash (to update the signature's decisions in
// the slow path) and its SigMode bits.
struct Decision {
  uint64_t hash;
  uint32_t mode;
};

// Slow path of a new signature: the reports that do not raise (once per signature).
C10_NOINLINE static void note_complex(const OpInfo& o, int policy) {
  if (policy == kFallback) {
    report_note("complex", o.name,
                o.name + ": complex op without a framework decomposition: runs on the CPU on Trainium (CPU "
                         "fallback; TORCH_NEURONX_COMPLEX_DECOMPOSE=1, the default for PyTorch >= 2.13)",
                "cpu_fallback");
  } else {
    report_note("complex", o.name,
                o.name + ": complex dtype, decomposed into real ops on Trainium (TORCH_NEURONX_COMPLEX_DECOMPOSE=1, "
                         "the default for PyTorch >= 2.13; with 0 it raises \"complex dtypes are not supported "
                         "natively on Neuron\")",
                "decomposed");
  }
}
C10_NOINLINE static bool pad_memfmt_hit(const torch::jit::Stack& stack, size_t begin, size_t nargs) {
  if (nargs == 0 || !stack[begin].isTensor()) return false;
  const at::Tensor& t = stack[begin].toTensor();
  return t.defined() && t.dim() >= 4 && !t.is_contiguous() &&
         t.suggest_memory_format() != c10::MemoryFormat::Contiguous;
}
C10_NOINLINE static void note_pad_memfmt(const OpInfo& o) {
  report_note("memory_format", o.name,
              o.base + ": a permuted (channels_last) input makes PyTorch's kernel allocate a channels_last "
                       "result, and Neuron tensors only support contiguous or preserve memory format; TorchNeuron "
                       "runs " + o.base + " natively, so the simulator runs it (unconfirmed: not documented "
                       "whether TorchNeuron raises)",
              "unconfirmed");
}

// Count one call; slow path (site capture, unsupported check, reports) only for a new signature.
static Decision account(OpInfo* o, const torch::jit::Stack& stack, size_t begin, size_t nargs) {
  uint32_t flags = 0;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < nargs; ++i) {
    uint64_t bit = i < 64 ? 1ULL << i : 0;
    if (o->runtime_scalar_mask & bit) h = hash_runtime_scalar(h, stack[begin + i], flags);
    else h = hash_ivalue(h, stack[begin + i], flags, (o->static_arg_mask & bit) != 0);
  }
  for (int i : o->dtype_args) {
    const auto& v = stack[begin + i];
    if (v.isInt()) flags |= dtype_flags(static_cast<c10::ScalarType>(v.toInt()));
  }
  std::string unsup;
  uint32_t mode = 0;
  {
    std::lock_guard<std::mutex> l(g_ops_mu);
    o->calls++;
    auto it = o->sigs.find(h);
    if (it != o->sigs.end()) {
      ++*it->second.calls;
      if (it->second.unsupported.empty()) return {h, it->second.mode};
      unsup = it->second.unsupported;
      mode = it->second.mode;
    }
  }
  if (!unsup.empty()) {  // repeated signature of an unsupported call: report (raises by default)
    auto u = check_unsupported(*o, stack, begin, flags);
    report_unsupported(u.feature, o->name, u.message, u.kind);
    return {h, mode};
  }
  // New signature: describe it, capture the user site, check unsupported features.
  SigInfo si;
  si.calls = records_new_counter(1);
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
  // Native ops probe their dtypes on this first call (dtype_upcast.h); the others run as they are.
  if (!is_native(*o)) si.mode |= kModeDecided;
  int cpolicy = -1;
  if ((flags & kComplex) && u.feature.empty() && complex_decompose()) {  // decomposed, or a CPU fallback
    cpolicy = complex_policy(*o);
    si.mode |= kModeComplexDone;
    if (cpolicy != o->policy) si.policy = cpolicy;
  }
  const bool pad_note = o->pad_memfmt_note && pad_memfmt_hit(stack, begin, nargs);
  {
    std::lock_guard<std::mutex> l(g_ops_mu);
    auto res = o->sigs.emplace(h, si);
    if (!res.second) {  // another thread inserted it meanwhile
      ++*res.first->second.calls;
      if (u.feature.empty()) return {h, res.first->second.mode};
    }
  }
  int site = capture_site();
  {
    std::lock_guard<std::mutex> l(g_ops_mu);
    auto it = o->sigs.find(h);
    if (it != o->sigs.end() && it->second.site == -2) {
      it->second.site = site;
      journal_signature(*o, it->second, site);
    }
  }
  if (!u.feature.empty()) report_unsupported(u.feature, o->name, u.message, u.kind);
  if (cpolicy >= 0) note_complex(*o, cpolicy);
  if (pad_note) note_pad_memfmt(*o);
  return {h, si.mode};
}

// A complex result of a signature whose arguments were not complex (view_as_complex, polar, fft):
// decided here, once per signature.
C10_NOINLINE static void on_complex_result(OpInfo* o, Decision& d) {
  if (!complex_decompose()) {
    report_unsupported("complex", o->name, o->name + ": complex dtypes are not supported natively on Neuron",
                       kRuntimeError);
    return;
  }
  if (d.mode & kModeNoSig) return;  // accounting off (a compiled graph runs): nothing to record
  const int cpolicy = complex_policy(*o);
  bool first = false;
  {
    std::lock_guard<std::mutex> l(g_ops_mu);
    auto it = o->sigs.find(d.hash);
    if (it != o->sigs.end() && !(it->second.mode & kModeComplexDone)) {
      it->second.mode |= kModeComplexDone;
      if (cpolicy != o->policy) {
        it->second.policy = cpolicy;
        journal_signature_policy(it->second, cpolicy);
      }
      first = true;
    }
  }
  d.mode |= kModeComplexDone;
  if (first) note_complex(*o, cpolicy);
}

// The CPU kernel call when the signature is not a plain "run it" (slow path): a new signature of a
// native op probes its dtypes, an upcast signature runs through its plan.
C10_NOINLINE static void run_cold(const c10::OperatorHandle& op, torch::jit::Stack* stack, OpInfo* o, Decision& d) {
  if (d.mode & kModeUpcast) {
    UpcastPlan plan;
    {
      std::lock_guard<std::mutex> l(g_ops_mu);
      auto it = o->sigs.find(d.hash);
      if (it != o->sigs.end()) plan = it->second.plan;
    }
    run_upcast(op, stack, *o, plan);
    return;
  }
  if (!is_native(*o)) {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    return;
  }
  const bool cache = !(d.mode & kModeNoSig);
  UpcastPlan plan;
  const bool up = probe_dtypes(op, stack, *o, /*backup=*/cache, &plan);
  if (!cache) return;
  std::lock_guard<std::mutex> l(g_ops_mu);
  auto it = o->sigs.find(d.hash);
  if (it != o->sigs.end()) {
    it->second.mode |= kModeDecided | (up ? kModeUpcast : 0u);
    if (up) it->second.plan = std::move(plan);
  }
}

// ------------------------------------------------------------------ the fallback
static void fallback_impl(const c10::OperatorHandle& op, torch::jit::Stack* stack, Runner runner = nullptr) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t begin = stack->size() - nargs;
  OpInfo* o = get_op_info(op);
  Decision d = accounting_on() ? account(o, *stack, begin, nargs) : Decision{0, kModeNoSig};

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
        // a copy to a device this process does not have fails, as on Trainium (one core per process
        // under torchrun: `.to("neuron:1")` on rank 1)
        if (d.index() >= 0) dev = check_device_index(d.index(), "device");
        v = c10::IValue(cpu_dev);
      } else if (d.type() == c10::kCPU) {
        explicit_cpu = true;
      }
    }
  }
  if (saw_cpu_tensor && dev >= 0 && !o->mixed_device_ok && !explicit_cpu) {
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, neuron:",
                static_cast<int>(dev), " and cpu!");
  }
  if (dev < 0) dev = current_device();
  // A random op draws from its generator argument or the device's default generator (see Draw).
  std::optional<Draw> draw;
  if (o->gen_arg >= 0) {
    c10::IValue& g = (*stack)[begin + o->gen_arg];
    draw.emplace(g.isNone() ? default_generator(dev) : g.toGenerator());
    g = c10::IValue(draw->cpu());
  }

  // A CPU-fallback op's kernel time is what it costs on Trainium's host too (the cost model): one
  // steady clock read before and after, for fallback ops only.
  const bool timed = o->policy == kFallback && accounting_on();
  const auto started = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (runner) {
    runner(stack);
  } else if ((d.mode & (kModeDecided | kModeUpcast)) == kModeDecided) {  // the usual case
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  } else {
    run_cold(op, stack, o, d);
  }
  if (timed) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started);
    o->fallback_host_ns.fetch_add(ns.count(), std::memory_order_relaxed);
  }

  // Results back to neuron.
  auto convert = [&](const at::Tensor& r) -> at::Tensor {
    if (!r.defined() || r.device().type() != c10::kCPU) return r;
    if (!explicit_cpu && emulate_f64()) round_to_f32(r);  // Trainium computes float64 in float32
    for (auto& p : aliased)
      if (p.second.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) return p.first;
    for (auto* ci : cpu_inputs)
      if (ci == r.unsafeGetTensorImpl()) return r;
    if (explicit_cpu) return r;
    if (c10::isComplexType(r.scalar_type()) && !(d.mode & kModeComplexDone))  // e.g. torch.fft on a real input
      on_complex_result(o, d);
    if (r.layout() != c10::kStrided) {
      report_unsupported("sparse", o->name, "Sparse tensors are not supported on Neuron (" + o->name + ")",
                         kNotImplementedError);
      return r;  // record mode: the sparse result stays on the CPU
    }
    return wrap_cpu_result(r, dev);
  };
  const size_t nret = schema.returns().size();
  const size_t rbegin = stack->size() - nret;
  if (draw) {  // the offset advances by what the op drew: its (largest) result, as CUDA's kernels count
    uint64_t numel = 0;
    for (size_t j = 0; j < nret; ++j) {
      const c10::IValue& v = (*stack)[rbegin + j];
      if (v.isTensor() && v.toTensor().defined()) numel = std::max<uint64_t>(numel, v.toTensor().numel());
    }
    draw->finish(numel);
    draw.reset();
  }
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

uint64_t account_without_running(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  if (!accounting_on()) return 0;
  return account(get_op_info(op), stack, 0, stack.size()).hash;
}
void account_complex_result(const c10::OperatorHandle& op, uint64_t hash) {
  if (!accounting_on()) return;
  Decision d{hash, 0};
  on_complex_result(get_op_info(op), d);  // decided once per signature, as for a real call's result
}
void neuron_fallback_with_runner(const c10::OperatorHandle& op, torch::jit::Stack* stack, Runner runner) {
  fallback_impl(op, stack, runner);
}

// ------------------------------------------------------------------ registrations
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

}  // namespace neuron_sim
