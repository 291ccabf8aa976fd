// Generators of the neuron device: a Philox-style (seed, offset) state, as TorchNeuron's and CUDA's.
#pragma once

#include "common.h"

#include <ATen/core/Generator.h>

#include <mutex>

namespace neuron_sim {

// The default generator of device d (d < 0: the current device).
const at::Generator& default_generator(c10::DeviceIndex d);
// A new generator on device d (d < 0: the current device).
at::Generator make_neuron_generator(c10::DeviceIndex d);

// One random op's draw from a generator (the fallback runs CPU RNG kernels with `cpu()`). For a neuron
// generator: a CPU generator seeded from its (seed, offset), so the same state draws the same numbers
// (what DTensor, fork_rng and checkpointing rely on), the generator locked for the op as CPU kernels lock
// theirs, and `finish(numel)` advancing the offset as CUDA's Philox does (numel rounded up to 4). Any
// other generator is passed through unchanged.
class Draw {
 public:
  explicit Draw(const at::Generator& g);
  const at::Generator& cpu() const { return cpu_; }
  void finish(uint64_t numel);

 private:
  at::Generator neuron_, cpu_;
  std::unique_lock<std::mutex> lock_;
};

}  // namespace neuron_sim
