// Dtype completion of native ops: probe once per signature, then run through wider CPU dtypes.
// Nothing here runs for a signature whose CPU kernel accepts its dtypes (after its first call).
#include "accounting/dtype_upcast.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

namespace neuron_sim {

// The next wider CPU dtype to try (Undefined: none).
static c10::ScalarType wider(c10::ScalarType st) {
  switch (st) {
    case c10::ScalarType::Bool:
    case c10::ScalarType::Byte:
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int: return c10::ScalarType::Long;
    case c10::ScalarType::Long: return c10::ScalarType::Double;
    case c10::ScalarType::Half:
    case c10::ScalarType::BFloat16: return c10::ScalarType::Float;
    case c10::ScalarType::Float: return c10::ScalarType::Double;
    default: return c10::ScalarType::Undefined;
  }
}

// The dtype named by a CPU kernel's dispatch error: `"histogram_cpu" not implemented for 'Int'`.
static c10::ScalarType missing_dtype(const c10::Error& e) {
  const std::string msg = e.what_without_backtrace();
  static const std::string key = "not implemented for '";
  auto p = msg.find(key);
  if (p == std::string::npos) return c10::ScalarType::Undefined;
  p += key.size();
  auto q = msg.find('\'', p);
  if (q == std::string::npos) return c10::ScalarType::Undefined;
  const std::string name = msg.substr(p, q - p);
  for (int i = 0; i < static_cast<int>(c10::ScalarType::NumOptions); ++i) {
    auto st = static_cast<c10::ScalarType>(i);
    if (name == c10::toString(st)) return st;
  }
  return c10::ScalarType::Undefined;
}

static bool contains(const std::vector<int>& v, int i) { return std::find(v.begin(), v.end(), i) != v.end(); }

static c10::ScalarType target(const UpcastPlan& plan, c10::ScalarType st) {
  for (int k = 0; k < plan.n; ++k)
    if (plan.from[k] == st) return plan.to[k];
  return c10::ScalarType::Undefined;
}

// dtypes of the arguments the plan may change (tensors that are not index arguments, dtype arguments)
static void arg_dtypes(c10::ArrayRef<c10::IValue> stack, size_t begin, size_t nargs, const OpInfo& o,
                       std::vector<c10::ScalarType>* out) {
  auto add = [&](c10::ScalarType st) {
    if (std::find(out->begin(), out->end(), st) == out->end()) out->push_back(st);
  };
  for (size_t i = 0; i < nargs; ++i) {
    if (contains(o.index_args, static_cast<int>(i))) continue;
    const c10::IValue& v = stack[begin + i];
    if (v.isTensor()) {
      if (v.toTensor().defined()) add(v.toTensor().scalar_type());
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef())
        if (e.isTensor() && e.toTensor().defined()) add(e.toTensor().scalar_type());
    } else if (v.isInt() && contains(o.dtype_args, static_cast<int>(i))) {
      add(static_cast<c10::ScalarType>(v.toInt()));
    }
  }
}

// The dtypes the op returns for its original arguments, from its meta kernel (PyTorch's dtype
// rules, as on a device); Undefined where unknown (no meta kernel, or not a tensor).
static std::vector<c10::ScalarType> expected_dtypes(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  const size_t nret = op.schema().returns().size();
  std::vector<c10::ScalarType> out(nret, c10::ScalarType::Undefined);
  auto to_meta = [](const at::Tensor& t) {
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  };
  torch::jit::Stack ms;
  for (const c10::IValue& v : args) {
    if (v.isTensor() && v.toTensor().defined()) {
      ms.emplace_back(to_meta(v.toTensor()));
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> l;
      for (const at::Tensor& t : v.toTensorList()) l.push_back(t.defined() ? to_meta(t) : t);
      ms.emplace_back(l);
    } else if (v.isList()) {
      c10::List<c10::IValue> l = v.toList().copy();
      for (size_t j = 0; j < l.size(); ++j) {
        c10::IValue e = l.get(j);
        if (e.isTensor() && e.toTensor().defined()) l.set(j, c10::IValue(to_meta(e.toTensor())));
      }
      ms.emplace_back(l);
    } else {
      ms.push_back(v);
    }
  }
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &ms);
  } catch (const std::exception&) {
    return out;
  }
  for (size_t j = 0; j < nret && j < ms.size(); ++j) {
    const c10::IValue& v = ms[ms.size() - nret + j];
    if (v.isTensor() && v.toTensor().defined()) {
      out[j] = v.toTensor().scalar_type();
    } else if (v.isTensorList() && v.toTensorList().size() > 0) {
      out[j] = v.toTensorList().get(0).scalar_type();
    }
  }
  return out;
}

