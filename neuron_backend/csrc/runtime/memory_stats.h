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
// A compiled graph (one NEFF on Trainium) runs between these two calls. Its intermediates live in the
// NEFF's scratchpad, which the Neuron runtime manages, not in tensors the caching allocator counts: while
// one runs, the peak (allocated and reserved) does not rise with each allocation; at its end it rises to
// what is allocated then (the graph's inputs, held for the whole run, and its outputs: what AOTAutograd
// saves for the backward and returns). Calls nest (a depth count); allocated bytes are always exact.
void mem_graph_begin();
void mem_graph_end();
void mem_empty_cache(int dev);

}  // namespace neuron_sim
