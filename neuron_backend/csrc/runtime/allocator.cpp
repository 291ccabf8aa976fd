// Device allocator (host memory with a size header for the statistics) and pinned host allocator.
#include "runtime/allocator.h"

#include "runtime/device.h"
#include "runtime/memory_stats.h"

#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <mutex>
#include <unordered_set>

namespace neuron_sim {

// ------------------------------------------------------------------ device allocator
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
c10::DataPtr NeuronAllocator::allocate(size_t n) {
  const int dev = current_device();
  if (n == 0) return {nullptr, nullptr, &c10::detail::deleteNothing, c10::Device(kNeuron, dev)};
  check_process_core(dev);  // another process's core (distributed)
  void* base = c10::alloc_cpu(n + kHeader);
  auto* h = static_cast<AllocHeader*>(base);
  h->nbytes = n;
  h->dev = dev;
  mem_on_alloc(dev, n);
  return {static_cast<char*>(base) + kHeader, base, &neuron_free, c10::Device(kNeuron, dev)};
}
NeuronAllocator g_neuron_allocator;
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_neuron_allocator);

// ------------------------------------------------------------------ pinned host allocator
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
c10::Allocator* pinned_allocator() { return &g_pinned_allocator; }
bool is_pinned_ptr(const void* p) {
  std::lock_guard<std::mutex> l(g_pinned_mu);
  return g_pinned.count(p) > 0;
}

}  // namespace neuron_sim
