// Scaled dot-product attention through the "overrideable" backend.
#include "accounting/accounting.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ExpandUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

namespace neuron_sim {

// Like TorchNeuron (csrc/aten/SdpBackendSelection.cpp), 4-D SDPA on neuron selects the overrideable
// backend. The simulator computes it with PyTorch's CPU flash-attention kernels on the aliases, and
// with the reference computation below where those kernels cannot: dropout > 0 (the CPU flash
// kernel rejects it), a value head size that differs from the query/key head size (multi-head latent
// attention; the CPU flash kernel needs one head size), the gradient of an attention bias that
// requires grad (the CPU flash backward returns none), and every call PyTorch's CPU dispatch would not
// give the flash kernel (flash_can).
//
// The outputs follow the op's meta kernel (torch/_meta_registrations.py,
// meta__scaled_dot_product_fused_attention_overrideable), which is what FakeTensor, Dynamo and
// AOTAutograd trace with: philox_seed and philox_offset are 0-d int64 tensors, cum_seq_q/k and
// debug_attn_mask are undefined. AOTAutograd saves philox_seed/offset for the backward graph, so
// undefined tensors there reach the compiled forward as None ("expected all
// tensors_saved_with_vc_check to be Tensors").

namespace {

double softmax_scale(const at::Tensor& q, const std::optional<double>& scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// GQA: key/value heads repeated to the query's head count (and gradients summed back).
at::Tensor expand_heads(const at::Tensor& t, int64_t rep) { return rep == 1 ? t : t.repeat_interleave(rep, 1); }
at::Tensor reduce_heads(const at::Tensor& g, int64_t rep) {
  if (rep == 1) return g;
  return g.unflatten(1, {g.size(1) / rep, rep}).sum(2);
}

// Dropout keep-mask scaled by 1/(1-p), drawn from a CPU generator seeded with the op's philox_seed:
// the forward, the backward and an activation-checkpointing recompute see the same mask.
at::Tensor dropout_scale(const at::Tensor& like, double p, int64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed));
  return at::empty(like.sizes(), like.options()).bernoulli_(1.0 - p, gen).mul_(1.0 / (1.0 - p));
}

// The dropout seed is one draw from the CPU default generator, like the simulator's dropout
// (native_dropout has no generator argument; its CPU kernel draws from the default generator), so
// torch.manual_seed and torch.utils.checkpoint's RNG save/restore cover SDPA dropout too.
int64_t draw_seed() {
  at::Generator g = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(g.mutex());
  return static_cast<int64_t>(at::check_generator<at::CPUGeneratorImpl>(g)->random64() >> 1);
}

struct Probs {
  at::Tensor q, k, v;  // float32, k/v expanded to the query's heads
  at::Tensor p;        // softmax(q k^T * scale + bias, causal) (B, H, L, S), float32
  at::Tensor lse;      // (B, H, L) float32
  double scale;
  int64_t rep;
};

// Attention probabilities in float32 (the reference for what the CPU flash kernels cannot do).
Probs attention_probs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
                      bool causal, const std::optional<double>& scale) {
  Probs r;
  r.rep = q.size(1) / k.size(1);
  r.scale = softmax_scale(q, scale);
  r.q = q.to(at::kFloat);
  r.k = expand_heads(k.to(at::kFloat), r.rep);
  r.v = expand_heads(v.to(at::kFloat), r.rep);
  const double ninf = -std::numeric_limits<double>::infinity();
  at::Tensor s = at::matmul(r.q, r.k.transpose(-2, -1)).mul_(r.scale);
  if (bias.defined()) {
    if (bias.scalar_type() == at::kBool) {
      s.masked_fill_(bias.logical_not(), ninf);
    } else {
      s.add_(bias.to(at::kFloat));
    }
  }
  if (causal) {  // top-left aligned, like the CPU kernels
    s.masked_fill_(at::ones({s.size(-2), s.size(-1)}, s.options().dtype(at::kBool)).triu(1), ninf);
  }
  r.lse = at::logsumexp(s, -1);
  r.p = s.sub_(r.lse.unsqueeze(-1)).exp_();
  r.p.masked_fill_(r.lse.isneginf().unsqueeze(-1), 0.0);  // fully masked rows give 0, like math's _safe_softmax
  return r;
}

