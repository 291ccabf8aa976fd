// Unsupported features: the per-signature checks of the fallback and report_unsupported(), which
// records the feature through Python and raises unless NEURON_PORT_UNSUPPORTED=record.
#include "accounting/unsupported.h"

#include "accounting/callbacks.h"

#include <c10/util/Exception.h>

namespace neuron_sim {

void report_unsupported(const std::string& feature, const std::string& op, const std::string& message,
                        int error_kind) {
  if (!unsupported_must_raise(feature, op, message)) return;
  const std::string msg = "[neuron-port simulator] " + message;
  if (error_kind == kNotImplementedError) TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
  if (error_kind == kTypeError) TORCH_CHECK_TYPE(false, msg);
  TORCH_CHECK(false, msg);
}

void report_note(const std::string& feature, const std::string& op, const std::string& message,
                 const std::string& action) {
  call_note(feature, op, message, action);
}

// Decide, once per signature, whether the call hits an unsupported feature.
UnsupportedHit check_unsupported(const OpInfo& o, const torch::jit::Stack& stack, size_t begin, uint32_t flags) {
  UnsupportedHit u;
  const std::string short_name = o.base;
  if ((flags & kComplex) && !complex_decompose()) {  // decomposition on: decided in the fallback instead
    u = {"complex", o.name + ": complex dtypes are not supported natively on Neuron", kRuntimeError};
    return u;
  }
  if (o.memfmt_arg >= 0) {
    const auto& v = stack[begin + o.memfmt_arg];
    if (v.isInt()) {
      auto mf = static_cast<c10::MemoryFormat>(v.toInt());
      if (mf != c10::MemoryFormat::Contiguous && mf != c10::MemoryFormat::Preserve)
        return {"memory_format", short_name + ": Neuron tensors only support contiguous or preserve memory format", kRuntimeError};
    }
  }
  if (o.sparse_arg >= 0) {
    const auto& v = stack[begin + o.sparse_arg];
    if (v.isBool() && v.toBool()) {
      if (o.base == "embedding")
        return {"sparse_embedding", "Sparse is currently not supported for embedding.", kNotImplementedError};
      return {"gather_sparse_grad", "sparse_grad=True is not supported on Neuron", kNotImplementedError};
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
              kNotImplementedError};
    bool need = o.mha_need_weights >= 0 && stack[begin + o.mha_need_weights].isBool() &&
                stack[begin + o.mha_need_weights].toBool();
    bool avg = o.mha_avg < 0 || !stack[begin + o.mha_avg].isBool() || stack[begin + o.mha_avg].toBool();
    if (need && !avg)
      return {"mha_per_head_weights",
              "Returning per-head attention weights not yet supported in Neuron implementation. Please use "
              "average_attn_weights=True or need_weights=False.",
              kNotImplementedError};
  }
  return u;
}

}  // namespace neuron_sim
