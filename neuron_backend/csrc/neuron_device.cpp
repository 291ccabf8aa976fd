// The simulated `neuron` device: host-memory allocator, device guard, hooks, generators,
// the explicit (memory / view / convolution) kernels and the autocast registrations.
// Compute ops go through the boxed fallback in neuron_dispatch.cpp.
#include "neuron.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/EmptyTensor.h>
#include <ATen/autocast_mode.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <ATen/ops/unfold_native.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/library.h>

#include <array>
#include <chrono>
#include <mutex>
#include <unordered_set>

namespace neuron_sim {

// ------------------------------------------------------------------ devices
static std::atomic<int> g_device_count{4};
static thread_local c10::DeviceIndex t_current_device = 0;

int device_count() { return g_device_count.load(std::memory_order_relaxed); }
void set_device_count(int n) {
  TORCH_CHECK(n >= 0 && n < kMaxDevices,
              "[neuron-port simulator] ", n, " visible Neuron devices requested. Reduce the number of "
              "visible Neuron devices (e.g., via NEURON_RT_NUM_CORES or NEURON_RT_VISIBLE_CORES) or "
              "avoid configurations that expose >= 128 devices.");
  g_device_count.store(n);
}
c10::DeviceIndex current_device() { return t_current_device; }
static void check_index(c10::DeviceIndex d) {
  TORCH_CHECK(d >= 0 && d < device_count(), "Invalid device id: ", static_cast<int>(d),
              ". Valid range is 0 to ", device_count() - 1);
}
void set_current_device(c10::DeviceIndex d) {
  check_index(d);
  t_current_device = d;
}

// ------------------------------------------------------------------ memory statistics
struct DevMem {
  std::atomic<int64_t> allocated{0}, peak_allocated{0}, rounded{0}, reserved{0}, peak_reserved{0},
      alloc_count{0}, free_count{0}, total_allocated{0};
};
static std::array<DevMem, kMaxDevices> g_mem;

// Size classes modelled on the Neuron caching allocator (guidelines-memory-management):
// < 1 MB small pool (256-byte classes), < 16 MB rounded to 2 MB, >= 16 MB exact.
static int64_t round_size(size_t n) {
  if (n < (1u << 20)) return static_cast<int64_t>((n + 255) / 256 * 256);
  if (n < (16u << 20)) return static_cast<int64_t>((n + (2u << 20) - 1) / (2u << 20) * (2u << 20));
  return static_cast<int64_t>(n);
}
static void atomic_max(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}
void mem_on_alloc(int dev, size_t n) {
  if (dev < 0 || dev >= kMaxDevices) dev = 0;
  auto& m = g_mem[dev];
  int64_t a = m.allocated.fetch_add(n, std::memory_order_relaxed) + n;
  atomic_max(m.peak_allocated, a);
  int64_t r = m.rounded.fetch_add(round_size(n), std::memory_order_relaxed) + round_size(n);
  atomic_max(m.reserved, r);
  atomic_max(m.peak_reserved, m.reserved.load(std::memory_order_relaxed));
  m.alloc_count.fetch_add(1, std::memory_order_relaxed);
  m.total_allocated.fetch_add(n, std::memory_order_relaxed);
}
void mem_on_free(int dev, size_t n) {
  if (dev < 0 || dev >= kMaxDevices) dev = 0;
  auto& m = g_mem[dev];
  m.allocated.fetch_sub(n, std::memory_order_relaxed);
  m.rounded.fetch_sub(round_size(n), std::memory_order_relaxed);
  m.free_count.fetch_add(1, std::memory_order_relaxed);
}
MemStats mem_stats(int dev) {
  auto& m = g_mem[dev];
  return {m.allocated.load(), m.peak_allocated.load(), m.reserved.load(), m.peak_reserved.load(),
          m.alloc_count.load(), m.free_count.load(), m.total_allocated.load()};
}
void mem_reset_peak(int dev) {
  auto& m = g_mem[dev];
  m.peak_allocated.store(m.allocated.load());
  m.peak_reserved.store(m.reserved.load());
}
void mem_empty_cache(int dev) {
  auto& m = g_mem[dev];
  m.reserved.store(m.rounded.load());
}

// ------------------------------------------------------------------ allocator
// A 64-byte header in front of each block remembers the size and device for the statistics.
constexpr size_t kHeader = 64;
struct AllocHeader {
  size_t nbytes;
  int dev;
};
static void neuron_free(void* ctx) {
  auto* h = static_cast<AllocHeader*>(ctx);
  mem_on_free(h->dev, h->nbytes);
  c10::free_cpu(ctx);
}
struct NeuronAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    const int dev = current_device();
    if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, c10::Device(kNeuron, dev)};
    void* base = c10::alloc_cpu(n + kHeader);
    auto* h = static_cast<AllocHeader*>(base);
    h->nbytes = n;
    h->dev = dev;
    mem_on_alloc(dev, n);
    return {static_cast<char*>(base) + kHeader, base, &neuron_free, c10::Device(kNeuron, dev)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
static NeuronAllocator g_allocator;
c10::Allocator* neuron_allocator() { return &g_allocator; }
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

// Pinned host memory: plain CPU memory whose pointers are remembered so is_pinned() is true.
struct PinnedCtx {
  c10::DataPtr inner;
};
static std::mutex g_pinned_mu;
static std::unordered_set<const void*> g_pinned;
static void pinned_free(void* ctx) {
  auto* c = static_cast<PinnedCtx*>(ctx);
  {
    std::lock_guard<std::mutex> l(g_pinned_mu);
    g_pinned.erase(c->inner.get());
  }
  delete c;
}
struct PinnedAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr inner = c10::GetCPUAllocator()->allocate(n);
    void* data = inner.get();
    if (data) {
      std::lock_guard<std::mutex> l(g_pinned_mu);
      g_pinned.insert(data);
    }
    return {data, new PinnedCtx{std::move(inner)}, &pinned_free, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
static PinnedAllocator g_pinned_allocator;
static bool is_pinned_ptr(const void* p) {
  std::lock_guard<std::mutex> l(g_pinned_mu);
  return g_pinned.count(p) > 0;
}

// ------------------------------------------------------------------ generators
// A neuron generator reports device neuron:N; the fallback hands its CPU generator to CPU kernels.
struct NeuronGenerator final : c10::GeneratorImpl {
  mutable at::Generator cpu_;
  explicit NeuronGenerator(c10::DeviceIndex d)
      : c10::GeneratorImpl(c10::Device(kNeuron, d), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
        cpu_(at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)) {}
  static c10::DeviceType device_type() { return kNeuron; }
  void set_current_seed(uint64_t s) override {
    std::lock_guard<std::mutex> l(cpu_.mutex());
    cpu_.set_current_seed(s);
  }
  void set_offset(uint64_t o) override {
    std::lock_guard<std::mutex> l(cpu_.mutex());
    cpu_.set_offset(o);
  }
  uint64_t get_offset() const override { return cpu_.get_offset(); }
  uint64_t current_seed() const override { return cpu_.current_seed(); }
  uint64_t seed() override {
    std::lock_guard<std::mutex> l(cpu_.mutex());
    return cpu_.seed();
  }
  void set_state(const c10::TensorImpl& st) override {
    std::lock_guard<std::mutex> l(cpu_.mutex());
    cpu_.unsafeGetGeneratorImpl()->set_state(st);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    std::lock_guard<std::mutex> l(cpu_.mutex());
    return cpu_.unsafeGetGeneratorImpl()->get_state();
  }

 private:
  NeuronGenerator* clone_impl() const override {
    auto* g = new NeuronGenerator(device_.index());
    g->cpu_ = cpu_.clone();
    return g;
  }
};

static std::once_flag g_gen_once;
static std::vector<at::Generator> g_default_gens;
const at::Generator& default_generator(c10::DeviceIndex d) {
  std::call_once(g_gen_once, [] {
    for (int i = 0; i < kMaxDevices; ++i)
      g_default_gens.push_back(at::make_generator<NeuronGenerator>(static_cast<c10::DeviceIndex>(i)));
  });
  if (d < 0) d = current_device();
  TORCH_CHECK(d < kMaxDevices, "Invalid device id: ", static_cast<int>(d));
  return g_default_gens[d];
}
at::Generator cpu_generator_of(const at::Generator& g) {
  if (g.device().type() == kNeuron) {
    auto* ng = dynamic_cast<NeuronGenerator*>(g.unsafeGetGeneratorImpl());
    if (ng) return ng->cpu_;
  }
  return g;
}
static at::Generator make_neuron_generator(c10::DeviceIndex d) {
  return at::make_generator<NeuronGenerator>(d < 0 ? current_device() : d);
}

// ------------------------------------------------------------------ device guard
static std::atomic<int64_t> g_stream_counter{0};
static thread_local std::array<c10::StreamId, kMaxDevices> t_streams{};
static double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct NeuronGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNeuron; }
  c10::Device exchangeDevice(c10::Device d) const override {
    auto old = current_device();
    if (d.index() >= 0 && d.index() != old) set_current_device(d.index());
    return c10::Device(kNeuron, old);
  }
  c10::Device getDevice() const override { return c10::Device(kNeuron, current_device()); }
  void setDevice(c10::Device d) const override {
    if (d.index() >= 0) set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) t_current_device = d.index();
  }
  c10::Stream getStream(c10::Device d) const override {
    auto i = d.index() < 0 ? current_device() : d.index();
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, i), t_streams[i]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kNeuron, d.index() < 0 ? current_device() : d.index()));
  }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNeuron, d.index() < 0 ? current_device() : d.index()),
                       ++g_stream_counter);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high*/) const override { return getNewStream(d, 0); }
  c10::Stream exchangeStream(c10::Stream s) const override {
    auto old = getStream(s.device());
    t_streams[s.device_index()] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void record(void** event, const c10::Stream& /*stream*/, const c10::DeviceIndex /*idx*/,
              const c10::EventFlag /*flag*/) const override {
    if (*event == nullptr) *event = new double(0);
    *static_cast<double*>(*event) = now_ms();
  }
  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}
  bool queryEvent(void* /*event*/) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex /*idx*/) const noexcept override {
    delete static_cast<double*>(event);
  }
  bool queryStream(const c10::Stream& /*stream*/) const override { return true; }
  void synchronizeStream(const c10::Stream& /*stream*/) const override {}
  void synchronizeEvent(void* /*event*/) const override {}
  void synchronizeDevice(const c10::DeviceIndex /*idx*/) const override {}
  void recordDataPtrOnStream(const c10::DataPtr& /*dp*/, const c10::Stream& /*stream*/) const override {}
  double elapsedTime(void* e1, void* e2, const c10::DeviceIndex /*idx*/) const override {
    TORCH_CHECK(e1 && e2, "Both events must be recorded before calculating elapsed time.");
    return *static_cast<double*>(e2) - *static_cast<double*>(e1);
  }
};
C10_REGISTER_GUARD_IMPL(PrivateUse1, NeuronGuardImpl);

