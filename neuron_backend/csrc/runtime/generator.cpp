// A neuron generator reports device neuron:N; the fallback hands its CPU generator to CPU kernels.
#include "runtime/generator.h"

#include "runtime/device.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <vector>

namespace neuron_sim {

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
  TORCH_CHECK(d >= 0 && d < kMaxDevices, "Invalid device id: ", static_cast<int>(d));
  return g_default_gens[d];
}
at::Generator make_neuron_generator(c10::DeviceIndex d) {
  return at::make_generator<NeuronGenerator>(d < 0 ? current_device() : d);
}
at::Generator cpu_generator_of(const at::Generator& g) {
  if (g.device().type() == kNeuron) {
    auto* ng = dynamic_cast<NeuronGenerator*>(g.unsafeGetGeneratorImpl());
    if (ng) return ng->cpu_;
  }
  return g;
}

}  // namespace neuron_sim