// The output in the layout the meta kernel gives it (alloc_with_matching_layout): empty_like(query)
// for an equal shape, else dense strides in the query's stride order. Dynamo/AOTAutograd keep a
// `view` in the graph when the traced layout allows it (MultiheadAttention's
// permute(2, 0, 1, 3).contiguous().view(...) after SDPA), so the real strides must match.
at::Tensor in_meta_layout(const at::Tensor& out, const at::Tensor& q) {
  at::Tensor res;
  if (out.sizes() == q.sizes()) {
    res = at::empty_like(q, out.options());
  } else {
    std::vector<int64_t> order = {0, 1, 2, 3};
    std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return q.stride(x) > q.stride(y); });
    std::vector<int64_t> strides(4);
    int64_t st = 1;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      strides[*it] = st;
      st *= out.size(*it);
    }
    res = at::empty_strided(out.sizes(), strides, out.options());
  }
  if (res.strides() == out.strides()) return out;
  res.copy_(out);
  return res;
}

// A gradient in its input's layout (the backward's meta kernel: empty_like(query/key/value/attn_bias)).
at::Tensor like_input(const at::Tensor& grad, const at::Tensor& input) {
  if (!grad.defined() || grad.strides() == input.strides()) return grad;
  at::Tensor res = at::empty_like(input, grad.options());
  if (res.strides() == grad.strides()) return grad;
  res.copy_(grad);
  return res;
}

// Whether PyTorch's CPU flash kernels may compute this call. They need q, k and v to share one head
// size and no dropout; and they take what PyTorch's own CPU dispatch would give them, nothing else:
// the CPU backend choice (sdp_utils_cpp.cpp, use_flash_attention_cpp) sends a last dimension with a
// stride other than 1 (q, k, v = x.permute(...).chunk(...)), a 3-D mask, a disabled flash backend and
// whatever a later PyTorch adds to math. Handed such inputs, the flash kernel reads them with assumed
// strides (wrong numbers, no error) or rejects them; the reference computation takes any layout.
bool flash_can(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias, double dropout,
               bool causal, const std::optional<double>& scale) {
  if (dropout > 0.0 || v.size(-1) != q.size(-1)) return false;
  std::optional<at::Tensor> obias;
  if (bias.defined()) obias = bias;
  const int64_t flash = 1;  // SDPBackend::flash_attention
  return at::_fused_sdp_choice(q, k, v, obias, dropout, causal, scale, /*enable_gqa=*/q.size(1) != k.size(1)) == flash;
}

}  // namespace

static void sdpa_fwd_runner(torch::jit::Stack* s) {
  auto a = torch::jit::last(*s, 8);
  at::Tensor q = a[0].toTensor(), k = a[1].toTensor(), v = a[2].toTensor();
  at::Tensor bias;
  if (a[3].isTensor() && a[3].toTensor().defined()) bias = a[3].toTensor();
  double dropout = a[4].toDouble();
  bool causal = a[5].toBool(), debug = a[6].toBool();
  std::optional<double> scale;
  if (!a[7].isNone()) scale = a[7].toDouble();
  TORCH_CHECK_NOT_IMPLEMENTED(!debug, "[neuron-port simulator] Debug mask not supported in Neuron implementation.");
  at::Tensor out, lse;
  int64_t seed = 0;
  if (!flash_can(q, k, v, bias, dropout, causal, scale)) {
    Probs r = attention_probs(q, k, v, bias, causal, scale);
    if (dropout > 0.0) {
      seed = draw_seed();
      r.p.mul_(dropout_scale(r.p, dropout, seed));
    }
    out = at::matmul(r.p, r.v).to(q.scalar_type());
    lse = r.lse;
  } else {
    std::optional<at::Tensor> obias;
    if (bias.defined()) obias = bias;
    auto res = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout, causal, obias, scale);
    out = std::get<0>(res);
    lse = std::get<1>(res);
  }
  out = in_meta_layout(out, q);
  lse = lse.contiguous();  // meta: a contiguous (B, H, L) float tensor
  int64_t lq = q.size(-2), lk = k.size(-2);
  at::Tensor philox_seed = at::scalar_tensor(seed, at::TensorOptions().dtype(at::kLong));
  at::Tensor philox_offset = at::scalar_tensor(0, at::TensorOptions().dtype(at::kLong));
  torch::jit::drop(*s, 8);
  torch::jit::push(*s, out, lse, at::Tensor(), at::Tensor(), c10::IValue(lq), c10::IValue(lk), philox_seed,
                   philox_offset, at::Tensor());
}

