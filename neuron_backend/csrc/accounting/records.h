// Crash-proof records (neuron_backend/EVENTS.md, "Records"): the accounting counters live in a
// memory-mapped file that every call updates in place, so the page cache keeps them however the
// process dies (SIGKILL, SIGSEGV, os._exit, the OOM killer); new signatures and events are appended to
// a journal, one line per write(). Nothing here runs Python.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace neuron_sim {

constexpr uint32_t kRecordsFormat = 1;
// Counters file layout (native little-endian; EVENTS.md): a 4096-byte header, then int64 slots in
// chunks of kSlotsPerChunk, each chunk mapped on its own so a counter never moves.
constexpr int64_t kHeaderBytes = 4096;
constexpr int64_t kSlotsPerChunk = 8192;
constexpr int kMaxExplicit = 32;
constexpr int kTokenBytes = 64;
struct RecordsHeader {
  char magic[8];  // "NPRECORD"
  uint32_t format;
  uint32_t header_bytes;
  int64_t pid;
  int64_t slots_per_chunk;
  int64_t optimizer_step;  // the step clock (neuron_backend/events/steps.py), set from Python
  int64_t forward;
  int64_t peak_allocated;  // the most bytes allocated at once on the simulated device (any device)
  int64_t reserved[1];
  char token[kTokenBytes];                    // the run's NEURON_PORT_EVENTS_TOKEN, NUL-padded
  std::atomic<int64_t> explicit_ops[kMaxExplicit];  // explicit kernel calls, in ExplicitOp order
};

// Open this process's counters file and journal in an existing folder (neither the folder nor a
// missing parent is ever created). Returns "" or what failed. Counters handed out before stay in memory.
std::string records_open(const std::string& counters_path, const std::string& journal_path, const std::string& token);
bool records_is_open();
// A new counter holding `initial`: a slot of the counters file when open, else process memory.
int64_t* records_new_counter(int64_t initial);
// The slot index of a counter in the counters file, or -1 (a counter in memory).
int64_t records_slot(const int64_t* counter);
// Add to the counter of a slot index (Python's counters: unsupported-feature counts).
void records_add(int64_t slot, int64_t n);
// The explicit-op counters (in the file header when open).
std::atomic<int64_t>* records_explicit();
void records_set_clock(int64_t optimizer_step, int64_t forward);
// Raise the header's peak allocated bytes to `bytes` (called by the allocator when its peak rises).
void records_note_peak(int64_t bytes);
// Append one line (a JSON object, no newline) to the journal with one write(); nothing when closed.
void records_append(const std::string& line);
// A JSON string literal of `s` (quotes and escapes).
std::string json_quote(const std::string& s);

}  // namespace neuron_sim