void run_upcast(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& o, const UpcastPlan& plan) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const size_t begin = stack->size() - nargs;
  struct Swap {
    at::Tensor orig, tmp;
  };
  c10::SmallVector<Swap, 2> swaps;
  auto cast = [&](const at::Tensor& t, bool writable) -> at::Tensor {
    // a Python scalar (wrapped number) keeps its dtype: casting it would change type promotion
    if (!t.defined() || t.unsafeGetTensorImpl()->is_wrapped_number()) return t;
    auto to = target(plan, t.scalar_type());
    if (to == c10::ScalarType::Undefined) return t;
    at::Tensor tmp = t.to(to);
    if (writable) swaps.push_back({t, tmp});
    return tmp;
  };
  for (size_t i = 0; i < nargs; ++i) {
    const int ii = static_cast<int>(i);
    if (contains(o.index_args, ii)) continue;
    const bool writable = contains(o.writable_args, ii);
    c10::IValue& v = (*stack)[begin + i];
    if (v.isTensor()) {
      v = c10::IValue(cast(v.toTensor(), writable));
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> l = v.toTensorList().copy();
      for (size_t j = 0; j < l.size(); ++j) l.set(j, cast(l.get(j), writable));
      v = c10::IValue(l);
    } else if (v.isList()) {
      c10::List<c10::IValue> l = v.toList().copy();
      for (size_t j = 0; j < l.size(); ++j) {
        c10::IValue e = l.get(j);
        if (e.isTensor()) l.set(j, c10::IValue(cast(e.toTensor(), writable)));
      }
      v = c10::IValue(l);
    } else if (v.isInt() && contains(o.dtype_args, ii)) {
      auto to = target(plan, static_cast<c10::ScalarType>(v.toInt()));
      if (to != c10::ScalarType::Undefined) v = c10::IValue(static_cast<int64_t>(to));
    }
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  // in-place / out= arguments: the kernel wrote the wide copy; write it back (resized like out=)
  for (auto& s : swaps) {
    if (s.orig.sizes() != s.tmp.sizes()) s.orig.resize_(s.tmp.sizes());
    s.orig.copy_(s.tmp);
  }
  const auto& rets = schema.returns();
  const size_t nret = rets.size();
  const size_t rbegin = stack->size() - nret;
  auto back = [&](const at::Tensor& r, size_t j) -> at::Tensor {
    if (!r.defined()) return r;
    for (auto& s : swaps)
      if (s.tmp.unsafeGetTensorImpl() == r.unsafeGetTensorImpl()) return s.orig;
    c10::ScalarType want = j < plan.out.size() ? plan.out[j] : c10::ScalarType::Undefined;
    if (want == c10::ScalarType::Undefined) {
      // no meta kernel: a result in a dtype the plan introduced goes back to the original dtype,
      // except indices (int64 by definition)
      const auto& name = rets[j].name();
      if (name == "indices" || name == "index") return r;
      for (int k = 0; k < plan.n; ++k)
        if (plan.to[k] == r.scalar_type()) want = plan.from[k];
    }
    return (want == c10::ScalarType::Undefined || want == r.scalar_type()) ? r : r.to(want);
  };
  for (size_t j = 0; j < nret; ++j) {
    c10::IValue& v = (*stack)[rbegin + j];
    if (v.isTensor()) {
      v = c10::IValue(back(v.toTensor(), j));
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> l = v.toTensorList().copy();
      for (size_t k = 0; k < l.size(); ++k) l.set(k, back(l.get(k), j));
      v = c10::IValue(l);
    }
  }
}

bool probe_dtypes(const c10::OperatorHandle& op, torch::jit::Stack* stack, const OpInfo& o, bool backup,
                  UpcastPlan* plan) {
  const size_t nargs = op.schema().arguments().size();
  const size_t begin = stack->size() - nargs;
  // The arguments as they are now (references, no copies): a failed kernel may have consumed them.
  c10::SmallVector<c10::IValue, 8> saved(stack->begin() + static_cast<std::ptrdiff_t>(begin), stack->end());
  std::vector<std::pair<at::Tensor, at::Tensor>> backups;  // (writable argument, copy)
  if (backup) {
    auto keep = [&](const at::Tensor& t) {
      if (!t.defined()) return;
      auto st = t.scalar_type();
      if (st == c10::ScalarType::Float || st == c10::ScalarType::Double || c10::isComplexType(st)) return;
      backups.emplace_back(t, t.clone());
    };
    for (int i : o.writable_args) {
      const c10::IValue& v = saved[i];
      if (v.isTensor()) keep(v.toTensor());
      else if (v.isTensorList())
        for (const at::Tensor& t : v.toTensorList()) keep(t);
    }
  }
  auto restore = [&]() {
    stack->resize(begin);
    for (const auto& v : saved) stack->push_back(v);
    for (auto& b : backups) {  // an out= argument may have been resized before the kernel failed
      if (b.first.sizes() != b.second.sizes()) b.first.resize_(b.second.sizes());
      b.first.copy_(b.second);
    }
  };
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    return false;
  } catch (const c10::Error& e) {
    const c10::ScalarType missing = missing_dtype(e);
    std::vector<c10::ScalarType> have;  // from the saved arguments: the kernel may have consumed the stack's
    arg_dtypes(saved, 0, nargs, o, &have);
    if (missing == c10::ScalarType::Undefined || wider(missing) == c10::ScalarType::Undefined ||
        std::find(have.begin(), have.end(), missing) == have.end())
      throw;
    restore();
    plan->n = 1;
    plan->from[0] = missing;
    plan->to[0] = wider(missing);
  }
  plan->out = expected_dtypes(op, saved);
  for (int attempt = 0; attempt < 8; ++attempt) {
    try {
      run_upcast(op, stack, o, *plan);
      return true;
    } catch (const c10::Error& e) {
      const c10::ScalarType missing = missing_dtype(e);
      if (missing == c10::ScalarType::Undefined) throw;
      bool changed = false;
      for (int k = 0; k < plan->n && !changed; ++k) {  // a dtype the plan chose is missing too: go wider
        if (plan->to[k] == missing && wider(missing) != c10::ScalarType::Undefined) {
          plan->to[k] = wider(missing);
          changed = true;
        }
      }
      if (!changed && plan->n < UpcastPlan::kMax && wider(missing) != c10::ScalarType::Undefined &&
          target(*plan, missing) == c10::ScalarType::Undefined) {
        plan->from[plan->n] = missing;
        plan->to[plan->n] = wider(missing);
        plan->n++;
        changed = true;
      }
      if (!changed) throw;
      restore();
    }
  }
  restore();
  run_upcast(op, stack, o, *plan);  // last attempt: its error propagates
  return true;
}

}  // namespace neuron_sim
