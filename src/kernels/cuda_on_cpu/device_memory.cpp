#include "kernels/cuda_on_cpu/device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace mt::cuda_on_cpu {
namespace {

constexpr size_t kAlign = 256;
constexpr size_t kQuarantineBytes = size_t(64) << 20;  // freed mappings kept inaccessible
constexpr int kMaxDevices = 64;

size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}

struct Mapping {
  char* base = nullptr;  // the whole mapping: data pages + one guard page
  size_t length = 0;
  size_t bytes = 0;      // what was asked for
  int device = 0;
};

// State never destroyed: stream workers and static destructors may use it at exit.
struct Memory {
  std::mutex mutex;
  std::map<uintptr_t, Mapping> live;  // data address -> mapping
  std::deque<Mapping> quarantine;
  size_t quarantined = 0;
  size_t in_use[kMaxDevices] = {};
  std::map<uintptr_t, size_t> pinned;
  int pkey = -1;
};

Memory& memory() {
  static Memory* m = new Memory;
  return *m;
}

// The protection key device memory is tagged with, made once before main() runs (so that every
// thread the program starts later inherits "no access" from the main thread).
int make_pkey() {
  const int key = pkey_alloc(0, PKEY_DISABLE_ACCESS);
  return key;  // -1 without protection keys: memory stays accessible
}

struct PkeyInit {
  PkeyInit() { memory().pkey = make_pkey(); }
} pkey_init;

// SIGSEGV on device memory from a thread not allowed to touch it: one line saying what happened
// before the default action ends the process.
void on_segv(int sig, siginfo_t* info, void*) {
  const bool pkey_fault = info->si_code == SEGV_PKUERR;
  char line[256];
  const int n = std::snprintf(line, sizeof line,
                              "CUDA on CPU: %s at %p (%s)\n",
                              pkey_fault ? "host code touched device memory" : "segmentation fault",
                              info->si_addr,
                              pkey_fault ? "read or write it through cudaMemcpy* on a stream"
                                         : "a kernel past a buffer's end, a freed buffer, or a host bug");
  if (n > 0) {
    ssize_t ignored = write(2, line, size_t(n));
    (void)ignored;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

struct SegvHandler {
  SegvHandler() {
    // An alternate stack: the fault may come from a fiber's small stack.
    static char stack[64 * 1024];
    stack_t ss{};
    ss.ss_sp = stack, ss.ss_size = sizeof stack;
    sigaltstack(&ss, nullptr);
    struct sigaction sa{};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
  }
} segv_handler;

void protect(char* p, size_t length, int prot) {
  Memory& m = memory();
  if (m.pkey >= 0) pkey_mprotect(p, length, prot, m.pkey);
  else mprotect(p, length, prot);
}

}  // namespace

void allow_device_access(bool allowed) {
  const int key = memory().pkey;
  if (key >= 0) pkey_set(key, allowed ? 0 : PKEY_DISABLE_ACCESS);
}

bool host_access_is_caught() { return memory().pkey >= 0; }

size_t device_capacity() {
  static const size_t gb = [] {
    const char* e = std::getenv("MESHTRAIN_CUDA_ON_CPU_MEMORY_GB");
    const long v = e ? std::atol(e) : 0;
    return size_t(v > 0 ? v : 80);
  }();
  return gb << 30;
}

void* device_allocate(size_t bytes, int device) {
  if (bytes == 0 || device < 0 || device >= kMaxDevices) return nullptr;
  Memory& m = memory();
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  const size_t page = page_size();
  const size_t data_pages = (rounded + page - 1) / page * page;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (m.in_use[device] + rounded > device_capacity()) return nullptr;
  }
  void* raw = mmap(nullptr, data_pages + page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  char* base = static_cast<char*>(raw);
  protect(base, data_pages, PROT_READ | PROT_WRITE);
  // The data ends where the guard page begins (to 256 bytes): an overrun faults at once.
  char* data = base + (data_pages - rounded);
  // Poison: new device memory is not zeroed on a GPU.
  allow_device_access(true);
  std::memset(data, 0xff, rounded);
  allow_device_access(false);
  std::lock_guard<std::mutex> lock(m.mutex);
  m.live[reinterpret_cast<uintptr_t>(data)] = {base, data_pages + page, bytes, device};
  m.in_use[device] += rounded;
  return data;
}

bool device_free(void* p) {
  Memory& m = memory();
  std::vector<Mapping> unmap;
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    const auto it = m.live.find(reinterpret_cast<uintptr_t>(p));
    if (it == m.live.end()) return false;
    const Mapping mp = it->second;
    m.live.erase(it);
    m.in_use[mp.device] -= (mp.bytes + kAlign - 1) / kAlign * kAlign;
    // Inaccessible to everyone until it leaves the quarantine: a use after free faults.
    mprotect(mp.base, mp.length, PROT_NONE);
    m.quarantine.push_back(mp);
    m.quarantined += mp.length;
    while (m.quarantined > kQuarantineBytes && !m.quarantine.empty()) {
      unmap.push_back(m.quarantine.front());
      m.quarantined -= m.quarantine.front().length;
      m.quarantine.pop_front();
    }
  }
  for (const Mapping& mp : unmap) munmap(mp.base, mp.length);
  return true;
}

int device_of_range(const void* p, size_t bytes) {
  Memory& m = memory();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.live.upper_bound(a);
  if (it == m.live.begin()) return -1;
  --it;
  const uintptr_t start = it->first;
  if (a < start || a + bytes > start + it->second.bytes || a + bytes < a) return -1;
  return it->second.device;
}

size_t device_bytes_in_use(int device) {
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  return device >= 0 && device < kMaxDevices ? m.in_use[device] : 0;
}

void* pinned_allocate(size_t bytes) {
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) return nullptr;
  Memory& m = memory();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
  return p;
}

bool pinned_free(void* p) {
  Memory& m = memory();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (!m.pinned.erase(reinterpret_cast<uintptr_t>(p))) return false;
  }
  std::free(p);
  return true;
}

}  // namespace mt::cuda_on_cpu