static void sdpa_bwd_runner(torch::jit::Stack* s) {
  auto a = torch::jit::last(*s, 17);
  at::Tensor grad_out = a[0].toTensor(), q = a[1].toTensor(), k = a[2].toTensor(), v = a[3].toTensor();
  at::Tensor bias;
  if (a[4].isTensor() && a[4].toTensor().defined()) bias = a[4].toTensor();
  auto mask = a[5].toBoolList();
  double dropout = a[12].toDouble();
  bool causal = a[13].toBool();
  std::optional<double> scale;
  if (!a[16].isNone()) scale = a[16].toDouble();
  const bool bias_grad = bias.defined() && mask.size() > 3 && mask.get(3) && at::isFloatingType(bias.scalar_type());
  at::Tensor gq, gk, gv, gbias;
  if (bias_grad || !flash_can(q, k, v, bias, dropout, causal, scale)) {
    // softmax backward: dS = P * (dP - rowsum(dP * P)), with dropout applied to P and dP.
    Probs r = attention_probs(q, k, v, bias, causal, scale);
    at::Tensor go = grad_out.to(at::kFloat);
    at::Tensor pd = r.p, dp = at::matmul(go, r.v.transpose(-2, -1));
    if (dropout > 0.0) {
      const at::Tensor& seed_t = a[14].toTensor();
      TORCH_CHECK(seed_t.defined(), "[neuron-port simulator] SDPA backward with dropout needs the forward's philox_seed");
      at::Tensor keep = dropout_scale(r.p, dropout, seed_t.item<int64_t>());
      pd = r.p * keep;
      dp.mul_(keep);
    }
    at::Tensor ds = r.p * (dp - (dp * r.p).sum(-1, true));
    gv = reduce_heads(at::matmul(pd.transpose(-2, -1), go), r.rep).to(v.scalar_type());
    gq = at::matmul(ds, r.k).mul_(r.scale).to(q.scalar_type());
    gk = reduce_heads(at::matmul(ds.transpose(-2, -1), r.q).mul_(r.scale), r.rep).to(k.scalar_type());
    if (bias_grad) gbias = at::sum_to(ds, bias.sizes()).to(bias.scalar_type());
  } else {
    std::optional<at::Tensor> obias;
    if (bias.defined()) obias = bias;
    // the gradient arrives in whatever layout the graph gives it; the kernel is only trusted with a
    // unit last stride (as its inputs above)
    auto res = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out.stride(-1) == 1 ? grad_out : grad_out.contiguous(), q, k, v, a[6].toTensor(), a[7].toTensor(), dropout, causal, obias, scale);
    gq = std::get<0>(res);
    gk = std::get<1>(res);
    gv = std::get<2>(res);
  }
  torch::jit::drop(*s, 17);
  torch::jit::push(*s, like_input(gq, q), like_input(gk, k), like_input(gv, v), bias_grad ? like_input(gbias, bias) : gbias);
}
static void sdpa_fwd(const c10::OperatorHandle& op, torch::jit::Stack* stack) { neuron_fallback_with_runner(op, stack, &sdpa_fwd_runner); }
static void sdpa_bwd(const c10::OperatorHandle& op, torch::jit::Stack* stack) { neuron_fallback_with_runner(op, stack, &sdpa_bwd_runner); }

// TorchNeuron's _fused_sdp_choice_neuron (April source, csrc/aten/SdpBackendSelection.cpp) selects
// the overrideable backend for every 4-D SDPA on neuron, dropout and grouped-query attention
// included (its SDPA tests assert the overrideable forward/backward run for both). The simulator
// does the same for floating q/k/v of one dtype whose key/value heads equal the query heads (or
// divide them with enable_gqa); other calls take PyTorch's math path, whose errors are then
// PyTorch's own.
static int64_t neuron_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const std::optional<at::Tensor>& /*mask*/, double dropout_p, bool /*is_causal*/,
                                 std::optional<double> /*scale*/, bool enable_gqa) {
  auto fp = [](const at::Tensor& t) {
    auto st = t.scalar_type();
    return st == at::kFloat || st == at::kBFloat16 || st == at::kHalf;
  };
  bool ok = dropout_p >= 0.0 && dropout_p < 1.0 && q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && fp(q) &&
            q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type() &&
            q.size(0) == k.size(0) && k.size(0) == v.size(0) && k.size(1) == v.size(1) && k.size(1) > 0 &&
            (q.size(1) == k.size(1) || (enable_gqa && q.size(1) % k.size(1) == 0));
  return ok ? static_cast<int64_t>(4) /* SDPBackend::overrideable */ : static_cast<int64_t>(0) /* math */;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", torch::CppFunction::makeFromBoxedFunction<&sdpa_fwd>());
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         torch::CppFunction::makeFromBoxedFunction<&sdpa_bwd>());
}

}  // namespace neuron_sim

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &neuron_sim::neuron_sdp_choice)
}
