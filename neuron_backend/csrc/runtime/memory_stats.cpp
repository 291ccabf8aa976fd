// Per-device memory statistics, modelled on the Neuron caching allocator.
#include "runtime/memory_stats.h"

#include "accounting/records.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>

namespace neuron_sim {

struct DevMem {
  std::atomic<int64_t> allocated{0}, peak_allocated{0}, rounded{0}, reserved{0}, peak_reserved{0},
      alloc_count{0}, free_count{0}, total_allocated{0};
};
static std::array<DevMem, kMaxDevices> g_mem;
static std::atomic<int> g_graph_depth{0};  // > 0 while a compiled graph runs (mem_graph_begin)

// The table entry of a device. Callers check the index against device_count() first; this
// guards the table itself. (mem_on_alloc / mem_on_free run in deleters and must not throw: an
// out-of-range device is counted on device 0 there, as before.)
static DevMem& table_entry(int dev) {
  TORCH_CHECK(dev >= 0 && dev < kMaxDevices, "neuron memory statistics: device index ", dev,
              " is outside the per-device table (0 to ", kMaxDevices - 1, ")");
  return g_mem[dev];
}

// Size classes modelled on the Neuron caching allocator (guidelines-memory-management):
// < 1 MB small pool (256-byte classes), < 16 MB rounded to 2 MB, >= 16 MB exact.
static int64_t round_size(size_t n) {
  if (n < (1u << 20)) return static_cast<int64_t>((n + 255) / 256 * 256);
  if (n < (16u << 20)) return static_cast<int64_t>((n + (2u << 20) - 1) / (2u << 20) * (2u << 20));
  return static_cast<int64_t>(n);
}
// True when `v` became the new maximum.
static bool atomic_max(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur) {
    if (a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) return true;
  }
  return false;
}
void mem_on_alloc(int dev, size_t n) {
  if (dev < 0 || dev >= kMaxDevices) dev = 0;
  auto& m = g_mem[dev];
  int64_t a = m.allocated.fetch_add(n, std::memory_order_relaxed) + n;
  int64_t r = m.rounded.fetch_add(round_size(n), std::memory_order_relaxed) + round_size(n);
  if (g_graph_depth.load(std::memory_order_relaxed) == 0) {
    if (atomic_max(m.peak_allocated, a)) records_note_peak(a);  // crash-proof: kept if the process is killed
    atomic_max(m.reserved, r);
    atomic_max(m.peak_reserved, m.reserved.load(std::memory_order_relaxed));
  }
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
  auto& m = table_entry(dev);
  return {m.allocated.load(), m.peak_allocated.load(), m.reserved.load(), m.peak_reserved.load(),
          m.alloc_count.load(), m.free_count.load(), m.total_allocated.load()};
}
void mem_reset_peak(int dev) {
  auto& m = table_entry(dev);
  m.peak_allocated.store(m.allocated.load());
  m.peak_reserved.store(m.reserved.load());
}
void mem_graph_begin() { g_graph_depth.fetch_add(1, std::memory_order_relaxed); }
void mem_graph_end() {
  if (g_graph_depth.fetch_sub(1, std::memory_order_relaxed) != 1) return;  // still inside an outer graph
  for (auto& m : g_mem) {
    int64_t a = m.allocated.load(std::memory_order_relaxed);
    if (atomic_max(m.peak_allocated, a)) records_note_peak(a);
    atomic_max(m.reserved, m.rounded.load(std::memory_order_relaxed));
    atomic_max(m.peak_reserved, m.reserved.load(std::memory_order_relaxed));
  }
}
void mem_empty_cache(int dev) {
  auto& m = table_entry(dev);
  m.reserved.store(m.rounded.load());
}

}  // namespace neuron_sim