// ------------------------------------------------------------------ hooks
struct NeuronHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override { return default_generator(d); }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override { return make_neuron_generator(d); }
  at::Device getDeviceFromPtr(void* /*data*/) const override { return c10::Device(kNeuron, current_device()); }
  bool isPinnedPtr(const void* data) const override { return is_pinned_ptr(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &g_pinned_allocator; }
  bool hasPrimaryContext(c10::DeviceIndex /*d*/) const override { return true; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    auto old = current_device();
    if (d >= 0) set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
  }
};
static bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NeuronHooks());
  return true;
}();

// ------------------------------------------------------------------ explicit kernels
static at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                      std::optional<at::Layout> layout, std::optional<at::Device> device,
                                      std::optional<bool> /*pin_memory*/,
                                      std::optional<at::MemoryFormat> memory_format) {
  count_explicit(kOpEmpty);
  auto st = c10::dtype_or_default(dtype);
  check_factory(kOpEmpty, size, st, memory_format);
  if (layout.has_value() && *layout != c10::kStrided)
    report_unsupported("sparse", "aten::empty.memory_format",
                       "Sparse tensors are not supported on Neuron (layout " + c10::toString(*layout) + ")", 1);
  const c10::OptionalDeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, &g_allocator, ks, st, memory_format);
}

