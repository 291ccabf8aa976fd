// Printable signatures (slow path: once per new signature).
#include "accounting/signatures.h"

#include <sstream>

namespace neuron_sim {

const char* dtype_short(c10::ScalarType st) {
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

std::string describe(const c10::IValue& v, int depth) {
  std::ostringstream os;
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (!t.defined()) return "None";
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // A Python number in a tensor position (x * 0.5): its value, as a Scalar argument prints.
      // (Read in place: wrapped numbers are CPU tensors of double, long, bool or complex double.)
      const void* p = t.const_data_ptr();
      switch (t.scalar_type()) {
        case c10::ScalarType::Double: os << c10::IValue(*static_cast<const double*>(p)); break;
        case c10::ScalarType::Long: os << c10::IValue(*static_cast<const int64_t*>(p)); break;
        case c10::ScalarType::Bool: os << c10::IValue(*static_cast<const bool*>(p)); break;
        case c10::ScalarType::ComplexDouble: os << c10::IValue(*static_cast<const c10::complex<double>*>(p)); break;
        default: os << dtype_short(t.scalar_type()) << "[]";
      }
      return os.str();
    }
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
    if (n > 8) {
      // the omitted items' totals, so the cost model counts them exactly (docs/estimate.md):
      // "...+N" then " <elements>e <bytes>B" when they are tensors
      int64_t numel = 0, nbytes = 0;
      bool tensors = false;
      for (size_t i = 8; i < n; ++i) {
        if (!l[i].isTensor() || !l[i].toTensor().defined()) continue;
        const auto& t = l[i].toTensor();
        tensors = true;
        numel += t.numel();
        nbytes += t.numel() * static_cast<int64_t>(t.element_size());
      }
      os << ", ...+" << (n - 8);
      if (tensors) os << " " << numel << "e " << nbytes << "B";
    }
    os << "]";
    return os.str();
  }
  if (v.isString()) return "'" + std::string(v.toStringView()) + "'";
  if (v.isDevice()) return v.toDevice().str();
  if (v.isGenerator()) return "<generator>";
  os << v;
  return os.str();
}

}  // namespace neuron_sim
