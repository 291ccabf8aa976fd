// A neuron generator keeps (seed, offset) and exposes it as TorchNeuron's 16-byte state: seed (uint64) in
// bytes 0-8, offset (int64) in bytes 8-16 (torch_neuronx NeuronHooksInterface.cpp; CUDA's layout, which
// DTensor's OffsetBasedRNGTracker reads and writes). Draws come from a CPU generator derived per op.
#include "runtime/generator.h"

#include "runtime/device.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Utils.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <vector>

namespace neuron_sim {

namespace {

constexpr size_t kSeedBytes = sizeof(uint64_t), kOffsetBytes = sizeof(int64_t);

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Callers hold mutex_ (see Note [Acquire lock when using random generators]): torch's Python bindings
// lock it around manual_seed/get_state/set_state, Draw around an op.
struct NeuronGenerator final : c10::GeneratorImpl {
  uint64_t seed_ = c10::default_rng_seed_val, offset_ = 0;
  explicit NeuronGenerator(c10::DeviceIndex d)
      : c10::GeneratorImpl(c10::Device(kNeuron, d), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  static c10::DeviceType device_type() { return kNeuron; }
  void set_current_seed(uint64_t s) override {
    seed_ = s;
    offset_ = 0;
  }
  void set_offset(uint64_t o) override { offset_ = o; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    const uint64_t s = c10::detail::getNonDeterministicRandom(true);
    set_current_seed(s);
    return s;
  }
  void set_state(const c10::TensorImpl& st) override {
    at::detail::check_rng_state(st);
    const auto n = static_cast<size_t>(st.numel());
    // 8 bytes: a seed alone, offset 0 (TorchNeuron accepts it too)
    TORCH_CHECK(n == kSeedBytes + kOffsetBytes || n == kSeedBytes,
                "neuron RNG state is wrong size: expected 16 bytes (seed, offset) or 8 (seed), got ", n,
                " (a state saved from another device's generator, e.g. a CPU generator's 5056 bytes?)");
    // A fake tensor (a shape-only run: DTensor's random ops move the state through the fake device) has
    // no values to set; the draws it would steer make no values either, so the state stays as it is.
    if (st.key_set().has(c10::DispatchKey::Python) && !st.storage().data()) return;
    TORCH_CHECK(st.has_storage() && st.storage().data(), "neuron RNG state has no data (a meta tensor?)");
    const auto* p = static_cast<const uint8_t*>(st.data());
    std::memcpy(&seed_, p, kSeedBytes);
    int64_t off = 0;
    if (n > kSeedBytes) std::memcpy(&off, p + kSeedBytes, kOffsetBytes);
    offset_ = static_cast<uint64_t>(off);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto t = at::detail::empty_cpu({static_cast<int64_t>(kSeedBytes + kOffsetBytes)}, at::ScalarType::Byte,
                                   std::nullopt, std::nullopt, std::nullopt, std::nullopt);
    auto* p = static_cast<uint8_t*>(t.data_ptr());
    const auto off = static_cast<int64_t>(offset_);
    std::memcpy(p, &seed_, kSeedBytes);
    std::memcpy(p + kSeedBytes, &off, kOffsetBytes);
    return t.getIntrusivePtr();
  }

 private:
  NeuronGenerator* clone_impl() const override {
    auto* g = new NeuronGenerator(device_.index());
    g->seed_ = seed_;
    g->offset_ = offset_;
    return g;
  }
};

}  // namespace

static std::once_flag g_gen_once;
static std::vector<at::Generator> g_default_gens;
const at::Generator& default_generator(c10::DeviceIndex d) {
  std::call_once(g_gen_once, [] {
    for (int i = 0; i < kMaxDevices; ++i)
      g_default_gens.push_back(at::make_generator<NeuronGenerator>(static_cast<c10::DeviceIndex>(i)));
  });
  if (d < 0) d = current_device();
  TORCH_CHECK(d >= 0 && d < kMaxDevices, "Invalid device id: ", static_cast<int>(d));
  return g_default_gens[d];
}
at::Generator make_neuron_generator(c10::DeviceIndex d) {
  return at::make_generator<NeuronGenerator>(d < 0 ? current_device() : d);
}

Draw::Draw(const at::Generator& g) {
  auto* ng = g.device().type() == kNeuron ? dynamic_cast<NeuronGenerator*>(g.unsafeGetGeneratorImpl()) : nullptr;
  if (!ng) {
    cpu_ = g;
    return;
  }
  neuron_ = g;
  lock_ = std::unique_lock<std::mutex>(ng->mutex_);
  cpu_ = at::make_generator<at::CPUGeneratorImpl>(splitmix64(splitmix64(ng->seed_) ^ ng->offset_));
}

void Draw::finish(uint64_t numel) {
  if (!neuron_.defined()) return;
  auto* ng = static_cast<NeuronGenerator*>(neuron_.unsafeGetGeneratorImpl());
  ng->offset_ += (numel + 3) / 4 * 4;
}

}  // namespace neuron_sim