static at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                                std::optional<at::Layout> /*layout*/, std::optional<at::Device> device,
                                std::optional<bool> /*pin_memory*/) {
  count_explicit(kOpEmptyStrided);
  auto st = c10::dtype_or_default(dtype);
  check_factory(kOpEmptyStrided, size, st, std::nullopt);
  const c10::OptionalDeviceGuard guard(device);
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, &g_allocator, ks, st);
}

static at::Tensor as_strided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                             std::optional<int64_t> storage_offset) {
  count_explicit(kOpAsStrided);
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

static at::Tensor view(const at::Tensor& self, c10::IntArrayRef size) {
  count_explicit(kOpView);
  return at::native::view(self, size);
}

static at::Tensor reshape_alias(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride) {
  count_explicit(kOpReshapeAlias);
  return at::native::_reshape_alias(self, size, stride);
}

static at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  count_explicit(kOpUnfold);
  return at::native::unfold(self, dimension, size, step);
}

static const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                                 std::optional<at::MemoryFormat> memory_format) {
  count_explicit(kOpResize);
  if (memory_format.has_value() && *memory_format != c10::MemoryFormat::Contiguous &&
      *memory_format != c10::MemoryFormat::Preserve)
    report_unsupported("memory_format", "aten::resize_",
                       "resize_: Neuron tensors only support contiguous or preserve memory format", 0);
  return at::native::resize_(self, size, std::nullopt);
}

