// Signatures: a hash over an op's arguments (shapes, dtypes, the values of integer and static
// arguments; of a number TorchNeuron lifts to a tensor input only its type), computed per call, and a
// printable description, computed once per new signature.
// The hash functions are inline: they run on every op, inlined into the fallback as before.
#pragma once

#include "accounting/accounting.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstring>
#include <functional>
#include <string_view>

namespace neuron_sim {

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}
inline uint32_t dtype_flags(c10::ScalarType st) {
  switch (st) {
    case c10::ScalarType::Double: return kF64;
    case c10::ScalarType::Long: return kI64;
    case c10::ScalarType::ComplexFloat:
    case c10::ScalarType::ComplexDouble:
    case c10::ScalarType::ComplexHalf: return kComplex;
    default: return 0;
  }
}
// `value`: the argument is static in TorchNeuron's registration of the op (its value is compiled in).
inline uint64_t hash_tensor(uint64_t h, const at::Tensor& t, uint32_t& flags, bool value = false) {
  if (!t.defined()) return mix(h, 0x11);
  auto st = t.scalar_type();
  if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
    // A Python scalar (x * 0.5): TorchNeuron moves a 0-d CPU tensor argument to the device as an
    // input (python_ops/processors/argument_processor.py, preprocess_inputs), so only its type keys
    // the NEFF; its double/long dtype is not a 64-bit tensor reaching the device.
    h = mix(h, 0x12 + static_cast<uint64_t>(st));
    if (!value) return h;
    uint64_t b = 0;
    std::memcpy(&b, t.const_data_ptr(), std::min<size_t>(t.element_size(), sizeof b));
    return mix(h, b);
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
inline uint64_t hash_ivalue(uint64_t h, const c10::IValue& v, uint32_t& flags, bool value = false) {
  if (v.isTensor()) return hash_tensor(h, v.toTensor(), flags, value);
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
    for (const c10::IValue& e : v.toListRef()) h = hash_ivalue(h, e, flags, value);
    return h;
  }
  if (v.isString()) return mix(mix(h, 0x29), std::hash<std::string_view>()(v.toStringView()));
  if (v.isDevice()) return mix(mix(h, 0x2a), static_cast<uint64_t>(v.toDevice().type()) * 1000 + v.toDevice().index());
  return mix(h, 0x30 + static_cast<uint64_t>(v.tagKind().size()));
}

// A number argument TorchNeuron lifts to a 0-d tensor input (int -> int32, float -> float32) and keys
// its cache on by type, not value (kernels/base.py get_cache_key: "For scalars, include only type").
inline uint64_t hash_runtime_scalar(uint64_t h, const c10::IValue& v, uint32_t& flags) {
  if (v.isDouble()) return mix(h, 0x22);
  if (v.isInt()) return mix(h, 0x21);
  if (v.isBool()) return mix(h, 0x23);
  if (v.isList()) {
    h = mix(mix(h, 0x28), v.toListRef().size());
    for (const c10::IValue& e : v.toListRef()) h = hash_runtime_scalar(h, e, flags);
    return h;
  }
  return hash_ivalue(h, v, flags);
}

// f32, bf16, i64, ... (c10::toString for the others).
const char* dtype_short(c10::ScalarType st);
// One argument as it appears in the events file: f32[64,512], nc suffix, @cpu, values, lists.
std::string describe(const c10::IValue& v, int depth = 0);

}  // namespace neuron_sim
