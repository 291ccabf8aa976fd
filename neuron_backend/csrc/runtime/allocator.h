// The device allocator (host memory tagged neuron:N, byte accounting) and the pinned host allocator.
#pragma once

#include "common.h"

#include <c10/core/Allocator.h>

namespace neuron_sim {

struct NeuronAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override;
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};
extern NeuronAllocator g_neuron_allocator;  // registered for PrivateUse1
inline c10::Allocator* neuron_allocator() { return &g_neuron_allocator; }

// Pinned host memory: plain CPU memory whose pointers are remembered so is_pinned() is true.
c10::Allocator* pinned_allocator();
bool is_pinned_ptr(const void* p);

}  // namespace neuron_sim