static at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) {
  count_explicit(kOpSet);
  return at::native::set_(self, std::move(source));
}
static at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage source, int64_t offset,
                                             c10::IntArrayRef size, c10::IntArrayRef stride) {
  count_explicit(kOpSet);
  return at::native::set_storage_cpu_(self, std::move(source), offset, size, stride);
}
static at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  count_explicit(kOpSet);
  return at::native::set_tensor_(self, source);
}
static at::Tensor& set_empty(at::Tensor& self) {
  count_explicit(kOpSet);
  c10::Storage st(c10::Storage::use_byte_size_t(), 0, &g_allocator, true);
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(st));
  self.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  return self;
}

static at::Tensor as_cpu(const at::Tensor& t) { return t.device().type() == kNeuron ? cpu_alias(t) : t; }

static at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  count_explicit(kOpCopyFrom);
  as_cpu(dst).copy_(as_cpu(self), non_blocking);
  return dst;
}
static at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  count_explicit(kOpCopyFromAndResize);
  if (dst.device().type() == kNeuron) {
    at::native::resize_(dst, self.sizes(), std::nullopt);
  } else {
    dst.resize_(self.sizes());
  }
  as_cpu(dst).copy_(as_cpu(self), false);
  return dst;
}
static at::Scalar local_scalar_dense(const at::Tensor& self) {
  count_explicit(kOpLocalScalarDense);
  return at::native::_local_scalar_dense_cpu(cpu_alias(self));
}
static bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  return self.layout() == c10::kStrided && from.layout() == c10::kStrided &&
         !self.is_nested() && !from.is_nested() && !self.is_quantized() && !from.is_quantized();
}

// convolution_overrideable / convolution_backward_overrideable: the backend-specific entry points
// PyTorch uses for PrivateUse1 convolutions; run the CPU convolution on zero-copy aliases.
static at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                           const std::optional<at::Tensor>& bias, c10::IntArrayRef stride,
                                           c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                           c10::IntArrayRef output_padding, int64_t groups) {
  count_explicit(kOpConvolution);
  std::optional<at::Tensor> b;
  if (bias.has_value() && bias->defined()) b = as_cpu(*bias);
  auto out = at::convolution(as_cpu(input), as_cpu(weight), b, stride, padding, dilation, transposed,
                             output_padding, groups);
  return wrap_cpu_result(out, input.device().index());
}
static std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> output_mask) {
  count_explicit(kOpConvolutionBackward);
  std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
  auto res = at::convolution_backward(as_cpu(grad_output), as_cpu(input), as_cpu(weight), bias_sizes, stride,
                                      padding, dilation, transposed, output_padding, groups, output_mask);
  auto d = input.device().index();
  auto w = [d](const at::Tensor& t) { return t.defined() ? wrap_cpu_result(t, d) : t; };
  return {w(std::get<0>(res)), w(std::get<1>(res)), w(std::get<2>(res))};
}

// record_stream: streams are no-ops in the simulator (TorchNeuron registers record_stream natively).
static void record_stream(at::Tensor& /*self*/, c10::Stream /*s*/) {}

// Fused RNN cells: PyTorch's LSTM/GRU use these on PrivateUse1 devices (CUDA-only kernels upstream).
// Composed from ATen ops on the neuron tensors, which go through the accounting fallback.
static std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = input_gates + hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) gates = gates + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) gates = gates + *hidden_bias;
  auto ch = gates.chunk(4, 1);
  at::Tensor i = ch[0].sigmoid(), f = ch[1].sigmoid(), g = ch[2].tanh(), o = ch[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}
