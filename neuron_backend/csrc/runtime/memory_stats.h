// Byte accounting per device, shared by the allocator and by the fallback's wrapped CPU results.
#pragma once

#include "common.h"

#include <cstddef>
#include <cstdint>

namespace neuron_sim {

void mem_on_alloc(int dev, size_t nbytes);
void mem_on_free(int dev, size_t nbytes);
struct MemStats {
  int64_t allocated, peak_allocated, reserved, peak_reserved, alloc_count, free_count,
      total_allocated_bytes;
};
MemStats mem_stats(int dev);
void mem_reset_peak(int dev);
void mem_empty_cache(int dev);

}  // namespace neuron_sim
