// Crash-proof records: the counters file (mmap, updated in place) and the journal (O_APPEND).
#include "accounting/records.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

namespace neuron_sim {

static_assert(offsetof(RecordsHeader, token) == 64, "EVENTS.md documents the token at byte 64");
static_assert(offsetof(RecordsHeader, explicit_ops) == 128, "EVENTS.md documents explicit_ops at byte 128");
static_assert(sizeof(RecordsHeader) <= kHeaderBytes, "the header fits its page");
static_assert(sizeof(std::atomic<int64_t>) == 8 && std::atomic<int64_t>::is_always_lock_free,
              "explicit counters are plain int64 in the file");

constexpr int64_t kChunkBytes = kSlotsPerChunk * 8;

static std::mutex g_mu;  // opening, chunk growth, counter allocation
static int g_counters_fd = -1;
static std::atomic<int> g_journal_fd{-1};
static RecordsHeader* g_header = nullptr;
static std::vector<int64_t*> g_chunks;  // mapped chunks of the file, in file order
static int64_t g_next_slot = 0;
// Before open (and in forked children): counters in memory, never freed (they are few).
static std::atomic<int64_t> g_mem_explicit[kMaxExplicit];
static std::atomic<std::atomic<int64_t>*> g_explicit{g_mem_explicit};
static std::vector<int64_t*> g_mem_blocks;
static size_t g_mem_used = kSlotsPerChunk;

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

static void* map_shared(int fd, int64_t offset, int64_t bytes) {
  void* p = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
  return p == MAP_FAILED ? nullptr : p;
}

// A forked child (a DataLoader worker) must not count into its parent's file: its mappings become
// private copies and its journal closes. Python then opens the child's own records (records_open), which
// maps the same chunks onto the child's file, from zero: a child that used the device is never silent.
// g_mu is held across fork() so that the child never inherits it locked by a thread it does not have.
static void before_fork() { g_mu.lock(); }
static void after_fork_in_parent() { g_mu.unlock(); }
static void after_fork_in_child() {
  g_mu.unlock();
  if (g_counters_fd < 0) return;
  int fd = g_counters_fd;
  mmap(g_header, kHeaderBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd, 0);
  for (size_t k = 0; k < g_chunks.size(); ++k)
    mmap(g_chunks[k], kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_FIXED, fd,
         kHeaderBytes + static_cast<int64_t>(k) * kChunkBytes);
  int jfd = g_journal_fd.exchange(-1);
  if (jfd >= 0) close(jfd);
  close(fd);
  g_counters_fd = -1;  // new counters in memory from now on
}

// Map one more chunk of the file (g_mu held). False when the file cannot grow. The blocks are allocated
// now (not a sparse ftruncate): writing to a mapped page the full disk cannot back would raise SIGBUS.
static bool add_chunk() {
  const int64_t offset = kHeaderBytes + static_cast<int64_t>(g_chunks.size()) * kChunkBytes;
  if (posix_fallocate(g_counters_fd, offset, kChunkBytes) != 0) return false;
  void* p = map_shared(g_counters_fd, offset, kChunkBytes);
  if (!p) return false;
  g_chunks.push_back(static_cast<int64_t*>(p));
  return true;
}

std::string records_open(const std::string& counters_path, const std::string& journal_path, const std::string& token) {
  std::lock_guard<std::mutex> l(g_mu);
  if (g_counters_fd >= 0) return "";
  // Built under a temporary name, renamed when the header is complete: a reader never sees half a header.
  const std::string tmp = counters_path + ".tmp";
  int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return counters_path + ": " + std::strerror(errno);
  void* h = nullptr;
  int err_no = posix_fallocate(fd, 0, kHeaderBytes);
  if (err_no != 0) errno = err_no;
  if (err_no != 0 || !(h = map_shared(fd, 0, kHeaderBytes))) {
    std::string err = counters_path + ": " + std::strerror(errno);
    close(fd);
    unlink(tmp.c_str());
    return err;
  }
  auto* header = static_cast<RecordsHeader*>(h);
  std::memcpy(header->magic, "NPRECORD", 8);
  header->format = kRecordsFormat;
  header->header_bytes = static_cast<uint32_t>(kHeaderBytes);
  header->pid = static_cast<int64_t>(getpid());
  header->slots_per_chunk = kSlotsPerChunk;
  std::strncpy(header->token, token.c_str(), kTokenBytes - 1);
  // a forked child reopening: its parent's chunks (private since the fork) move onto this file, zeroed, so
  // the file holds the child's own calls at the parent's slot numbers; its explicit counts start at 0 too
  const bool forked = !g_chunks.empty();
  for (int i = 0; i < kMaxExplicit; ++i) header->explicit_ops[i].store(forked ? 0 : g_mem_explicit[i].load());
  if (forked) {
    const int64_t chunk_bytes = static_cast<int64_t>(g_chunks.size()) * kChunkBytes;
    bool moved = posix_fallocate(fd, kHeaderBytes, chunk_bytes) == 0;
    for (size_t k = 0; moved && k < g_chunks.size(); ++k)
      moved = mmap(g_chunks[k], kChunkBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                   kHeaderBytes + static_cast<int64_t>(k) * kChunkBytes) != MAP_FAILED;
    if (!moved) {  // counting goes on in private memory: the chunks that moved count into a file never named
      std::string err = counters_path + ": " + std::strerror(errno);
      munmap(h, kHeaderBytes);
      close(fd);
      unlink(tmp.c_str());
      return err;
    }
  }
  int jfd = open(journal_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (jfd < 0 || rename(tmp.c_str(), counters_path.c_str()) != 0) {
    std::string err = (jfd < 0 ? journal_path : counters_path) + ": " + std::strerror(errno);
    if (jfd >= 0) close(jfd);
    munmap(h, kHeaderBytes);
    close(fd);
    unlink(tmp.c_str());
    return err;
  }
  g_counters_fd = fd;
  g_header = header;
  g_explicit.store(header->explicit_ops);
  g_journal_fd.store(jfd);
  static bool fork_hook = (pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child), true);
  (void)fork_hook;
  return "";
}

bool records_is_open() { return g_journal_fd.load(std::memory_order_relaxed) >= 0; }

int64_t* records_new_counter(int64_t initial) {
  std::lock_guard<std::mutex> l(g_mu);
  int64_t* c = nullptr;
  if (g_counters_fd >= 0) {
    const int64_t k = g_next_slot / kSlotsPerChunk;
    if (k < static_cast<int64_t>(g_chunks.size()) || add_chunk()) {
      c = g_chunks[k] + g_next_slot % kSlotsPerChunk;
      ++g_next_slot;
    }
  }
  if (!c) {  // no file (or it cannot grow): in memory
    if (g_mem_used == static_cast<size_t>(kSlotsPerChunk)) {
      g_mem_blocks.push_back(new int64_t[kSlotsPerChunk]());
      g_mem_used = 0;
    }
    c = g_mem_blocks.back() + g_mem_used++;
  }
  *c = initial;
  return c;
}

int64_t records_slot(const int64_t* counter) {
  std::lock_guard<std::mutex> l(g_mu);
  for (size_t k = 0; k < g_chunks.size(); ++k)
    if (counter >= g_chunks[k] && counter < g_chunks[k] + kSlotsPerChunk)
      return static_cast<int64_t>(k) * kSlotsPerChunk + (counter - g_chunks[k]);
  return -1;
}

void records_add(int64_t slot, int64_t n) {
  std::lock_guard<std::mutex> l(g_mu);
  if (slot < 0 || slot >= g_next_slot) return;
  g_chunks[slot / kSlotsPerChunk][slot % kSlotsPerChunk] += n;
}

std::atomic<int64_t>* records_explicit() { return g_explicit.load(std::memory_order_relaxed); }

void records_set_clock(int64_t optimizer_step, int64_t forward) {
  if (RecordsHeader* h = g_header) {
    h->optimizer_step = optimizer_step;
    h->forward = forward;
  }
}

void records_note_peak(int64_t bytes) {
  if (RecordsHeader* h = g_header) {
    int64_t cur = __atomic_load_n(&h->peak_allocated, __ATOMIC_RELAXED);
    while (bytes > cur &&
           !__atomic_compare_exchange_n(&h->peak_allocated, &cur, bytes, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
  }
}

void records_append(const std::string& line) {
  int fd = g_journal_fd.load(std::memory_order_relaxed);
  if (fd < 0) return;
  std::string out = line + "\n";
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {  // O_APPEND: each write() lands at the end; a line is one write() unless interrupted
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace neuron_sim