static std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward_impl(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  auto ch = workspace.chunk(4, 1);
  const at::Tensor &i = ch[0], &f = ch[1], &g = ch[2], &o = ch[3];
  at::Tensor tcy = cy.tanh();
  at::Tensor gh = grad_hy.has_value() && grad_hy->defined() ? *grad_hy : at::zeros_like(cy);
  at::Tensor gcx = gh * o * (1 - tcy * tcy);
  if (grad_cy.has_value() && grad_cy->defined()) gcx = gcx + *grad_cy;
  at::Tensor go = gh * tcy * o * (1 - o);
  at::Tensor gi = gcx * g * i * (1 - i);
  at::Tensor gf = gcx * cx * f * (1 - f);
  at::Tensor gg = gcx * i * (1 - g * g);
  at::Tensor grad_gates = at::cat({gi, gf, gg, go}, 1);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, gcx * f, grad_bias};
}
static std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates,
                                                        const at::Tensor& hidden_gates, const at::Tensor& hx,
                                                        const std::optional<at::Tensor>& input_bias,
                                                        const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor ig = input_gates, hg = hidden_gates;
  if (input_bias.has_value() && input_bias->defined()) ig = ig + *input_bias;
  if (hidden_bias.has_value() && hidden_bias->defined()) hg = hg + *hidden_bias;
  auto ic = ig.chunk(3, 1);
  auto hc = hg.chunk(3, 1);
  at::Tensor r = (ic[0] + hc[0]).sigmoid(), z = (ic[1] + hc[1]).sigmoid();
  at::Tensor n = (ic[2] + r * hc[2]).tanh();
  at::Tensor hy = (hx - n) * z + n;
  return {hy, at::cat({r, z, n, hx, hc[2]}, 1)};
}
static std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward_impl(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  at::Tensor gn = grad_hy * (1 - z) * (1 - n * n);
  at::Tensor gz = grad_hy * (hx - n) * z * (1 - z);
  at::Tensor gr = gn * hn * r * (1 - r);
  at::Tensor grad_input_gates = at::cat({gr, gz, gn}, 1);
  at::Tensor grad_hidden_gates = at::cat({gr, gz, gn * r}, 1);
  at::Tensor gib = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor ghb = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {grad_input_gates, grad_hidden_gates, grad_hy * z, gib, ghb};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", TORCH_FN(record_stream));
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward_impl));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward_impl));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_source_storage_offset));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("convolution_overrideable", TORCH_FN(convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
  // CompositeExplicitAutograd ops that TorchNeuron implements natively: route them through the
  // accounting fallback (one counted op instead of its decomposition; argument checks).
  for (const char* name : {"_to_copy", "clone", "copy_", "embedding"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

// Unsupported layouts: sparse and nested tensors on neuron.
static void sparse_fallback(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  report_unsupported("sparse", op.schema().name(),
                     "Sparse tensors are not supported on Neuron (" + op.schema().name() + ")",
                     1);
  TORCH_CHECK_NOT_IMPLEMENTED(false, "[neuron-port simulator] sparse neuron tensors cannot run in record mode (",
                              op.schema().name(), ")");
}
static void nested_fallback(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  report_unsupported("nested_tensor", op.schema().name(),
                     "NestedTensor is not supported on Neuron (" + op.schema().name() + ")",
                     1);
  TORCH_CHECK_NOT_IMPLEMENTED(false, "[neuron-port simulator] nested neuron tensors cannot run in record mode (",
                              op.schema().name(), ")");
}
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&sparse_fallback>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_fallback>());
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&neuron_fallback>());
}

// ------------------------------------------------------------------ autocast (CUDA-style op lists)
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

using namespace at;  // the AT_FORALL_* op lists use unqualified ATen names

#define NEURON_KERNEL_LOW(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define NEURON_KERNEL_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define NEURON_KERNEL_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define NEURON_KERNEL_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

static at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&,
                                             const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(NEURON_KERNEL_LOW)
  AT_FORALL_FP32(NEURON_KERNEL_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_KERNEL_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  AT_FORALL_PROMOTE(NEURON_KERNEL_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace neuron_sim
