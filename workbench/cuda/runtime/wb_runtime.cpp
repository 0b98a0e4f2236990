// CPU engine runtime: runs a CUDA grid on the CPU.
//
// * Blocks run in parallel on a pool of OS threads (one block at a time per worker; the launching thread works
//   too). Static __shared__ variables are `static thread_local` in kernel modules, which is right because every
//   fiber of a block runs on the same worker. At the start of every block the module's TLS block (its static
//   shared memory) and the dynamic shared memory are filled with 0xFF bytes: NaN as f32/f16/bf16/f64 and -1 as
//   an integer, so a kernel that reads shared memory it never wrote sees garbage, as on a GPU.
// * Each CUDA thread of a block is a fiber with its own stack. A fiber runs until it waits at a barrier
//   (__syncthreads, a warp collective) or exits; the worker's scheduler then resumes the next ready fiber in
//   thread-index order. So barriers are real, and a missing __syncthreads gives a deterministic wrong answer.
// * The context switch is a hand-written x86-64 routine (callee-saved registers only, no syscall); other
//   targets fall back to ucontext.
// * A watchdog thread stops a launch on Ctrl-C (SIGINT, chained to Python's handler), past its time limit, or
//   when its estimated run time (from the blocks done so far) is over the size guard. Fibers are stopped by a
//   signal whose handler abandons the running fiber when it is executing the kernel module's own code (never
//   inside the C library or this runtime, which may hold locks); runtime entry points check the flag too.
// * Checked launches (one worker, so reports are deterministic) also run the sanitizers, fed by the module's
//   -fsanitize=thread hooks (wb_sanitize.h): shared-memory memcheck (redzones around the static and dynamic
//   windows), initcheck (a byte of shared memory read before this block wrote it) and racecheck. The race model
//   follows compute-sanitizer: two accesses to one byte by different threads conflict if one writes, neither is
//   atomic and no barrier separates them. For threads of one block, a completed __syncthreads orders everything
//   before it ("epochs"), and for lanes of one warp any completed warp collective both lanes took part in does;
//   for global memory, accesses from different blocks are never ordered. Shadow memory keeps, per byte, the
//   last write, the last read, the last read by another thread and the last read by another warp (SanCell), so
//   the verdict does not depend on the order the fibers happened to run in.
// * Profile launches (wb.profile) run a module built with the same instrumentation, whose hooks append every
//   access to the fiber's log (wb_sanitize.h). At each __syncthreads, each warp collective that all live lanes of
//   a warp take part in, and at the end of the block, the logs of each warp are grouped into warp-level requests:
//   the k-th execution of an access site by each lane of the warp is one request (lanes that never execute it are
//   inactive there), so the counts do not depend on the order the fibers ran in. Each request is counted as the
//   hardware's L1 would see it: global memory in 32-byte sectors (of the buffer, aligned as cudaMalloc aligns),
//   shared memory in wavefronts of the 32-bank, 4-byte-wide model (8-byte accesses per half-warp, 16-byte accesses
//   per quarter-warp). See prof_request.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "wb_abi.h"

#define WB_EXPORT extern "C" __attribute__((visibility("default")))

// ---------------------------------------------------------------- host-side launch description (ctypes mirror)
struct wb_san_record {
  int tool;          // 0 memcheck, 1 racecheck, 2 initcheck, 3 synccheck
  int kind;          // memcheck: 0 read, 1 write, 2 access, 3 misaligned; racecheck: 0 RAW, 1 WAR, 2 WAW;
                     // synccheck: SYNC_* (offset: the mask, size: the lanes concerned, prev_*: the other thread)
  int space;         // 0 global, 1 static shared, 2 dynamic shared
  int param;         // global: kernel parameter index (-1 if unknown)
  int64_t offset;    // bytes from the start of the buffer / shared window
  uint64_t size;     // bytes accessed
  uint64_t window;   // bytes of the buffer / shared window
  unsigned block[3], thread[3];
  uint64_t pc;       // module offset of the access (racecheck: the later access)
  int write;         // the access writes (racecheck: the later one)
  int prev_write;    // racecheck: the earlier access writes
  unsigned prev_block[3], prev_thread[3];
  uint64_t prev_pc;
  long count;        // accesses folded into this record (racecheck/initcheck: same code locations)
};

struct wb_launch_desc {
  void (*invoke)(void**);
  void** args;
  unsigned grid[3], block[3];
  uint64_t smem;
  int nthreads;
  int checked;
  void* dl_handle;            // the module (dlinfo finds each worker's TLS block: its static shared memory)
  void* (*tls_probe)(void);   // touches the module's TLS so that the block is allocated
  uint64_t tls_bytes;         // PT_TLS size, poisoned at each block start
  uint64_t text_lo, text_hi;  // the module's code (where a fiber may be abandoned)
  uint64_t module_base;       // load address: pcs are reported relative to it
  int* san_enabled;           // checked: the module's hook switch
  uint64_t static_lo, static_bytes;  // checked: the user's static shared window within the TLS block
  uint64_t redzone;                  // checked: redzone bytes on each side of the shared windows
  int nguard;                        // checked: C++ guard variables in the static window (offset, bytes): the
  const uint64_t* guard;             //   compiler's, not the kernel's, so never uninitialized nor racy
  int nbuf;                   // checked: the pointer arguments, run on redzoned copies
  const uint64_t* buf_ptr;
  const uint64_t* buf_bytes;
  const int* buf_param;
  const uint64_t* buf_slot;   // where each pointer is stored in the argument array (rewritten to the copy)
  double time_limit;  // seconds (<= 0: none)
  double size_guard;  // seconds (<= 0: none)
  char* errbuf;
  uint64_t errlen;
  wb_san_record* records;
  int record_cap;  // per tool
  int nrecords;
  long totals[4];
  double elapsed, estimate;
  long blocks_done;
  // profile launches
  int profile;
  int nregion;               // memory the kernel reaches: (lo, hi, base, kind) each; kind 1: a global buffer
  const uint64_t* region;    //   (sectors counted from base, its allocation start), 3: the kernel's parameters
  uint64_t prof_cap;         // most log entries one worker may hold between two flushes
  uint64_t prof[32];         // out: the P_* counters
  // unchecked launches: the pointer arguments' buffers run on guarded copies (guard pages around each)
  int guarded;
  const int* buf_flags;      // per buffer: WB_BUF_* bits
  uint64_t err_pc;           // out: module offset + 1 of the failing instruction or call (0: unknown)
  int err_param;             // out: the buffer (index into buf_*) a failing access hit (-1: none)
  int err_kind;              // out: ERR_* (what failed)
  // profile launches traced for an access picture (wb.profile(...).picture): each access of the requests one block
  // makes, per lane, as counted (trace_block < 0: none; the layout of wb_trace_entry is mirrored in _cpu.py)
  int64_t trace_block;       // linear index of the block to trace
  int trace_warp;            // its warp to trace (-1: every warp)
  struct wb_trace_entry* trace;
  uint64_t trace_cap;
  uint64_t ntrace;           // out: entries made (above trace_cap: only the first trace_cap were kept)
};

struct wb_trace_entry {
  uint64_t off;         // global: bytes from the buffer's allocation start; shared: bytes from the window start
  uint32_t req;         // the request, numbered in the order the block's requests were counted
  uint32_t size_flags;  // bytes | WB_SAN_* flags << 28
  uint32_t pc;          // module offset of the access site
  int16_t region;       // global: index of the buffer in wb_launch_desc.region; -1 static, -2 dynamic shared memory
  uint8_t warp, lane;
};

enum { WB_BUF_READONLY = 1 };  // the caller's array must not be written (numpy writeable=False)
enum { NTOOLS = 4 };
// What stopped an unchecked launch (err_kind): Python words the GPU's error from it.
enum { ERR_NONE = 0, ERR_SEGV, ERR_FPE, ERR_ILL, ERR_ABORT, ERR_EXIT, ERR_GUARD, ERR_READONLY, ERR_CANARY,
       ERR_MISALIGNED, ERR_TRAP };
// synccheck findings (checked launches)
enum { SYNC_PARTIAL_BARRIER = 0, SYNC_EXITED_LANE = 1, SYNC_BAD_MASK = 2, SYNC_DIVERGED = 3, SYNC_DEADLOCK = 4,
       SYNC_MASK_MISMATCH = 5 };

// Profile counters (workbench/cuda/_cpu.py names them).
enum {
  P_G_LD_REQ, P_G_LD_SEC, P_G_LD_BYTES, P_G_LD_LANES, P_G_LD_IDEAL,
  P_G_ST_REQ, P_G_ST_SEC, P_G_ST_BYTES, P_G_ST_LANES, P_G_ST_IDEAL,
  P_S_LD_REQ, P_S_LD_WAVE, P_S_LD_CONF, P_S_LD_BYTES, P_S_LD_LANES,
  P_S_ST_REQ, P_S_ST_WAVE, P_S_ST_CONF, P_S_ST_BYTES, P_S_ST_LANES,
  P_G_ATOM_REQ, P_G_ATOM_LANES, P_S_ATOM_REQ, P_S_ATOM_LANES,
  P_BARRIERS, P_WARP_COLL, P_OTHER, P_N
};

enum { RC_OK = 0, RC_ERROR = 1, RC_SANITIZER = 2, RC_INTERRUPTED = 3, RC_TIMEOUT = 4, RC_TOO_LARGE = 5 };

namespace {

enum FiberState { READY = 0, WAIT_BAR = 1, WAIT_WARP = 2, DONE = 3 };

struct Worker;

struct Fiber {
  wb_thread* t;  // lives at the top of the fiber's stack
  void* sp;      // saved stack pointer while switched out
  int state;
  int index;
  Worker* w;
  uintptr_t bar_pc;  // checked: where it last called __syncthreads (module address)
  uintptr_t coll_pc;  // checked: where it last called a warp collective
#if !defined(__x86_64__)
  ucontext_t uc;
#endif
};

struct Warp {
  unsigned live;    // lanes not exited
  unsigned expect;  // participants of the round in progress
  unsigned arrived_mask;
  int arrived;
  unsigned gen;
  unsigned active[2];
  uint64_t buf[2][32];
  // checked (synccheck): the round in progress, as its first lane opened it
  unsigned req_mask;
  unsigned site_line;
  const char* site_file;
  uintptr_t site_pc;
  int opener;
};

// ---------------------------------------------------------------- sanitizer state (checked launches)
struct SanAcc {          // one access in shadow memory
  uint32_t block;        // linear block index + 1 (0: none)
  uint32_t epoch;        // the block's barrier generation
  uint32_t wgen;         // the warp's collective generation
  uint32_t pc;           // module offset
  uint16_t thread;       // linear thread index in the block
  uint16_t atomic;
};
// Reads: r2 and rw keep what r alone would lose. Many threads read a byte in one epoch (every thread reads a
// reduction's result, part[0]) and then one writes it: the writer conflicts with every reader of another warp,
// however many of its own warp read after them (ordered by a collective), so rw is kept exact for that: the last
// read by a thread of another warp (or block) than r's. r2 keeps the last read by another thread than r's (the
// writer may be r itself, with an unordered lane of its warp before it).
struct SanCell {
  SanAcc w, r, r2, rw;  // last write; last read; last read by another thread than r's; ... of another warp than r's
};
struct SanRegion {
  uintptr_t lo;  // global buffers: the copy the kernel runs on
  uint64_t bytes;
  SanCell* cells;
  size_t map_bytes;
  uintptr_t orig = 0;     // global buffers: the caller's memory
  char* copy_map = nullptr;  // [rz][bytes][rz]
  size_t copy_bytes = 0, rz = 0;
  bool readonly = false;  // the caller's array is read-only: the copy is mapped PROT_READ, never copied back
};
struct SanWarp {
  unsigned all;          // lanes at block start
  uint32_t full;         // 1 + index of the last collective round all of them took part in (0: none)
  uint32_t pair[32][32]; // same, per pair of lanes, for rounds with fewer lanes
};
struct San {
  uintptr_t st_lo = 0, dy_lo = 0;
  uint64_t st_bytes = 0, dy_bytes = 0, rz = 0;
  SanRegion st{}, dy{};
  std::vector<SanRegion> globals;  // disjoint, sorted
  SanWarp warps[32];
  uint32_t cur_block = 0;
  std::unordered_map<uint64_t, int> seen;  // racecheck/initcheck: (tool, kind, pcs, space) -> record index
};

struct ProfRegion {
  uintptr_t lo, hi, base;  // [lo, hi) holds the buffer; sectors are counted from `base` (its allocation start)
  int kind;                // 1 global memory, 3 the kernel's parameters (not counted)
  int id;                  // its index in wb_launch_desc.region (traces name the buffer by it)
};

struct PLog {  // profile: one fiber's access log (kept by the worker across blocks of a launch)
  wb_prof_entry* buf = nullptr;
  size_t cap = 0;
  void* mem = nullptr;  // buf is staggered in it by the fiber's index, so that the entries of the 32 lanes a flush
                        // reads side by side do not all fall into the same L1 cache set
};

struct ProfGroup {  // profile: the entries of one warp-level request (general path)
  const wb_prof_entry* e[32];
  unsigned char lane[32];
  int n;
};

// A pointer argument's buffer as the kernel sees it in an unchecked launch: a copy whose end is within 256 bytes of
// a PROT_NONE guard (and whose start follows one), so that an out-of-bounds access faults instead of corrupting
// the process's heap; the bytes between the copy and the guards hold a canary, checked after the launch. Checked
// launches keep a region per read-only copy only (to name the parameter of a faulting write).
struct GuardRegion {
  uintptr_t orig = 0;   // the caller's memory
  uint64_t bytes = 0;
  char* map = nullptr;  // [guard][data pages][guard]
  size_t map_bytes = 0, guard = 0, data = 0;
  uintptr_t lo = 0;     // the copy (lo = orig mod 256)
  bool readonly = false;
  bool owned = true;    // unmapped (or cached) by the guard code; checked launches' regions belong to San
};

struct Launch {
  const wb_launch_desc* d;
  void (*invoke)(void**);
  void** args;
  wb_uint3 grid, block;
  size_t smem;
  long nblocks;
  int nworkers = 1;
  std::atomic<long> next{0};
  std::atomic<long> done{0};
  std::atomic<int> abort{0};
  int stop = RC_OK;  // why the watchdog stopped it
  std::atomic<int> faulted{0};  // a fiber hit a segmentation fault / bus error in the kernel's code
  uintptr_t fault_addr = 0, fault_pc = 0;
  unsigned fault_block[3] = {0, 0, 0}, fault_thread[3] = {0, 0, 0};
  int fault_sig = 0;
  bool fault_stack = false;  // the fault is on the fiber's guard page: a stack overflow
  double estimate = 0;
  std::chrono::steady_clock::time_point start;
  std::mutex mu;
  std::string error;
  std::vector<pthread_t> threads;
  std::vector<wb_san_record> recs[NTOOLS];
  long totals[NTOOLS] = {0, 0, 0, 0};
  std::vector<struct GuardRegion>* guards = nullptr;  // unchecked: the guarded copies; checked: read-only copies
  uintptr_t err_pc = 0;  // module address of a failing call (wb_trap & co.)
  int err_kind = ERR_NONE;
  int err_param = -1;
  int fault_code = 0;     // si_code of the fault
  bool fault_write = false;
  int cap = 64;
  San* san = nullptr;
  bool prof = false;
  uint64_t prof_tot[P_N] = {};
  std::vector<struct ProfRegion> regions;  // profile: the pointer arguments' buffers, sorted, disjoint
  uint64_t ntrace = 0;  // trace entries made (only the worker running the traced block writes them)
};

struct Worker {
  char* stacks = nullptr;  // nstacks * WB_STACK_SIZE, aligned to WB_STACK_SIZE
  int nstacks = 0;
  void* map_base = nullptr;
  size_t map_bytes = 0;
  std::vector<Fiber> fibers;
  void* sched_sp = nullptr;
#if !defined(__x86_64__)
  ucontext_t sched_uc;
#endif
  char* smem = nullptr;  // dynamic shared memory (a redzone of smem_rz bytes on each side)
  char* smem_map = nullptr;
  size_t smem_cap = 0, smem_map_bytes = 0, smem_rz = 0;
  char* tls_base = nullptr;  // the module's TLS block on this thread: static shared memory
  Launch* L = nullptr;
  Fiber* volatile cur = nullptr;  // the fiber running now (read by the preemption handler)
  int n = 0, live = 0;
  int bar_arrived = 0;
  unsigned bar_gen = 0;
  int bar_acc[3] = {0, 0, 0};
  int bar_result[2] = {0, 0};
  int bar_op = 0;
  Warp warps[32];
  bool aborted = false;
  // profile launches
  std::vector<PLog> plog;
  size_t plog_total = 0;
  uint64_t pcnt[P_N] = {};
  size_t last_region = 0;
  bool trace_block = false;  // an access picture traces this block
  uint32_t trace_req = 0;
  std::vector<uint64_t> scratch;
  std::vector<ProfGroup> groups;
  std::unordered_map<uint64_t, uint32_t> group_of;
  std::unordered_map<uint32_t, uint32_t> occ;
  void free_plogs() {
    for (PLog& p : plog) free(p.mem);
    plog.clear();
    plog_total = 0;
  }
  ~Worker() {
    if (map_base) munmap(map_base, map_bytes);
    if (smem_map) munmap(smem_map, smem_map_bytes);
    free_plogs();
  }
};

thread_local Worker* tl_worker = nullptr;

// An alternate signal stack for this thread, if it has none (Python's faulthandler gives the main thread one): a
// fiber that overflows its stack faults on the guard page, and the handler needs a stack to run on.
void ensure_altstack() {
  stack_t cur;
  if (sigaltstack(nullptr, &cur) == 0 && !(cur.ss_flags & SS_DISABLE) && cur.ss_sp) return;
  stack_t st;
  st.ss_size = 64 * 1024;
  st.ss_sp = malloc(st.ss_size);  // lives as long as the thread
  st.ss_flags = 0;
  if (st.ss_sp) sigaltstack(&st, nullptr);
}

Worker* get_worker() {
  if (!tl_worker) {
    tl_worker = new Worker();  // lives as long as its OS thread (pool threads never exit)
    ensure_altstack();
  }
  return tl_worker;
}

// ---------------------------------------------------------------- context switch
#if defined(__x86_64__)
extern "C" void wb_ctx_switch(void** save_sp, void* new_sp);
extern "C" void wb_ctx_entry(void);
asm(R"(
.text
.p2align 4
.type wb_ctx_switch,@function
wb_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size wb_ctx_switch, .-wb_ctx_switch
.p2align 4
.type wb_ctx_entry,@function
wb_ctx_entry:
    movq %r12, %rdi
    callq *%r13
    ud2
.size wb_ctx_entry, .-wb_ctx_entry
)");
#endif

void fiber_main(Fiber* f);

inline void switch_to_fiber(Worker* w, Fiber* f) {
#if defined(__x86_64__)
  wb_ctx_switch(&w->sched_sp, f->sp);
#else
  swapcontext(&w->sched_uc, &f->uc);
#endif
}

inline void switch_to_sched(Fiber* f) {
#if defined(__x86_64__)
  wb_ctx_switch(&f->sp, f->w->sched_sp);
#else
  swapcontext(&f->uc, &f->w->sched_uc);
#endif
}

#if !defined(__x86_64__)
void uc_entry(unsigned hi, unsigned lo) {
  fiber_main((Fiber*)(((uintptr_t)hi << 32) | (uintptr_t)lo));
}
#endif

void init_fiber(Fiber* f, char* stack_lo) {
  f->t = wb_thread_of((uintptr_t)stack_lo);
#if defined(__x86_64__)
  // Stack as wb_ctx_switch leaves it: r15 r14 r13 r12 rbx rbp, return address. The FP control words
  // (MXCSR, x87 CW) are not switched: device code never changes rounding modes, and saving them costs
  // more than the rest of the switch.
  uintptr_t top = ((uintptr_t)f->t - 128) & ~(uintptr_t)15;
  uint64_t* s = (uint64_t*)(top - 56);  // after the 7 pops, rsp == top (16-byte aligned) in wb_ctx_entry
  s[0] = 0;                                 // r15
  s[1] = 0;                                 // r14
  s[2] = (uint64_t)(uintptr_t)&fiber_main;  // r13
  s[3] = (uint64_t)(uintptr_t)f;            // r12
  s[4] = 0;                                 // rbx
  s[5] = 0;                                 // rbp
  s[6] = (uint64_t)(uintptr_t)&wb_ctx_entry;
  f->sp = s;
#else
  getcontext(&f->uc);
  f->uc.uc_stack.ss_sp = stack_lo + 4096;
  f->uc.uc_stack.ss_size = (size_t)((char*)f->t - 256 - (stack_lo + 4096));
  f->uc.uc_link = nullptr;
  uintptr_t p = (uintptr_t)f;
  makecontext(&f->uc, (void (*)())uc_entry, 2, (unsigned)(p >> 32), (unsigned)(p & 0xffffffffu));
#endif
}

bool ensure_stacks(Worker* w, int n) {
  if (w->nstacks >= n) return true;
  if (w->map_base) munmap(w->map_base, w->map_bytes);
  w->map_base = nullptr;
  w->stacks = nullptr;
  w->nstacks = 0;
  size_t bytes = (size_t)n * WB_STACK_SIZE + WB_STACK_SIZE;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return false;
  uintptr_t a = ((uintptr_t)m + WB_STACK_SIZE - 1) & ~(uintptr_t)(WB_STACK_SIZE - 1);
  w->map_base = m;
  w->map_bytes = bytes;
  w->stacks = (char*)a;
  w->nstacks = n;
  long page = sysconf(_SC_PAGESIZE);
  for (int i = 0; i < n; ++i) mprotect(w->stacks + (size_t)i * WB_STACK_SIZE, (size_t)page, PROT_NONE);
  w->fibers.assign((size_t)n, Fiber());
  return true;
}

// Dynamic shared memory of `bytes`, with `rz` mapped bytes on each side (checked launches: out-of-bounds
// accesses land there, are reported, and corrupt nothing).
bool ensure_smem(Worker* w, size_t bytes, size_t rz) {
  size_t cap = bytes < 256 ? 256 : (bytes + 4095) & ~(size_t)4095;
  if (w->smem && w->smem_cap >= cap && w->smem_rz == rz) return true;
  if (w->smem_map) munmap(w->smem_map, w->smem_map_bytes);
  size_t total = cap + 2 * rz;
  void* m = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    w->smem = w->smem_map = nullptr;
    return false;
  }
  w->smem_map = (char*)m;
  w->smem_map_bytes = total;
  w->smem = (char*)m + rz;
  w->smem_cap = cap;
  w->smem_rz = rz;
  return true;
}

inline Fiber* self_fiber() { return (Fiber*)wb_self()->runtime; }

void set_error(Launch* L, const std::string& msg) {
  std::lock_guard<std::mutex> g(L->mu);
  if (L->error.empty()) L->error = msg;
  L->abort.store(1);
}

std::string where(const wb_thread* t) {
  char b[160];
  snprintf(b, sizeof b, "block (%u,%u,%u) thread (%u,%u,%u)", t->blockIdx.x, t->blockIdx.y, t->blockIdx.z,
           t->threadIdx.x, t->threadIdx.y, t->threadIdx.z);
  return b;
}

// Leave the running fiber for good (the launch is being stopped); the scheduler then returns.
__attribute__((noreturn)) void abandon(Fiber* f) {
  f->w->aborted = true;
  f->state = DONE;
  switch_to_sched(f);
  __builtin_trap();
}

inline void check_abort(Fiber* f) {
  if (__builtin_expect(f->w->L->abort.load(std::memory_order_relaxed) != 0, 0)) abandon(f);
}

// ---------------------------------------------------------------- profile mode: counting warp-level requests
// Which memory `a` is: 2 shared (offset from its window), 1 global (offset from the buffer's allocation start), 3
// the kernel's parameters or a warp collective's exchange buffer (not memory traffic on a GPU), 0 anything else (__device__ variables, buffers reached
// through pointers inside struct arguments: counted as P_OTHER, reported as not counted).
struct ProfWhere {
  uintptr_t st_lo, st_bytes, dy_lo, dy_bytes;
};

inline int prof_classify(Worker* w, const ProfWhere& P, uintptr_t a, uint64_t* off) {
  if (a - P.st_lo < P.st_bytes) {
    *off = a - P.st_lo;
    return 2;
  }
  if (a - P.dy_lo < P.dy_bytes) {
    *off = a - P.dy_lo;
    return 2;
  }
  if (a - (uintptr_t)w->warps < sizeof w->warps) return 3;  // a warp collective reading the lanes' values
  const std::vector<ProfRegion>& R = w->L->regions;
  size_t n = R.size();
  if (n == 0) return 0;
  size_t i = w->last_region < n ? w->last_region : 0;
  for (size_t k = 0; k < n; ++k, i = (i + 1 == n ? 0 : i + 1)) {
    if (a >= R[i].lo && a < R[i].hi) {
      w->last_region = i;
      *off = a - R[i].base;
      return R[i].kind;
    }
  }
  return 0;
}

// Number of distinct values of v[0..n) (sorted in place).
inline size_t prof_distinct(uint64_t* v, size_t n) {
  bool sorted = true;
  for (size_t i = 1; i < n && sorted; ++i) sorted = v[i - 1] <= v[i];
  if (!sorted) std::sort(v, v + n);
  size_t d = n ? 1 : 0;
  for (size_t i = 1; i < n; ++i) d += v[i] != v[i - 1];
  return d;
}

// One global request: the 32-byte sectors its active lanes touch (each once), the bytes they ask for, and the
// sectors consecutive addresses would need (its "ideal", never above the real count).
void prof_global(Worker* w, const uint64_t* off, const uint32_t* size, int n, unsigned flags) {
  uint64_t* c = w->pcnt;
  if (flags & WB_SAN_ATOMIC) {
    c[P_G_ATOM_REQ]++;
    c[P_G_ATOM_LANES] += (uint64_t)n;
    return;
  }
  // Usually the lanes' addresses ascend: count the sectors in one pass; otherwise sort them.
  uint64_t bytes = 0, nsec = 0, last = ~(uint64_t)0;
  bool ascending = true;
  for (int i = 0; i < n && ascending; ++i) {
    uint64_t s0 = off[i] >> 5, s1 = (off[i] + (size[i] ? size[i] : 1) - 1) >> 5;
    if (last != ~(uint64_t)0 && s0 < last) {
      ascending = false;
      break;
    }
    nsec += (s1 - s0 + 1) - (s0 == last ? 1 : 0);
    last = s1;
    bytes += size[i];
  }
  if (!ascending) {
    std::vector<uint64_t>& sec = w->scratch;
    sec.clear();
    bytes = 0;
    for (int i = 0; i < n; ++i) {
      uint64_t s0 = off[i] >> 5, s1 = (off[i] + (size[i] ? size[i] : 1) - 1) >> 5;
      for (uint64_t s = s0; s <= s1; ++s) sec.push_back(s);
      bytes += size[i];
    }
    nsec = prof_distinct(sec.data(), sec.size());
  }
  uint64_t ideal = std::min<uint64_t>(nsec, (bytes + 31) / 32);
  int base = (flags & WB_SAN_WRITE) ? P_G_ST_REQ : P_G_LD_REQ;
  c[base + 0]++;
  c[base + 1] += nsec;
  c[base + 2] += bytes;
  c[base + 3] += (uint64_t)n;
  c[base + 4] += ideal;
}

// One shared-memory request. 32 banks, 4 bytes wide: a pass (wavefront) serves one 4-byte word per bank, any number
// of lanes reading or writing that word (a broadcast). The lanes are processed in phases as the hardware does:
// accesses of up to 4 bytes by the whole warp at once, 8-byte accesses per half-warp, 16-byte (and wider) accesses
// per quarter-warp. A phase with active lanes needs as many wavefronts as the most distinct words any one bank
// holds; bank conflicts are the wavefronts beyond one per active phase.
void prof_shared(Worker* w, const uint64_t* off, const uint32_t* size, const unsigned char* lane, int n,
                 unsigned flags) {
  uint64_t* c = w->pcnt;
  if (flags & WB_SAN_ATOMIC) {
    c[P_S_ATOM_REQ]++;
    c[P_S_ATOM_LANES] += (uint64_t)n;
    return;
  }
  uint32_t width = 0;
  uint64_t bytes = 0;
  for (int i = 0; i < n; ++i) {
    width = std::max(width, size[i]);
    bytes += size[i];
  }
  const int shift = width <= 4 ? 5 : (width <= 8 ? 4 : 3);  // lanes per phase: 32, 16 or 8
  uint64_t wave = 0, phases = 0;
  for (int p = 0; p < (32 >> shift); ++p) {
    // Usually each bank holds one word (or none): one wavefront, found without sorting.
    uint64_t first[32];
    uint32_t seen = 0;
    bool active = false, one = true;
    for (int i = 0; i < n && one; ++i) {
      if ((lane[i] >> shift) != p) continue;
      active = true;
      uint64_t w0 = off[i] >> 2, w1 = (off[i] + (size[i] ? size[i] : 1) - 1) >> 2;
      for (uint64_t x = w0; x <= w1; ++x) {
        uint32_t b = (uint32_t)(x & 31);
        if (!(seen >> b & 1u)) {
          seen |= 1u << b;
          first[b] = x;
        } else if (first[b] != x) {
          one = false;
          break;
        }
      }
    }
    if (one) {
      if (active) wave++, phases++;
      continue;
    }
    std::vector<uint64_t>& words = w->scratch;
    words.clear();
    for (int i = 0; i < n; ++i) {
      if ((lane[i] >> shift) != p) continue;
      uint64_t w0 = off[i] >> 2, w1 = (off[i] + (size[i] ? size[i] : 1) - 1) >> 2;
      for (uint64_t x = w0; x <= w1; ++x) words.push_back(x);
    }
    prof_distinct(words.data(), words.size());
    int per_bank[32] = {0};
    int most = 0;
    for (size_t i = 0; i < words.size(); ++i) {
      if (i && words[i] == words[i - 1]) continue;
      most = std::max(most, ++per_bank[words[i] & 31]);
    }
    wave += (uint64_t)most;
    phases++;
  }
  int base = (flags & WB_SAN_WRITE) ? P_S_ST_REQ : P_S_LD_REQ;
  c[base + 0]++;
  c[base + 1] += wave;
  c[base + 2] += wave - phases;
  c[base + 3] += bytes;
  c[base + 4] += (uint64_t)n;
}

// The common request, counted without copying: every lane makes the same access (size, read/write) of at most 4
// bytes within one word, in one shared window or one global buffer. Returns false for anything else.
bool prof_uniform(Worker* w, const ProfWhere& P, const wb_prof_entry* const* e, int n) {
  const uint32_t sf = e[0]->size_flags;
  const uint32_t size = sf & WB_PROF_SIZE_MASK;
  const unsigned flags = sf >> 28;
  if (size == 0 || size > 4 || (flags & WB_SAN_ATOMIC)) return false;
  const uintptr_t a0 = (uintptr_t)e[0]->addr;
  uint64_t* c = w->pcnt;
  uintptr_t lo, len;
  bool shared = true;
  if (a0 - P.st_lo < P.st_bytes) {
    lo = P.st_lo, len = P.st_bytes;
  } else if (a0 - P.dy_lo < P.dy_bytes) {
    lo = P.dy_lo, len = P.dy_bytes;
  } else {
    uint64_t off0;
    if (prof_classify(w, P, a0, &off0) != 1) return false;
    const ProfRegion& R = w->L->regions[w->last_region];
    lo = R.lo, len = R.hi - R.lo;
    shared = false;
  }
  if (shared) {
    uint64_t first[32];
    uint32_t seen = 0;
    for (int i = 0; i < n; ++i) {
      uintptr_t off = (uintptr_t)e[i]->addr - lo;
      if (e[i]->size_flags != sf || off >= len || (off & 3) + size > 4) return false;
      uint64_t x = off >> 2;
      uint32_t b = (uint32_t)(x & 31);
      if (!(seen >> b & 1u)) {
        seen |= 1u << b;
        first[b] = x;
      } else if (first[b] != x) {
        return false;  // a bank conflict: the general count
      }
    }
    int base = (flags & WB_SAN_WRITE) ? P_S_ST_REQ : P_S_LD_REQ;
    c[base + 0]++;
    c[base + 1]++;
    c[base + 3] += (uint64_t)n * size;
    c[base + 4] += (uint64_t)n;
    return true;
  }
  const uintptr_t base_addr = w->L->regions[w->last_region].base;
  uint64_t nsec = 0, last = ~(uint64_t)0;
  for (int i = 0; i < n; ++i) {
    uintptr_t a = (uintptr_t)e[i]->addr;
    if (e[i]->size_flags != sf || a - lo >= len) return false;
    uint64_t s0 = (a - base_addr) >> 5, s1 = (a - base_addr + size - 1) >> 5;
    if (last != ~(uint64_t)0 && s0 < last) return false;  // not ascending: sort in the general count
    nsec += (s1 - s0 + 1) - (s0 == last ? 1 : 0);
    last = s1;
  }
  uint64_t bytes = (uint64_t)n * size;
  int base = (flags & WB_SAN_WRITE) ? P_G_ST_REQ : P_G_LD_REQ;
  c[base + 0]++;
  c[base + 1] += nsec;
  c[base + 2] += bytes;
  c[base + 3] += (uint64_t)n;
  c[base + 4] += std::min<uint64_t>(nsec, (bytes + 31) / 32);
  return true;
}

// A traced request (an access picture): each lane's access to global or shared memory, as prof_request counts it.
void prof_trace(Worker* w, const ProfWhere& P, int wi, const wb_prof_entry* const* e, const unsigned char* lane,
                int n) {
  Launch* L = w->L;
  const uint32_t req = w->trace_req++;
  const uint32_t mod = (uint32_t)L->d->module_base;
  for (int i = 0; i < n; ++i) {
    uint64_t off = 0;
    const uintptr_t a = (uintptr_t)e[i]->addr;
    const int where = prof_classify(w, P, a, &off);
    if (where != 1 && where != 2) continue;
    const uint64_t k = L->ntrace++;
    if (k >= L->d->trace_cap) continue;
    wb_trace_entry& t = L->d->trace[k];
    t.off = off;
    t.req = req;
    t.size_flags = e[i]->size_flags;
    t.pc = e[i]->pc - mod;
    t.region = (int16_t)(where == 1 ? L->regions[w->last_region].id : (a - P.st_lo < P.st_bytes ? -1 : -2));
    t.warp = (uint8_t)wi;
    t.lane = lane[i];
  }
}

// One warp-level request: the entries of its active lanes (`lane`: their lane numbers), split by memory space.
void prof_request(Worker* w, const ProfWhere& P, const wb_prof_entry* const* e, const unsigned char* lane, int n) {
  if (prof_uniform(w, P, e, n)) return;
  uint64_t goff[32], soff[32];
  uint32_t gsz[32], ssz[32];
  unsigned char glane[32], slane[32];
  int ng = 0, ns = 0;
  unsigned gflags = 0, sflags = 0;
  for (int i = 0; i < n; ++i) {
    uint64_t off = 0;
    int where = prof_classify(w, P, (uintptr_t)e[i]->addr, &off);
    uint32_t sz = e[i]->size_flags & WB_PROF_SIZE_MASK;
    unsigned fl = e[i]->size_flags >> 28;
    if (where == 1) {
      goff[ng] = off, gsz[ng] = sz, glane[ng] = lane[i], gflags |= fl;
      ++ng;
    } else if (where == 2) {
      soff[ns] = off, ssz[ns] = sz, slane[ns] = lane[i], sflags |= fl;
      ++ns;
    } else if (where == 0) {
      w->pcnt[P_OTHER]++;
    }
  }
  (void)glane;
  if (ng) prof_global(w, goff, gsz, ng, gflags);
  if (ns) prof_shared(w, soff, ssz, slane, ns, sflags);
}

// Lanes whose logs differ (divergence): group the k-th execution of each site by each lane (into w->groups).
void prof_group(Worker* w, const wb_prof_entry* const* lg, const size_t* cnt, const unsigned char* lanes, int k) {
  w->groups.clear();
  w->group_of.clear();
  for (int j = 0; j < k; ++j) {
    w->occ.clear();
    for (size_t i = 0; i < cnt[j]; ++i) {
      const wb_prof_entry* e = &lg[j][i];
      uint32_t nth = w->occ[e->pc]++;
      uint64_t key = ((uint64_t)e->pc << 32) | nth;
      auto it = w->group_of.find(key);
      uint32_t g;
      if (it == w->group_of.end()) {
        g = (uint32_t)w->groups.size();
        w->group_of.emplace(key, g);
        w->groups.push_back(ProfGroup());
        w->groups.back().n = 0;
      } else {
        g = it->second;
      }
      ProfGroup& G = w->groups[g];
      G.e[G.n] = e;
      G.lane[G.n] = lanes[j];
      G.n++;
    }
  }
}

void prof_general(Worker* w, const ProfWhere& P, const wb_prof_entry* const* lg, const size_t* cnt,
                  const unsigned char* lanes, int k) {
  prof_group(w, lg, cnt, lanes, k);
  for (const ProfGroup& G : w->groups) prof_request(w, P, G.e, G.lane, G.n);
}

// The logs of lanes that ran the same sequence of sites: the i-th entries of all of them are one request.
bool prof_same_sites(const wb_prof_entry* const* lg, const size_t* cnt, int k) {
  for (int j = 1; j < k; ++j) {
    if (cnt[j] != cnt[0]) return false;
    for (size_t i = 0; i < cnt[0]; ++i)
      if (lg[j][i].pc != lg[0][i].pc) return false;
  }
  return true;
}

// An access picture traces this block: keep warp wi's requests (grouped as they are counted), before they are.
void prof_trace_warp(Worker* w, const ProfWhere& P, int wi, const wb_prof_entry* const* lg, const size_t* cnt,
                     const unsigned char* lanes, int k) {
  const int tw = w->L->d->trace_warp;
  if (tw >= 0 && tw != wi) return;
  if (!prof_same_sites(lg, cnt, k)) {
    prof_group(w, lg, cnt, lanes, k);
    for (const ProfGroup& G : w->groups) prof_trace(w, P, wi, G.e, G.lane, G.n);
    return;
  }
  const wb_prof_entry* e[32];
  for (size_t i = 0; i < cnt[0]; ++i) {
    for (int j = 0; j < k; ++j) e[j] = &lg[j][i];
    prof_trace(w, P, wi, e, lanes, k);
  }
}

ProfWhere prof_where(Worker* w) {
  const Launch* L = w->L;
  ProfWhere P;
  P.st_lo = (uintptr_t)w->tls_base;
  P.st_bytes = w->tls_base ? L->d->tls_bytes : 0;
  P.dy_lo = (uintptr_t)w->smem;
  P.dy_bytes = L->smem;
  return P;
}

// Count the logged accesses of warp `wi` since its last flush, then empty its logs.
void prof_flush_warp(Worker* w, int wi) {
  const int base = wi * 32, nl = std::min(32, w->n - base);
  const wb_prof_entry* lg[32];
  size_t cnt[32];
  unsigned char lanes[32];
  int k = 0;
  for (int l = 0; l < nl; ++l) {
    Fiber& f = w->fibers[base + l];
    const wb_prof_entry* b = w->plog[base + l].buf;
    size_t c = b ? (size_t)(f.t->prof_cur - b) : 0;
    if (c) {
      lg[k] = b, cnt[k] = c, lanes[k] = (unsigned char)l;
      ++k;
    }
    f.t->prof_cur = w->plog[base + l].buf;  // the entries stay readable until the next access
  }
  if (k == 0) return;
  const ProfWhere P = prof_where(w);
  if (__builtin_expect(w->trace_block, 0)) prof_trace_warp(w, P, wi, lg, cnt, lanes, k);
  bool same = true;  // the usual case: every active lane ran the same sequence of sites
  for (int j = 1; j < k && same; ++j) {
    if (cnt[j] != cnt[0]) {
      same = false;
      break;
    }
    for (size_t i = 0; i < cnt[0]; ++i)
      if (lg[j][i].pc != lg[0][i].pc) {
        same = false;
        break;
      }
  }
  if (!same) {
    prof_general(w, P, lg, cnt, lanes, k);
    return;
  }
  const wb_prof_entry* e[32];
  for (size_t i = 0; i < cnt[0]; ++i) {
    for (int j = 0; j < k; ++j) e[j] = &lg[j][i];
    prof_request(w, P, e, lanes, k);
  }
}

void prof_flush_all(Worker* w) {
  for (int wi = 0; wi < (w->n + 31) / 32; ++wi) prof_flush_warp(w, wi);
}

// A __syncthreads completed: one barrier instruction per warp that has live lanes, and every log can be counted.
void prof_barrier(Worker* w) {
  for (int wi = 0; wi < (w->n + 31) / 32; ++wi)
    if (w->warps[wi].live) w->pcnt[P_BARRIERS]++;
  prof_flush_all(w);
}

void sync_partial_barrier(Worker* w);

void release_barrier(Worker* w) {
  if (w->L && w->L->san && w->live < w->n) sync_partial_barrier(w);
  if (w->L && w->L->prof) prof_barrier(w);
  int slot = w->bar_gen & 1;
  w->bar_result[slot] = w->bar_op == 0 ? w->bar_acc[0] : (w->bar_op == 1 ? w->bar_acc[1] : w->bar_acc[2]);
  w->bar_acc[0] = 0;
  w->bar_acc[1] = 1;
  w->bar_acc[2] = 0;
  w->bar_arrived = 0;
  w->bar_gen++;
  for (int i = 0; i < w->n; ++i)
    if (w->fibers[i].state == WAIT_BAR) w->fibers[i].state = READY;
}

void san_note_round(San* S, int wi, unsigned mask, unsigned gen) {
  SanWarp& sw = S->warps[wi];
  uint32_t r = gen + 1;
  if (mask == sw.all) {
    sw.full = r;
    return;
  }
  for (unsigned a = mask; a; a &= a - 1)
    for (unsigned b = mask; b; b &= b - 1) sw.pair[__builtin_ctz(a)][__builtin_ctz(b)] = r;
}

void release_warp(Worker* w, int wi) {
  Warp& W = w->warps[wi];
  if (w->L->san) san_note_round(w->L->san, wi, W.arrived_mask, W.gen);
  if (w->L->prof) {  // one collective per warp; all live lanes at it: their logs can be counted
    w->pcnt[P_WARP_COLL]++;
    if (W.arrived_mask == W.live) prof_flush_warp(w, wi);
  }
  int slot = W.gen & 1;
  W.active[slot] = W.arrived_mask;
  W.arrived = 0;
  W.arrived_mask = 0;
  W.gen++;
  int base = wi * 32;
  for (int l = 0; l < 32 && base + l < w->n; ++l)
    if (w->fibers[base + l].state == WAIT_WARP) w->fibers[base + l].state = READY;
}

void fill_coords(const Launch* L, uint32_t block1, unsigned tid, unsigned* b, unsigned* t) {
  long lb = (long)block1 - 1;
  b[0] = (unsigned)(lb % L->grid.x);
  b[1] = (unsigned)((lb / L->grid.x) % L->grid.y);
  b[2] = (unsigned)(lb / ((long)L->grid.x * L->grid.y));
  t[0] = tid % L->block.x;
  t[1] = (tid / L->block.x) % L->block.y;
  t[2] = tid / (L->block.x * L->block.y);
}

// Add a record (memcheck: always, up to the cap; racecheck/initcheck: once per code location, counted).
wb_san_record* add_record(Launch* L, int tool, uint64_t key, bool dedupe) {
  L->totals[tool]++;
  if (dedupe && L->san) {
    auto it = L->san->seen.find(key);
    if (it != L->san->seen.end()) {
      L->recs[tool][it->second].count++;
      return nullptr;
    }
  }
  if ((int)L->recs[tool].size() >= L->cap) return nullptr;
  if (dedupe && L->san) L->san->seen[key] = (int)L->recs[tool].size();
  L->recs[tool].push_back(wb_san_record());
  wb_san_record* r = &L->recs[tool].back();
  std::memset(r, 0, sizeof *r);
  r->tool = tool;
  r->param = -1;
  r->count = 1;
  return r;
}

// ---------------------------------------------------------------- sanitizer: access checks
struct Access {
  const wb_thread* t;
  SanAcc cur;
  unsigned flags;
  uint64_t size;
  int space;  // 0 global, 1 static shared, 2 dynamic shared
  uint64_t window;
  int param;
};

inline bool is_atomic(unsigned f) { return (f & WB_SAN_ATOMIC) != 0; }

// Whether `prev` and the current access `c` (of another thread of the same block) are unordered.
inline bool unordered_in_block(const San* S, const SanAcc& prev, const SanAcc& c) {
  if (prev.epoch != c.epoch) return false;  // a __syncthreads completed in between
  if ((prev.thread >> 5) != (c.thread >> 5)) return true;
  const SanWarp& sw = S->warps[c.thread >> 5];
  uint32_t synced = sw.full > sw.pair[prev.thread & 31][c.thread & 31] ? sw.full : sw.pair[prev.thread & 31][c.thread & 31];
  return synced <= prev.wgen;  // no collective both lanes took part in since `prev`
}

inline bool conflicts(const San* S, const SanAcc& prev, const SanAcc& c, bool global) {
  if (prev.block == 0 || prev.atomic) return false;
  if (prev.block != c.block) return global;  // blocks are unordered; stale shared-memory state is not
  if (prev.thread == c.thread) return false;
  return unordered_in_block(S, prev, c);
}

void record_race(Launch* L, const Access& A, int hazard, const SanAcc& prev, bool prev_write, int64_t off) {
  uint64_t key = ((uint64_t)1 << 62) ^ ((uint64_t)hazard << 58) ^ ((uint64_t)A.space << 56) ^
                 ((uint64_t)prev.pc << 28) ^ (uint64_t)A.cur.pc ^ ((uint64_t)A.cur.pc << 40);
  wb_san_record* r = add_record(L, 1, key, true);
  if (!r) return;
  r->kind = hazard;
  r->space = A.space;
  r->param = A.param;
  r->offset = off;
  r->size = A.size;
  r->window = A.window;
  fill_coords(L, A.cur.block, A.cur.thread, r->block, r->thread);
  r->pc = A.cur.pc;
  r->write = (A.flags & WB_SAN_WRITE) != 0;
  r->prev_write = prev_write;
  fill_coords(L, prev.block, prev.thread, r->prev_block, r->prev_thread);
  r->prev_pc = prev.pc;
}

void record_uninit(Launch* L, const Access& A, int64_t off) {
  uint64_t key = ((uint64_t)2 << 62) ^ ((uint64_t)A.space << 56) ^ (uint64_t)A.cur.pc;
  wb_san_record* r = add_record(L, 2, key, true);
  if (!r) return;
  r->space = A.space;
  r->offset = off;
  r->size = A.size;
  r->window = A.window;
  fill_coords(L, A.cur.block, A.cur.thread, r->block, r->thread);
  r->pc = A.cur.pc;
}

void record_oob(Launch* L, const Access& A, int64_t off, bool misaligned) {
  wb_san_record* r = add_record(L, 0, 0, false);
  if (!r) return;
  r->kind = misaligned ? 3 : (A.flags & WB_SAN_WRITE) ? 1 : 0;
  r->param = A.param;
  r->space = A.space;
  r->offset = off;
  r->size = A.size;
  r->window = A.window;
  fill_coords(L, A.cur.block, A.cur.thread, r->block, r->thread);
  r->pc = A.cur.pc;
  r->write = (A.flags & WB_SAN_WRITE) != 0;
}

// ---------------------------------------------------------------- synccheck (checked launches)
// A synccheck record: `at` is the thread reported (its call at module address `pc`), `other` the thread that
// caused it (-1: none) at `other_pc`; `lanes` the lanes concerned, `mask` the collective's mask.
void record_sync(Launch* L, int kind, const Fiber* at, uintptr_t pc, int other, uintptr_t other_pc, unsigned mask,
                 unsigned lanes) {
  const uint64_t base = L->d->module_base;
  uint64_t off = pc ? pc - base : 0, poff = other_pc ? other_pc - base : 0;
  uint64_t key = ((uint64_t)3 << 62) ^ ((uint64_t)kind << 56) ^ (off << 20) ^ poff;
  wb_san_record* r = add_record(L, 3, key, true);
  if (!r) return;
  r->kind = kind;
  r->offset = (int64_t)mask;
  r->size = lanes;
  r->window = (uint64_t)(L->block.x * L->block.y * L->block.z);
  fill_coords(L, L->san->cur_block, (unsigned)at->index, r->block, r->thread);
  r->pc = off;
  r->prev_write = other >= 0;
  if (other >= 0) fill_coords(L, L->san->cur_block, (unsigned)other, r->prev_block, r->prev_thread);
  r->prev_pc = poff;
}

// A __syncthreads() completes although some threads of the block have exited without reaching it.
void sync_partial_barrier(Worker* w) {
  int exited = -1, waiting = -1;
  for (int i = 0; i < w->n && (exited < 0 || waiting < 0); ++i) {
    if (w->fibers[i].state == DONE && exited < 0) exited = i;
    if (w->fibers[i].state == WAIT_BAR && waiting < 0) waiting = i;
  }
  const Fiber* at = waiting >= 0 ? &w->fibers[waiting] : w->cur;
  if (!at) return;
  record_sync(w->L, SYNC_PARTIAL_BARRIER, at, at->bar_pc, exited, 0, 0, (unsigned)(w->n - w->live));
}

// A lane arrives at a warp collective (`pc`: its call): the checks of compute-sanitizer's synccheck.
void sync_warp_arrive(Worker* w, Fiber* f, Warp& W, unsigned mask, uintptr_t pc) {
  wb_thread* t = f->t;
  const unsigned lane = t->lane;
  const unsigned line = t->site_line;
  const char* file = t->site_file;
  t->site_line = 0;
  t->site_file = nullptr;
  f->coll_pc = pc;
  Launch* L = w->L;
  const bool bad = !(mask >> lane & 1u);
  if (bad) record_sync(L, SYNC_BAD_MASK, f, pc, -1, 0, mask, 1u << lane);  // invalid arguments: what else looks
  if (W.arrived == 0) {                                                     // wrong about this call follows from it
    W.req_mask = mask;
    W.site_line = line;
    W.site_file = file;
    W.site_pc = pc;
    W.opener = f->index;
    if (bad) return;
    unsigned gone = mask & L->san->warps[t->warp].all & ~W.live;  // named, but exited
    if (gone) record_sync(L, SYNC_EXITED_LANE, f, pc, (int)(t->warp * 32 + __builtin_ctz(gone)), 0, mask, gone);
    return;
  }
  if (bad) return;
  const Fiber& op = w->fibers[W.opener];
  bool other_site = line && W.site_line &&
                    (line != W.site_line || (file != W.site_file && (!file || !W.site_file || strcmp(file, W.site_file))));
  if (other_site) {
    record_sync(L, SYNC_DIVERGED, f, pc, W.opener, W.site_pc, mask, 1u << lane);
  } else if (!(W.req_mask >> lane & 1u) || !(mask >> op.t->lane & 1u)) {
    record_sync(L, SYNC_MASK_MISMATCH, f, pc, W.opener, W.site_pc, mask, 1u << lane);
  }
}

// A lane exits while a collective whose mask names it waits for it: it can never take part.
void sync_lane_exits(Worker* w, Fiber* f, const Warp& W) {
  const unsigned bit = 1u << f->t->lane;
  if (W.arrived == 0 || !(W.expect & bit) || (W.arrived_mask & bit)) return;
  const Fiber& op = w->fibers[W.opener];
  record_sync(w->L, SYNC_EXITED_LANE, &op, W.site_pc, f->index, 0, W.req_mask, bit);
}

inline void note_read(SanCell& c, const SanAcc& cur) {
  if (c.r.block == 0 || (c.r.block == cur.block && c.r.thread == cur.thread)) {
    c.r = cur;
    return;
  }
  // the previous last read is the newest one of another warp than cur's; otherwise rw still is
  if (c.r.block != cur.block || (c.r.thread >> 5) != (cur.thread >> 5)) c.rw = c.r;
  c.r2 = c.r;
  c.r = cur;
}

// Check one access against shadow `cells` (one per byte, the first at byte offset `off0` of its window).
void check_cells(Launch* L, San* S, const Access& A, SanCell* cells, int64_t off0) {
  const bool global = A.space == 0, atomic = is_atomic(A.flags);
  bool raw = false, war = false, waw = false, uninit = false;
  for (uint64_t i = 0; i < A.size; ++i) {
    SanCell& c = cells[i];
    if (A.flags & WB_SAN_READ) {
      if (!global && c.w.block != A.cur.block) {
        if (!uninit) record_uninit(L, A, off0 + (int64_t)i);
        uninit = true;
      } else if (!atomic && !raw && conflicts(S, c.w, A.cur, global)) {
        record_race(L, A, 0, c.w, true, off0 + (int64_t)i);
        raw = true;
      }
      if (!atomic) note_read(c, A.cur);
    }
    if (A.flags & WB_SAN_WRITE) {
      if (!atomic) {
        if (!waw && conflicts(S, c.w, A.cur, global)) {
          record_race(L, A, 2, c.w, true, off0 + (int64_t)i);
          waw = true;
        }
        if (!war) {
          const SanAcc* rd = conflicts(S, c.r, A.cur, global)    ? &c.r
                             : conflicts(S, c.r2, A.cur, global) ? &c.r2
                             : conflicts(S, c.rw, A.cur, global) ? &c.rw : nullptr;
          if (rd) {
            record_race(L, A, 1, *rd, false, off0 + (int64_t)i);
            war = true;
          }
        }
      }
      c.w = A.cur;
    }
  }
}

SanCell* shadow(SanRegion& R) {
  if (!R.cells && R.bytes) {
    size_t mb = R.bytes * sizeof(SanCell);
    void* m = mmap(nullptr, mb, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    R.cells = (SanCell*)m;
    R.map_bytes = mb;
  }
  return R.cells;
}

// The buffer (index into buf_*) of a copied region R (SanRegion or GuardRegion: the caller's memory at R.orig,
// its copy at R.lo) whose copy holds `p`, or the nearest one; sets `start` to that buffer's address in the copy.
template <typename Region>
int nearest_buffer(const wb_launch_desc* d, const Region& R, uintptr_t p, uintptr_t* start) {
  int best = -1;
  uint64_t best_dist = ~(uint64_t)0;
  for (int i = 0; i < d->nbuf; ++i) {
    if (d->buf_ptr[i] < R.orig || d->buf_ptr[i] >= R.orig + R.bytes) continue;
    uintptr_t lo = R.lo + (d->buf_ptr[i] - R.orig), hi = lo + d->buf_bytes[i];
    uint64_t dist = p < lo ? lo - p : (p >= hi ? p - hi + 1 : 0);
    if (dist < best_dist) {
      best = i;
      best_dist = dist;
      *start = lo;
    }
  }
  return best;
}

// The pointer argument whose copy holds `p`, or the nearest one (for an access in a redzone); sets `start`.
int param_of(const Launch* L, const SanRegion& R, uintptr_t p, uintptr_t* start) {
  return nearest_buffer(L->d, R, p, start);
}

// A shared-memory access: within a window (checked) or in a redzone (out of bounds); false if neither.
bool shared_access(Launch* L, San* S, Access& A, uintptr_t p) {
  const uintptr_t st = S->st_lo, dy = S->dy_lo, rz = S->rz;
  int64_t off;
  if (st && (p - st < S->st_bytes || (p >= st - rz && p < st + S->st_bytes + rz))) {
    A.space = 1;
    A.window = S->st_bytes;
    off = (int64_t)(p - st);
  } else if (dy && (p - dy < S->dy_bytes || (p >= dy - rz && p < dy + S->dy_bytes + rz))) {
    A.space = 2;
    A.window = S->dy_bytes;
    off = (int64_t)(p - dy);
  } else {
    return false;
  }
  if (A.flags & WB_SAN_MISALIGNED) {
    record_oob(L, A, off, true);
    return true;
  }
  if (off < 0 || (uint64_t)off + A.size > A.window) {
    record_oob(L, A, off, false);
    return true;
  }
  SanRegion& R = A.space == 1 ? S->st : S->dy;
  SanCell* cells = shadow(R);
  if (cells) check_cells(L, S, A, cells + off, off);
  return true;
}

void global_access(Launch* L, San* S, Access& A, uintptr_t p) {
  for (SanRegion& R : S->globals) {
    if (p < R.lo - R.rz || p >= R.lo + R.bytes + R.rz) continue;
    uintptr_t start = R.lo;
    int bi = param_of(L, R, p, &start);
    A.space = 0;
    A.param = bi >= 0 ? L->d->buf_param[bi] : -1;
    A.window = bi >= 0 ? L->d->buf_bytes[bi] : R.bytes;
    int64_t off = (int64_t)(p - start);
    if (A.flags & WB_SAN_MISALIGNED) {
      record_oob(L, A, off, true);
      return;
    }
    if (p < R.lo || p + A.size > R.lo + R.bytes || off < 0 || (uint64_t)off + A.size > A.window) {
      record_oob(L, A, off, false);  // outside the buffer: its redzone, or the next buffer's
      return;
    }
    SanCell* cells = shadow(R);
    if (cells) check_cells(L, S, A, cells + (p - R.lo), off);
    return;
  }
}

// ---------------------------------------------------------------- guarded copies (unchecked launches)
const unsigned char CANARY = 0xCB;
struct MapCache {  // mappings kept between launches (under launch_mu): no page faults for repeated launches
  struct Map {
    char* map;
    size_t map_bytes, data;
  };
  std::vector<Map> maps;
  size_t bytes = 0;  // their data pages
};
MapCache g_maps;
const size_t MAP_CACHE_BYTES = (size_t)1 << 30, MAP_CACHE_ONE = (size_t)256 << 20;  // data bytes

char* guard_map(size_t total) {
  for (size_t i = 0; i < g_maps.maps.size(); ++i)
    if (g_maps.maps[i].map_bytes == total) {
      char* m = g_maps.maps[i].map;
      g_maps.bytes -= g_maps.maps[i].data;
      g_maps.maps.erase(g_maps.maps.begin() + (long)i);
      return m;
    }
  void* m = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return m == MAP_FAILED ? nullptr : (char*)m;
}

void guard_release(GuardRegion& R) {
  if (!R.map || !R.owned) return;
  if (R.data <= MAP_CACHE_ONE && g_maps.bytes + R.data <= MAP_CACHE_BYTES && g_maps.maps.size() < 16) {
    madvise(R.map + R.guard, R.data, MADV_FREE);  // the system may take the pages back; usually they stay
    g_maps.maps.push_back({R.map, R.map_bytes, R.data});
    g_maps.bytes += R.data;
  } else {
    munmap(R.map, R.map_bytes);
  }
  R.map = nullptr;
}

// The pointer arguments' buffers, merged where they overlap (an in-place kernel passes one array twice).
std::vector<GuardRegion> merged_buffers(const wb_launch_desc* d) {
  std::vector<std::pair<std::pair<uintptr_t, uintptr_t>, bool>> iv;
  for (int i = 0; i < d->nbuf; ++i)
    if (d->buf_ptr[i] && d->buf_bytes[i])
      iv.push_back({{d->buf_ptr[i], d->buf_ptr[i] + d->buf_bytes[i]},
                    d->buf_flags && (d->buf_flags[i] & WB_BUF_READONLY)});
  std::sort(iv.begin(), iv.end());
  std::vector<GuardRegion> out;
  for (auto& v : iv) {
    if (!out.empty() && v.first.first < out.back().orig + out.back().bytes) {
      GuardRegion& R = out.back();
      if (v.first.second > R.orig + R.bytes) R.bytes = v.first.second - R.orig;
      R.readonly = R.readonly && v.second;  // read-only only if every view of it is
    } else {
      GuardRegion R;
      R.orig = v.first.first;
      R.bytes = v.first.second - v.first.first;
      R.readonly = v.second;
      out.push_back(R);
    }
  }
  return out;
}

// Point every pointer argument at its buffer's copy (`lo` of its region).
void redirect_args(const wb_launch_desc* d, const std::vector<GuardRegion>& regions) {
  for (int i = 0; i < d->nbuf; ++i)
    for (const GuardRegion& R : regions)
      if (d->buf_ptr[i] >= R.orig && d->buf_ptr[i] < R.orig + R.bytes)
        *(uint64_t*)(uintptr_t)d->buf_slot[i] = R.lo + (d->buf_ptr[i] - R.orig);
}

bool guard_create(Launch* L, const wb_launch_desc* d) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  L->guards = new std::vector<GuardRegion>(merged_buffers(d));
  for (GuardRegion& R : *L->guards) {
    R.data = (R.bytes + 256 + page - 1) & ~(page - 1);
    R.guard = std::max<size_t>((size_t)1 << 20, R.data);  // PROT_NONE: address space only
    R.map_bytes = 2 * R.guard + R.data;
    R.map = guard_map(R.map_bytes);
    if (!R.map) return false;
    char* data = R.map + R.guard;
    if (mprotect(data, R.data, PROT_READ | PROT_WRITE) != 0) return false;
    uintptr_t end = (uintptr_t)data + R.data;
    R.lo = ((end - R.bytes - (R.orig & 255)) & ~(uintptr_t)255) + (R.orig & 255);
    std::memset(data, CANARY, R.lo - (uintptr_t)data);
    std::memcpy((void*)R.lo, (const void*)R.orig, R.bytes);
    std::memset((void*)(R.lo + R.bytes), CANARY, end - (R.lo + R.bytes));
    if (R.readonly) mprotect(data, R.data, PROT_READ);
  }
  redirect_args(d, *L->guards);
  return true;
}

// The buffer (index into buf_*) of region R nearest to address p.
int guard_param(const wb_launch_desc* d, const GuardRegion& R, uintptr_t p, int64_t* off) {
  uintptr_t start = 0;
  int best = nearest_buffer(d, R, p, &start);
  if (best >= 0) *off = (int64_t)(p - start);
  return best;
}

// A byte between a copy and its guards that is no longer the canary: an out-of-bounds write (found afterwards).
bool canary_broken(const GuardRegion& R, uintptr_t* where) {
  const unsigned char* data = (const unsigned char*)(R.map + R.guard);
  const unsigned char* end = data + R.data;
  for (const unsigned char* q = (const unsigned char*)(R.lo + R.bytes); q < end; ++q)
    if (*q != CANARY) return *where = (uintptr_t)q, true;
  for (const unsigned char* q = (const unsigned char*)R.lo; q-- > data;)
    if (*q != CANARY) return *where = (uintptr_t)q, true;
  return false;
}

// After an unchecked launch that did not fail otherwise: an out-of-bounds write that stayed within the slack
// between a copy and its guard page broke a canary.
void guard_check(Launch* L, const wb_launch_desc* d) {
  if (!L->guards) return;
  for (GuardRegion& R : *L->guards) {
    if (!R.map || !R.owned) continue;
    uintptr_t at = 0;
    if (!L->faulted.load() && L->error.empty() && canary_broken(R, &at)) {
      int64_t off = 0;
      int bi = guard_param(d, R, at, &off);
      char msg[512];
      snprintf(msg, sizeof msg,
               "an out-of-bounds write: byte %lld %s of a %llu-byte buffer was written (found after the launch by "
               "a canary, so the thread is unknown)",
               (long long)(off < 0 ? -off : off - (int64_t)(bi >= 0 ? d->buf_bytes[bi] : R.bytes)),
               off < 0 ? "before the start" : "past the end",
               (unsigned long long)(bi >= 0 ? d->buf_bytes[bi] : R.bytes));
      L->error = msg;
      L->err_kind = ERR_CANARY;
      L->err_param = bi;
      return;
    }
  }
}

// After an unchecked launch: copy the buffers back, restore the pointers, release the copies.
void guard_finish(Launch* L, const wb_launch_desc* d) {
  if (!L->guards) return;
  bool owned = false;
  for (GuardRegion& R : *L->guards) {
    if (!R.map || !R.owned) continue;
    owned = true;
    if (!R.readonly) std::memcpy((void*)R.orig, (const void*)R.lo, R.bytes);
  }
  if (owned)
    for (int i = 0; i < d->nbuf; ++i) *(uint64_t*)(uintptr_t)d->buf_slot[i] = d->buf_ptr[i];
  for (GuardRegion& R : *L->guards) guard_release(R);
  delete L->guards;
  L->guards = nullptr;
}

// Profile launches on guarded copies: the buffers' regions move with them (offsets from the allocation start, and so
// the sectors counted, stay the same).
void guard_translate(Launch* L) {
  if (!L->guards) return;
  for (ProfRegion& r : L->regions) {
    if (r.kind != 1) continue;
    for (const GuardRegion& G : *L->guards)
      if (r.lo >= G.orig && r.lo < G.orig + G.bytes) {
        uintptr_t delta = G.lo - G.orig;
        r.lo += delta, r.hi += delta, r.base += delta;
        break;
      }
  }
}

// Checked launches: the read-only copies, for the fault handler to name a write to one.
void guard_note_readonly(Launch* L, const San* S) {
  for (const SanRegion& R : S->globals) {
    if (!R.readonly) continue;
    if (!L->guards) L->guards = new std::vector<GuardRegion>();
    GuardRegion G;
    G.orig = R.orig;
    G.bytes = R.bytes;
    G.map = R.copy_map;
    G.map_bytes = R.copy_bytes;
    G.guard = R.rz;
    G.data = R.copy_bytes - 2 * R.rz;
    G.lo = R.lo;
    G.readonly = true;
    G.owned = false;
    L->guards->push_back(G);
  }
}

// Where fault address `a` lies: 0 none of the guarded regions, 1 a guard page (out of bounds), 2 a read-only copy.
int guard_lookup(const Launch* L, uintptr_t a, const GuardRegion** hit) {
  if (!L->guards) return 0;
  for (const GuardRegion& R : *L->guards) {
    if (a < (uintptr_t)R.map || a >= (uintptr_t)R.map + R.map_bytes) continue;
    *hit = &R;
    uintptr_t data = (uintptr_t)R.map + R.guard;
    return (a >= data && a < data + R.data) ? (R.readonly ? 2 : 0) : 1;
  }
  return 0;
}

// Copy the buffers back to the caller's memory, put the original pointers back and free everything.
void san_free(San* S, const wb_launch_desc* d) {
  for (SanRegion& R : S->globals)
    if (R.copy_map && !R.readonly) std::memcpy((void*)R.orig, (const void*)R.lo, R.bytes);
  for (int i = 0; i < d->nbuf; ++i) *(uint64_t*)(uintptr_t)d->buf_slot[i] = d->buf_ptr[i];
  for (SanRegion* R : {&S->st, &S->dy})
    if (R->cells) munmap(R->cells, R->map_bytes);
  for (SanRegion& R : S->globals) {
    if (R.cells) munmap(R.cells, R.map_bytes);
    if (R.copy_map) munmap(R.copy_map, R.copy_bytes);
  }
  delete S;
}

// Run the kernel on a copy of every buffer with a redzone on each side: an out-of-bounds access lands in the
// redzone (mapped memory: nothing is corrupted) and is reported. Overlapping arguments share one copy.
bool san_copy_buffers(San* S, const wb_launch_desc* d) {
  for (SanRegion& R : S->globals) {
    size_t page = 4096, bytes = (R.bytes + page - 1) & ~(page - 1);
    R.rz = std::max<size_t>(d->redzone, bytes);
    R.copy_bytes = 2 * R.rz + bytes;
    void* m = mmap(nullptr, R.copy_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                   0);
    if (m == MAP_FAILED) return false;
    R.copy_map = (char*)m;  // the redzones stay untouched (zero pages) until an out-of-bounds access
    R.lo = (uintptr_t)(R.copy_map + R.rz);
    std::memcpy((void*)R.lo, (const void*)R.orig, R.bytes);
  }
  if (d->buf_flags) {  // read-only arrays: their copies too, so that a write faults (and names the parameter)
    for (const GuardRegion& ro : merged_buffers(d)) {
      if (!ro.readonly) continue;
      for (SanRegion& R : S->globals)
        if (ro.orig >= R.orig && ro.orig + ro.bytes <= R.orig + R.bytes && ro.orig == R.orig && ro.bytes == R.bytes) {
          size_t page = 4096, bytes = (R.bytes + page - 1) & ~(page - 1);
          mprotect((void*)R.lo, bytes, PROT_READ);
          R.readonly = true;
        }
    }
  }
  for (int i = 0; i < d->nbuf; ++i)
    for (SanRegion& R : S->globals)
      if (d->buf_ptr[i] >= R.orig && d->buf_ptr[i] < R.orig + R.bytes)
        *(uint64_t*)(uintptr_t)d->buf_slot[i] = R.lo + (d->buf_ptr[i] - R.orig);
  return true;
}

San* san_create(const wb_launch_desc* d) {
  San* S = new San();
  S->rz = d->redzone;
  std::vector<std::pair<uintptr_t, uintptr_t>> iv;
  for (int i = 0; i < d->nbuf; ++i)
    if (d->buf_ptr[i] && d->buf_bytes[i]) iv.push_back({d->buf_ptr[i], d->buf_ptr[i] + d->buf_bytes[i]});
  std::sort(iv.begin(), iv.end());
  for (auto& v : iv) {  // aliasing parameters (an in-place kernel) share one shadow
    if (!S->globals.empty() && v.first < S->globals.back().orig + S->globals.back().bytes) {
      SanRegion& R = S->globals.back();
      if (v.second > R.orig + R.bytes) R.bytes = v.second - R.orig;
    } else {
      SanRegion R{};
      R.orig = v.first;
      R.bytes = v.second - v.first;
      S->globals.push_back(R);
    }
  }
  return S;
}

void san_block_start(Launch* L, Worker* w, long b, int n) {
  San* S = L->san;
  S->cur_block = (uint32_t)(b + 1);
  SanCell* cells = L->d->nguard ? shadow(S->st) : nullptr;
  for (int g = 0; cells && g < L->d->nguard; ++g)
    for (uint64_t i = 0; i < L->d->guard[2 * g + 1] && L->d->guard[2 * g] + i < S->st_bytes; ++i) {
      SanAcc& a = cells[L->d->guard[2 * g] + i].w;
      a = SanAcc{S->cur_block, w->bar_gen, 0, 0, 0, 1};  // written, atomically: never a hazard
    }
  int nwarps = (n + 31) / 32;
  for (int i = 0; i < nwarps; ++i) {
    SanWarp& sw = S->warps[i];
    sw.all = w->warps[i].live;
    sw.full = 0;
    std::memset(sw.pair, 0, sizeof sw.pair);
  }
}

// ---------------------------------------------------------------- scheduler
void fiber_main(Fiber* f) {
  Worker* w = f->w;
  w->L->invoke(w->L->args);
  f->state = DONE;
  w->live--;
  if (w->L->san) sync_lane_exits(w, f, w->warps[f->t->warp]);
  if (w->bar_arrived > 0 && w->bar_arrived == w->live) release_barrier(w);
  Warp& W = w->warps[f->t->warp];
  W.live &= ~(1u << f->t->lane);
  if (W.arrived > 0 && W.arrived == __builtin_popcount(W.expect & W.live)) release_warp(w, (int)f->t->warp);
  switch_to_sched(f);
  __builtin_trap();
}

void poison_shared(Launch* L, Worker* w) {
  const wb_launch_desc* d = L->d;
  if (w->tls_base && d->checked)  // the static window only, not the redzones around it
    std::memset(w->tls_base + d->static_lo, 0xFF, d->static_bytes);
  else if (w->tls_base && d->tls_bytes)
    std::memset(w->tls_base, 0xFF, d->tls_bytes);
  if (L->smem) std::memset(w->smem, 0xFF, L->smem);
}

void init_block(Worker* w, Launch* L, long b, int n) {
  const wb_uint3 bd = L->block, gd = L->grid;
  wb_uint3 bid;
  bid.x = (unsigned)(b % gd.x);
  bid.y = (unsigned)((b / gd.x) % gd.y);
  bid.z = (unsigned)(b / ((long)gd.x * gd.y));
  w->n = n;
  w->live = n;
  w->bar_arrived = 0;
  w->bar_acc[0] = 0;
  w->bar_acc[1] = 1;
  w->bar_acc[2] = 0;
  w->trace_block = L->prof && L->d->trace && b == L->d->trace_block;
  w->trace_req = 0;
  int nwarps = (n + 31) / 32;
  for (int i = 0; i < nwarps; ++i) {
    Warp& W = w->warps[i];
    int lanes = n - i * 32 < 32 ? n - i * 32 : 32;
    W.live = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
    W.arrived = 0;
    W.arrived_mask = 0;
    W.expect = 0;
    W.gen = 0;
  }
  for (int i = 0; i < n; ++i) {
    Fiber* f = &w->fibers[i];
    f->w = w;
    f->index = i;
    f->state = READY;
    init_fiber(f, w->stacks + (size_t)i * WB_STACK_SIZE);
    wb_thread* t = f->t;
    t->threadIdx.x = (unsigned)(i % bd.x);
    t->threadIdx.y = (unsigned)((i / bd.x) % bd.y);
    t->threadIdx.z = (unsigned)(i / (bd.x * bd.y));
    t->blockIdx = bid;
    t->blockDim = bd;
    t->gridDim = gd;
    t->lane = (unsigned)(i & 31);
    t->warp = (unsigned)(i >> 5);
    t->dyn_smem = w->smem;
    t->runtime = f;
    t->prof_cur = t->prof_end = nullptr;
    if (L->prof) {
      t->prof_cur = w->plog[i].buf;
      t->prof_end = w->plog[i].buf + w->plog[i].cap;
    }
  }
  poison_shared(L, w);
  if (L->san) san_block_start(L, w, b, n);
}

void report_deadlock(Worker* w, Launch* L, int n) {
  int nb = 0, nw = 0, first_b = -1, first_w = -1, first_done = -1;
  for (int i = 0; i < n; ++i) {
    int s = w->fibers[i].state;
    if (s == WAIT_BAR) { nb++; if (first_b < 0) first_b = i; }
    if (s == WAIT_WARP) { nw++; if (first_w < 0) first_w = i; }
    if (s == DONE && first_done < 0) first_done = i;
  }
  if (L->san) {  // checked: a synccheck record (the launch stops: no thread can go on)
    int at = first_b >= 0 ? first_b : first_w;
    const Fiber& fa = w->fibers[at >= 0 ? at : 0];
    int other = first_b >= 0 && first_w >= 0 ? first_w : first_done;
    record_sync(L, SYNC_DEADLOCK, &fa, first_b >= 0 ? fa.bar_pc : fa.coll_pc, other,
                other >= 0 && other == first_w ? w->fibers[other].coll_pc : 0, 0, (unsigned)nb);
    L->abort.store(1);
    w->aborted = true;
    return;
  }
  const wb_uint3 bid = w->fibers[0].t->blockIdx;
  char msg[512];
  snprintf(msg, sizeof msg,
           "deadlock in block (%u,%u,%u): %d thread(s) wait at __syncthreads() (first: linear thread %d), "
           "%d wait at a warp collective (first: %d), %d exited (first: %d). A barrier inside a branch "
           "that not all threads of the block (or all lanes named in the mask) take never completes.",
           bid.x, bid.y, bid.z, nb, first_b, nw, first_w, n - w->live, first_done);
  set_error(L, msg);
  w->aborted = true;
}

void run_block(Worker* w, Launch* L, long b) {
  int n = (int)(L->block.x * L->block.y * L->block.z);
  init_block(w, L, b, n);
  while (w->live > 0) {
    bool progress = false;
    for (int i = 0; i < n; ++i) {
      Fiber* f = &w->fibers[i];
      if (f->state != READY) continue;
      progress = true;
      w->cur = f;
      switch_to_fiber(w, f);
      w->cur = nullptr;
      if (w->aborted) return;
      if (L->abort.load(std::memory_order_relaxed)) {
        w->aborted = true;
        return;
      }
    }
    if (!progress) {
      report_deadlock(w, L, n);
      return;
    }
  }
  if (L->prof) prof_flush_all(w);
}

void register_thread(Launch* L, bool add) {
  std::lock_guard<std::mutex> g(L->mu);
  pthread_t me = pthread_self();
  if (add) {
    L->threads.push_back(me);
  } else {
    for (size_t i = 0; i < L->threads.size(); ++i)
      if (pthread_equal(L->threads[i], me)) {
        L->threads.erase(L->threads.begin() + (long)i);
        break;
      }
  }
}

bool prepare_worker(Worker* w, Launch* L) {
  const wb_launch_desc* d = L->d;
  int n = (int)(L->block.x * L->block.y * L->block.z);
  if (!ensure_stacks(w, n)) {
    set_error(L, "could not allocate fiber stacks (mmap failed)");
    return false;
  }
  if (!ensure_smem(w, L->smem, d->checked ? d->redzone : 0)) {
    set_error(L, "could not allocate shared memory (mmap failed)");
    return false;
  }
  if (L->prof) {
    if (w->plog.size() < (size_t)n) w->plog.resize((size_t)n);
    std::memset(w->pcnt, 0, sizeof w->pcnt);
    w->last_region = 0;
  }
  w->tls_base = nullptr;
  if (d->tls_probe && d->dl_handle && d->tls_bytes) {
    d->tls_probe();  // allocates this thread's TLS block of the module
    void* base = nullptr;
    if (dlinfo(d->dl_handle, RTLD_DI_TLS_DATA, &base) == 0) w->tls_base = (char*)base;
  }
  if (L->san) {
    San* S = L->san;
    S->st_lo = w->tls_base ? (uintptr_t)w->tls_base + d->static_lo : 0;
    S->st_bytes = w->tls_base ? d->static_bytes : 0;
    S->st.lo = S->st_lo;
    S->st.bytes = S->st_bytes;
    S->dy_lo = (uintptr_t)w->smem;
    S->dy_bytes = L->smem;
    S->dy.lo = S->dy_lo;
    S->dy.bytes = S->dy_bytes;
  }
  return true;
}

void work(Launch* L) {
  Worker* w = get_worker();
  register_thread(L, true);
  if (prepare_worker(w, L)) {
    w->L = L;
    w->aborted = false;
    for (;;) {
      if (L->abort.load(std::memory_order_relaxed)) break;
      long b = L->next.fetch_add(1);
      if (b >= L->nblocks) break;
      run_block(w, L, b);
      if (w->aborted) break;
      L->done.fetch_add(1, std::memory_order_relaxed);
    }
    w->L = nullptr;
    if (L->prof) {
      std::lock_guard<std::mutex> g(L->mu);
      for (int i = 0; i < P_N; ++i) L->prof_tot[i] += w->pcnt[i];
    }
  }
  if (L->prof && w->plog_total > ((size_t)1 << 18)) w->free_plogs();  // small logs (<= 4 MiB) stay for the next one
  register_thread(L, false);
}

// ---------------------------------------------------------------- worker pool
struct Pool {
  std::mutex mu;
  std::condition_variable cv, done_cv;
  std::vector<std::thread> threads;
  Launch* job = nullptr;
  unsigned long gen = 0;
  int active = 0;
  int want = 0;  // how many pool threads take part in the current job

  pid_t owner = getpid();

  void resize(int n) {
    if (owner != getpid()) {  // forked child: the parent's pool threads do not exist here
      threads.clear();
      owner = getpid();
    }
    while ((int)threads.size() < n) {
      int id = (int)threads.size();
      threads.emplace_back([this, id] { loop(id); });
      threads.back().detach();
    }
  }
  void loop(int id) {
    unsigned long seen = 0;
    for (;;) {
      Launch* L;
      {
        std::unique_lock<std::mutex> g(mu);
        cv.wait(g, [&] { return gen != seen; });
        seen = gen;
        if (id >= want) continue;
        L = job;
      }
      work(L);
      {
        std::lock_guard<std::mutex> g(mu);
        if (--active == 0) done_cv.notify_all();
      }
    }
  }
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: detached threads use it
  return *p;
}
std::mutex launch_mu;

// ---------------------------------------------------------------- stopping launches: signals and watchdog
volatile sig_atomic_t g_sigint = 0;
struct sigaction g_old_int;
int g_preempt_sig = 0;

// Runs on a thread of the launch: abandon the running fiber if it is executing the kernel module's own code.
uintptr_t pc_of(void* ucv);

void preempt_handler(int, siginfo_t*, void* ucv) {
  Worker* w = tl_worker;
  if (!w || !w->L || !w->cur || !w->L->abort.load(std::memory_order_relaxed)) return;
  uintptr_t pc = pc_of(ucv);
  if (pc < w->L->d->text_lo || pc >= w->L->d->text_hi) return;  // libc/runtime code may hold locks: retry later
  abandon(w->cur);
}

uintptr_t pc_of(void* ucv) {
#if defined(__x86_64__)
  return (uintptr_t)((ucontext_t*)ucv)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (uintptr_t)((ucontext_t*)ucv)->uc_mcontext.pc;
#else
  (void)ucv;
  return 0;
#endif
}

const int FAULT_SIGNALS[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT};
const int NFAULT = (int)(sizeof FAULT_SIGNALS / sizeof FAULT_SIGNALS[0]);
struct sigaction g_old_fault[NFAULT];

uintptr_t sp_of(void* ucv) {
#if defined(__x86_64__)
  return (uintptr_t)((ucontext_t*)ucv)->uc_mcontext.gregs[REG_RSP];
#elif defined(__aarch64__)
  return (uintptr_t)((ucontext_t*)ucv)->uc_mcontext.sp;
#else
  (void)ucv;
  return 0;
#endif
}

bool on_fiber_stack(const Worker* w, uintptr_t sp) {
  return w->stacks && sp >= (uintptr_t)w->stacks && sp < (uintptr_t)w->stacks + (size_t)w->nstacks * WB_STACK_SIZE;
}

// Whether a fault is the kernel's to take (the fiber is abandoned) rather than the process's: a fault in the
// kernel module's own code; a SIGABRT the fiber raised itself (abort() from the C++ runtime: an uncaught
// exception); a memory fault on a guard page or read-only copy of this launch (also from memcpy/memset, which
// take no locks).
bool kernel_fault(const Launch* L, const Worker* w, int sig, const siginfo_t* si, void* ucv, int* guard) {
  uintptr_t pc = pc_of(ucv);
  *guard = 0;
  if (!L || !w->cur) return false;
  if (pc >= L->d->text_lo && pc < L->d->text_hi) {
    if (sig == SIGSEGV) {
      const GuardRegion* R = nullptr;
      *guard = guard_lookup(L, (uintptr_t)si->si_addr, &R);
    }
    return sig != SIGABRT || (si->si_code == SI_TKILL && si->si_pid == getpid());
  }
  if (!on_fiber_stack(w, sp_of(ucv))) return false;
  if (sig == SIGABRT) return si->si_code == SI_TKILL && si->si_pid == getpid();
  if (sig == SIGSEGV) {
    const GuardRegion* R = nullptr;
    *guard = guard_lookup(L, (uintptr_t)si->si_addr, &R);
    return *guard != 0;
  }
  return false;
}

bool fault_is_write(void* ucv) {
#if defined(__x86_64__)
  return (((ucontext_t*)ucv)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
  (void)ucv;
  return false;
#endif
}

// A fault the kernel caused, on a fiber: the launch fails with what happened, the block and the thread, and the
// process lives on. Anything else goes to the previous handler (Python's faulthandler, or the default: a crash),
// by restoring it and letting the faulting instruction run again.
void fault_handler(int sig, siginfo_t* si, void* ucv) {
  Worker* w = tl_worker;
  Launch* L = w ? w->L : nullptr;
  int guard = 0;
  if (w && kernel_fault(L, w, sig, si, ucv, &guard)) {
    if (L->faulted.exchange(1) == 0) {
      const wb_thread* t = w->cur->t;
      L->fault_addr = (uintptr_t)si->si_addr;
      L->fault_pc = pc_of(ucv);
      L->fault_sig = sig;
      L->fault_code = si->si_code;
      L->fault_write = fault_is_write(ucv);
      L->err_kind = guard == 1 ? ERR_GUARD : guard == 2 ? ERR_READONLY : ERR_NONE;
      uintptr_t stack_lo = (uintptr_t)t & ~(uintptr_t)(WB_STACK_SIZE - 1);
      L->fault_stack = sig == SIGSEGV && (uintptr_t)si->si_addr - stack_lo < (uintptr_t)sysconf(_SC_PAGESIZE) * 2;
      L->fault_block[0] = t->blockIdx.x, L->fault_block[1] = t->blockIdx.y, L->fault_block[2] = t->blockIdx.z;
      L->fault_thread[0] = t->threadIdx.x, L->fault_thread[1] = t->threadIdx.y, L->fault_thread[2] = t->threadIdx.z;
    }
    L->abort.store(1);
    abandon(w->cur);
  }
  for (int i = 0; i < NFAULT; ++i)
    if (FAULT_SIGNALS[i] == sig) sigaction(sig, &g_old_fault[i], nullptr);
}

void install_fault_handlers(bool on) {
  if (!on) {
    for (int i = 0; i < NFAULT; ++i) sigaction(FAULT_SIGNALS[i], &g_old_fault[i], nullptr);
    return;
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = fault_handler;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < NFAULT; ++i) sigaction(FAULT_SIGNALS[i], &sa, &g_old_fault[i]);
}

void sigint_handler(int sig, siginfo_t* si, void* uc) {
  if (!(g_old_int.sa_flags & SA_SIGINFO) && g_old_int.sa_handler == SIG_IGN) return;  // the process ignores Ctrl-C
  g_sigint = 1;
  if (g_old_int.sa_flags & SA_SIGINFO) {
    if (g_old_int.sa_sigaction) g_old_int.sa_sigaction(sig, si, uc);
  } else if (g_old_int.sa_handler != SIG_DFL && g_old_int.sa_handler != SIG_IGN) {
    g_old_int.sa_handler(sig);
  }
}

void install_preempt_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_preempt_sig = SIGRTMAX - 5;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = preempt_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(g_preempt_sig, &sa, nullptr);
  });
}

struct Watchdog {
  std::mutex mu;
  std::condition_variable cv;
  Launch* cur = nullptr;
  bool started = false;
  pid_t owner = getpid();

  void begin(Launch* L) {
    std::lock_guard<std::mutex> g(mu);
    if (owner != getpid()) {  // a forked child: the parent's watchdog thread does not exist here
      owner = getpid();
      started = false;
    }
    if (!started) {
      started = true;
      std::thread([this] { loop(); }).detach();
    }
    cur = L;
    cv.notify_all();
  }
  void end() {
    std::lock_guard<std::mutex> g(mu);
    cur = nullptr;
  }
  void loop() {
    std::unique_lock<std::mutex> g(mu);
    for (;;) {
      if (!cur) {
        cv.wait(g);
        continue;
      }
      cv.wait_for(g, std::chrono::milliseconds(10));
      if (cur) check(cur);
    }
  }
  static double estimate(Launch* L, double el) {
    long done = L->done.load();
    if (done > 0) return el * (double)L->nblocks / (double)done;
    long per_worker = (L->nblocks + L->nworkers - 1) / L->nworkers;
    return el * (double)per_worker;  // a lower bound: no block has finished yet
  }
  static void check(Launch* L) {
    const wb_launch_desc* d = L->d;
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - L->start).count();
    if (!L->abort.load()) {
      int why = RC_OK;
      if (g_sigint) {
        why = RC_INTERRUPTED;
      } else if (d->time_limit > 0 && el > d->time_limit) {
        why = RC_TIMEOUT;
      } else if (d->size_guard > 0 && el > 0.2 && el < std::min(5.0, d->size_guard / 2)) {  // decide early
        double est = estimate(L, el);
        if (est > d->size_guard) {
          why = RC_TOO_LARGE;
          L->estimate = est;
        }
      }
      if (why == RC_OK) return;
      std::lock_guard<std::mutex> g(L->mu);
      L->stop = why;
      L->abort.store(1);
    }
    std::lock_guard<std::mutex> g(L->mu);
    for (pthread_t t : L->threads) pthread_kill(t, g_preempt_sig);
  }
};

Watchdog& watchdog() {
  static Watchdog* w = new Watchdog();  // never destroyed: its thread uses it
  return *w;
}

}  // namespace

// ---------------------------------------------------------------- device-side entry points
extern "C" {

void wb_syncthreads(void) {
  Fiber* f = self_fiber();
  Worker* w = f->w;
  check_abort(f);
  f->bar_pc = (uintptr_t)__builtin_return_address(0);
  if (++w->bar_arrived == w->live) {
    release_barrier(w);
    return;
  }
  f->state = WAIT_BAR;
  switch_to_sched(f);
}

int wb_syncthreads_op(int pred, int op) {
  Fiber* f = self_fiber();
  Worker* w = f->w;
  check_abort(f);
  f->bar_pc = (uintptr_t)__builtin_return_address(0);
  unsigned slot = w->bar_gen & 1;
  w->bar_op = op;
  w->bar_acc[0] += pred != 0;
  w->bar_acc[1] &= pred != 0;
  w->bar_acc[2] |= pred != 0;
  if (++w->bar_arrived == w->live) {
    release_barrier(w);
  } else {
    f->state = WAIT_BAR;
    switch_to_sched(f);
  }
  return w->bar_result[slot];
}

}  // extern "C"

static const uint64_t* warp_gather(unsigned mask, uint64_t v, unsigned* active, uintptr_t pc) {
  Fiber* f = self_fiber();
  Worker* w = f->w;
  check_abort(f);
  const unsigned lane = f->t->lane;
  const int wi = (int)f->t->warp;
  Warp& W = w->warps[wi];
  const unsigned slot = W.gen & 1;
  if (w->L->san) sync_warp_arrive(w, f, W, mask, pc);
  if (W.arrived == 0) W.expect = (mask | (1u << lane)) & W.live;
  W.buf[slot][lane] = v;
  W.arrived++;
  W.arrived_mask |= 1u << lane;
  if (W.arrived >= __builtin_popcount(W.expect & W.live)) {
    release_warp(w, wi);
  } else {
    f->state = WAIT_WARP;
    switch_to_sched(f);
  }
  if (active) *active = W.active[slot];
  return W.buf[slot];
}

extern "C" {

const uint64_t* wb_warp_gather(unsigned mask, uint64_t v, unsigned* active) {
  return warp_gather(mask, v, active, (uintptr_t)__builtin_return_address(0));
}

void wb_syncwarp(unsigned mask) { warp_gather(mask, 0, nullptr, (uintptr_t)__builtin_return_address(0)); }

}  // extern "C"

namespace {
// Stop the launch from a call the kernel made (a trap, a failed assert, exit(), abort()): the error names the
// thread; `pc` (the call's return address in the module) gives the source line when `file` is unknown.
__attribute__((noreturn)) void stop_fiber(Fiber* f, int kind, const std::string& what, const char* file, int line,
                                          uintptr_t pc) {
  Launch* L = f->w->L;
  std::string msg = what;
  if (file && line > 0) msg += std::string(" (at ") + file + ":" + std::to_string(line) + ")";
  msg += ", in " + where(f->t);
  {
    std::lock_guard<std::mutex> g(L->mu);
    if (L->error.empty()) {
      L->error = msg;
      L->err_kind = kind;
      L->err_pc = (file && line > 0) ? 0 : pc;
    }
  }
  L->abort.store(1);
  abandon(f);
}

// The fiber running on this OS thread, if the caller is on its stack (else: host code, e.g. a Python thread).
Fiber* running_fiber() {
  Worker* w = tl_worker;
  if (!w || !w->L || !w->cur) return nullptr;
  return on_fiber_stack(w, (uintptr_t)__builtin_frame_address(0)) ? w->cur : nullptr;
}

const char* const NO_HOST_CALLS =
    "device code cannot call host functions (NVRTC and nvcc refuse it); the CPU engine stopped the launch instead of "
    "letting it end the Python process";
}  // namespace

extern "C" {

void wb_trap(const char* what, const char* file, int line) {
  stop_fiber(self_fiber(), ERR_TRAP, what, file, line, (uintptr_t)__builtin_return_address(0));
}

// Kernel modules are linked with --wrap for these: device code that calls them stops its launch, not the process.
WB_EXPORT __attribute__((noreturn)) void __wrap_exit(int code) {
  Fiber* f = running_fiber();
  if (!f) exit(code);
  stop_fiber(f, ERR_EXIT, "exit(" + std::to_string(code) + ") called in device code: " + NO_HOST_CALLS, nullptr, 0,
             (uintptr_t)__builtin_return_address(0));
}
WB_EXPORT __attribute__((noreturn)) void __wrap__exit(int code) {
  Fiber* f = running_fiber();
  if (!f) _exit(code);
  stop_fiber(f, ERR_EXIT, "_exit(" + std::to_string(code) + ") called in device code: " + NO_HOST_CALLS, nullptr, 0,
             (uintptr_t)__builtin_return_address(0));
}
WB_EXPORT __attribute__((noreturn)) void __wrap__Exit(int code) {
  Fiber* f = running_fiber();
  if (!f) _Exit(code);
  stop_fiber(f, ERR_EXIT, "_Exit(" + std::to_string(code) + ") called in device code: " + NO_HOST_CALLS, nullptr, 0,
             (uintptr_t)__builtin_return_address(0));
}
WB_EXPORT __attribute__((noreturn)) void __wrap_quick_exit(int code) {
  Fiber* f = running_fiber();
  if (!f) quick_exit(code);
  stop_fiber(f, ERR_EXIT, "quick_exit(" + std::to_string(code) + ") called in device code: " + NO_HOST_CALLS,
             nullptr, 0, (uintptr_t)__builtin_return_address(0));
}
WB_EXPORT __attribute__((noreturn)) void __wrap_abort(void) {
  Fiber* f = running_fiber();
  if (!f) abort();
  stop_fiber(f, ERR_ABORT, std::string("abort() called in device code: ") + NO_HOST_CALLS, nullptr, 0,
             (uintptr_t)__builtin_return_address(0));
}
// glibc's assert() (a header other than the engine's <assert.h>): a device-side assert, as CUDA's.
WB_EXPORT __attribute__((noreturn)) void __wrap___assert_fail(const char* expr, const char* file, unsigned line,
                                                               const char* fn) {
  Fiber* f = running_fiber();
  if (!f) {
    fprintf(stderr, "%s:%u: %s: Assertion `%s' failed.\n", file, line, fn, expr);
    abort();
  }
  stop_fiber(f, ERR_TRAP, std::string("device-side assert failed: ") + expr, file, (int)line,
             (uintptr_t)__builtin_return_address(0));
}

void wb_san_access(const void* addr, uint64_t size, unsigned flags, const void* pc) {
  wb_thread* t = wb_self();
  Fiber* f = (Fiber*)t->runtime;
  Worker* w = f->w;
  Launch* L = w->L;
  check_abort(f);
  San* S = L->san;
  if (!S || size == 0) return;
  Access A;
  A.t = t;
  A.flags = flags;
  A.size = size;
  A.param = -1;
  A.cur.block = S->cur_block;
  A.cur.epoch = w->bar_gen;
  A.cur.wgen = w->warps[t->warp].gen;
  A.cur.pc = (uint32_t)((uintptr_t)pc - L->d->module_base);
  A.cur.thread = (uint16_t)f->index;
  A.cur.atomic = (flags & WB_SAN_ATOMIC) ? 1 : 0;
  uintptr_t p = (uintptr_t)addr;
  if (!shared_access(L, S, A, p)) global_access(L, S, A, p);
}

// Profile builds: the running fiber's access log is full. Double it, unless the worker's logs would pass the
// launch's cap (one block holding too many accesses between two barriers): then the launch stops with an error.
wb_prof_entry* wb_prof_grow(void) {
  wb_thread* t = wb_self();
  Fiber* f = (Fiber*)t->runtime;
  Worker* w = f->w;
  Launch* L = w->L;
  check_abort(f);
  PLog& lg = w->plog[(size_t)f->index];
  size_t used = lg.buf ? (size_t)(t->prof_cur - lg.buf) : 0;
  size_t ncap = lg.cap ? lg.cap * 2 : 256;
  if (w->plog_total + (ncap - lg.cap) > L->d->prof_cap) {
    char msg[512];
    snprintf(msg, sizeof msg,
             "profile mode keeps every memory access of a block between two __syncthreads() (or warp collectives) "
             "to group them into warp-level requests, and %s made more than %lu of them (%lu MiB): profile a "
             "smaller problem (fewer threads per block, or less work per thread between barriers)",
             where(t).c_str(), (unsigned long)L->d->prof_cap,
             (unsigned long)(L->d->prof_cap * sizeof(wb_prof_entry) >> 20));
    set_error(L, msg);
    abandon(f);
  }
  const size_t color = (size_t)(f->index & 63) * 4;  // entries (64 bytes apart per fiber)
  void* mem = malloc((ncap + color) * sizeof(wb_prof_entry));
  if (!mem) {
    set_error(L, "profile mode: out of memory for the access logs");
    abandon(f);
  }
  wb_prof_entry* nb = (wb_prof_entry*)mem + color;
  if (used) std::memcpy(nb, lg.buf, used * sizeof(wb_prof_entry));
  free(lg.mem);
  w->plog_total += ncap - lg.cap;
  lg.mem = mem;
  lg.buf = nb;
  lg.cap = ncap;
  t->prof_cur = nb + used;
  t->prof_end = nb + ncap;
  return t->prof_cur;
}

// ---------------------------------------------------------------- host-side API (ctypes)
WB_EXPORT int wb_runtime_abi(void) { return WB_ABI_VERSION; }

// The load address of a dlopen'ed module (the pcs of sanitizer records are relative to it).
WB_EXPORT uint64_t wb_module_base(void* handle) {
  struct link_map* lm = nullptr;
  if (!handle || dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return 0;
  return (uint64_t)lm->l_addr;
}

static void install_sigint(bool on) {
  if (on) {
    g_sigint = 0;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = sigint_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &g_old_int);
  } else {
    sigaction(SIGINT, &g_old_int, nullptr);
  }
}

static void run_grid(Launch* L, int nthreads) {
  Pool& P = pool();
  int helpers = nthreads - 1;
  if (helpers > L->nblocks - 1) helpers = (int)(L->nblocks - 1);
  if (helpers < 0) helpers = 0;
  L->nworkers = helpers + 1;
  if (helpers > 0) {
    std::lock_guard<std::mutex> g(P.mu);
    P.resize(helpers);
    P.job = L;
    P.want = helpers;
    P.active = helpers;
    P.gen++;
    P.cv.notify_all();
  }
  work(L);
  if (helpers > 0) {
    std::unique_lock<std::mutex> g(P.mu);
    P.done_cv.wait(g, [&] { return P.active == 0; });
    P.job = nullptr;
  }
}

// Whether the x86-64 instruction at `pc` accesses memory with an SSE/AVX move or operation that requires a 16-byte
// aligned address (movaps/movapd/movdqa/movntps/movntdq and their VEX forms, legacy-SSE packed arithmetic): its
// general-protection fault then is a misaligned vector access, not a bad pointer.
bool aligned_vector_access(const unsigned char* p) {
#if defined(__x86_64__)
  bool p66 = false, rep = false;
  for (int i = 0; i < 4; ++i, ++p) {  // legacy prefixes
    if (*p == 0x66) p66 = true;
    else if (*p == 0xF2 || *p == 0xF3) rep = true;
    else if (!(*p == 0x2E || *p == 0x3E || *p == 0x26 || *p == 0x64 || *p == 0x65 || *p == 0x36 || *p == 0x67)) break;
  }
  unsigned op, modrm;
  if (*p == 0xC5 || *p == 0xC4) {  // VEX: only the aligned moves require alignment
    bool two = *p == 0xC5;
    if (!two && (p[1] & 0x1F) != 1) return false;  // not the 0F map
    unsigned pp = (two ? p[1] : p[2]) & 3;
    op = two ? p[2] : p[3];
    modrm = two ? p[3] : p[4];
    bool aligned = ((op == 0x28 || op == 0x29 || op == 0x2B) && pp <= 1) || ((op == 0x6F || op == 0x7F || op == 0xE7) && pp == 1);
    return aligned && (modrm >> 6) != 3;
  }
  if ((*p & 0xF0) == 0x40) ++p;  // REX
  if (*p != 0x0F) return false;
  op = p[1];
  modrm = p[2];
  if ((modrm >> 6) == 3) return false;  // a register operand
  if (op == 0x28 || op == 0x29 || op == 0x2B) return !rep;                  // movaps/movapd, movntps/pd
  if (p66 && (op == 0x6F || op == 0x7F || op == 0xE7)) return true;         // movdqa, movntdq
  if (!rep && op >= 0x51 && op <= 0x5F) return true;                        // packed ps/pd arithmetic
  if (p66 && ((op >= 0x60 && op <= 0x6D) || (op >= 0x74 && op <= 0x76) || (op >= 0xD1 && op <= 0xFE))) return true;
  return false;
#else
  (void)p;
  return false;
#endif
}

// The message of a fault of an unchecked launch (or of a checked one that memcheck does not report), in the words of
// the CPU's signal and of the error a GPU gives for the same bug.
static void fault_message(Launch* L, wb_launch_desc* d, char* who) {
  const char* sig = L->fault_sig == SIGBUS ? "bus error" : "segmentation fault";
  switch (L->fault_sig) {
    case SIGFPE:
      L->err_kind = ERR_FPE;
      snprintf(d->errbuf, d->errlen,
               "integer division by zero%s (SIGFPE on the CPU) in %s: integer division or remainder by zero is "
               "undefined behaviour in CUDA C; a GPU does not trap on it but gives an unspecified value, so the "
               "kernel would silently compute garbage there. Guard the divisor.",
               L->fault_code == FPE_INTOVF ? " or overflow (INT_MIN / -1)" : "", who);
      return;
    case SIGILL:
    case SIGTRAP:
      L->err_kind = ERR_ILL;
      snprintf(d->errbuf, d->errlen,
               "illegal instruction (%s on the CPU: __builtin_trap() or another trap instruction) in %s; on a GPU "
               "a trap stops the kernel with cudaErrorIllegalInstruction (\"an illegal instruction was "
               "encountered\")", L->fault_sig == SIGILL ? "SIGILL" : "SIGTRAP", who);
      return;
    case SIGABRT:
      L->err_kind = ERR_ABORT;
      snprintf(d->errbuf, d->errlen,
               "abort() (SIGABRT: std::terminate, an uncaught C++ exception, or abort() from a library) in %s: "
               "device code has no exceptions and cannot call host functions; on a GPU the launch fails with "
               "cudaErrorLaunchFailure (\"unspecified launch failure\")", who);
      return;
    default:
      break;
  }
  const GuardRegion* R = nullptr;
  int where = guard_lookup(L, L->fault_addr, &R);
  const char* rw = L->fault_write ? "write" : "read";
  if (where && R) {
    int64_t off = 0;
    int bi = guard_param(d, *R, L->fault_addr, &off);
    L->err_param = bi;
    uint64_t nb = bi >= 0 ? d->buf_bytes[bi] : R->bytes;
    if (where == 2) {
      L->err_kind = ERR_READONLY;
      snprintf(d->errbuf, d->errlen,
               "a write to a read-only array (byte offset %lld of a %llu-byte buffer) in %s: the array passed for "
               "this parameter is not writeable", (long long)off, (unsigned long long)nb, who);
      return;
    }
    L->err_kind = ERR_GUARD;
    char rel[96];
    if (off < 0)
      snprintf(rel, sizeof rel, "%lld bytes before the start", (long long)-off);
    else
      snprintf(rel, sizeof rel, "%lld bytes past the end", (long long)(off - (int64_t)nb));
    snprintf(d->errbuf, d->errlen,
             "an out-of-bounds %s, %s of a %llu-byte buffer (it hit the CPU engine's guard page: %s), in %s; on a "
             "GPU: cudaErrorIllegalAddress (\"an illegal memory access was encountered\"). Run the launch with "
             "checked=True for memcheck's full report", rw, rel, (unsigned long long)nb, sig, who);
    return;
  }
  bool in_text = L->fault_pc >= d->text_lo && L->fault_pc < d->text_hi;
  if (L->fault_sig == SIGSEGV && L->fault_code == SI_KERNEL && L->fault_addr == 0 && in_text &&
      aligned_vector_access((const unsigned char*)L->fault_pc)) {
    L->err_kind = ERR_MISALIGNED;  // x86: a general-protection fault, usually an aligned SSE load/store
    snprintf(d->errbuf, d->errlen,
             "misaligned address (a general-protection fault on the CPU: a 16-byte vector access, such as a "
             "float4/int4/double2 load or store, at an address that is not a multiple of 16) in %s; on a GPU: "
             "cudaErrorMisalignedAddress (\"misaligned address\"). Run the launch with checked=True for memcheck's "
             "report", who);
    return;
  }
  L->err_kind = ERR_SEGV;
  snprintf(d->errbuf, d->errlen,
           "%s at address %#lx (an invalid memory %s) in %s; on a GPU: cudaErrorIllegalAddress (\"an illegal "
           "memory access was encountered\"). Run the launch with checked=True to see the access and its source "
           "line", sig, (unsigned long)L->fault_addr, L->fault_write ? "write" : "access", who);
}

// A fault in a checked launch is a memcheck record (an access far from every buffer); otherwise a launch error.
static int fault_result(Launch* L, wb_launch_desc* d) {
  uint64_t pc = L->fault_pc - d->module_base;
  bool in_text = L->fault_pc >= d->text_lo && L->fault_pc < d->text_hi;
  d->err_pc = in_text ? pc + 1 : 0;
  bool memory = L->fault_sig == SIGSEGV || L->fault_sig == SIGBUS;
  const GuardRegion* R = nullptr;
  bool readonly = memory && guard_lookup(L, L->fault_addr, &R) == 2;
  if (d->checked && memory && !readonly && !L->fault_stack && d->nrecords < NTOOLS * d->record_cap) {
    wb_san_record& r = d->records[d->nrecords++];
    std::memset(&r, 0, sizeof r);
    r.tool = 0;
    r.kind = 4;  // a wild access
    r.param = -1;
    r.offset = (int64_t)L->fault_addr;
    std::memcpy(r.block, L->fault_block, sizeof r.block);
    std::memcpy(r.thread, L->fault_thread, sizeof r.thread);
    r.pc = pc;
    r.count = 1;
    d->totals[0]++;
    return RC_SANITIZER;
  }
  char who[96];
  snprintf(who, sizeof who, "block (%u,%u,%u) thread (%u,%u,%u)", L->fault_block[0], L->fault_block[1],
           L->fault_block[2], L->fault_thread[0], L->fault_thread[1], L->fault_thread[2]);
  if (L->fault_stack) {
    snprintf(d->errbuf, d->errlen,
             "stack overflow in %s: a CUDA thread used more than the CPU engine's %u KiB of stack (deep or endless "
             "recursion, or a huge local array)", who, WB_STACK_SIZE / 1024);
    L->err_kind = ERR_SEGV;
  } else {
    fault_message(L, d, who);
  }
  d->err_kind = L->err_kind;
  d->err_param = L->err_param;
  return RC_ERROR;
}

static int finish(Launch* L, wb_launch_desc* d) {
  int n = 0;
  for (int tool = 0; tool < NTOOLS; ++tool) {
    d->totals[tool] = L->totals[tool];
    for (const wb_san_record& r : L->recs[tool])
      if (n < NTOOLS * d->record_cap) d->records[n++] = r;
  }
  d->nrecords = n;
  for (int i = 0; i < P_N && i < 32; ++i) d->prof[i] = L->prof_tot[i];
  d->ntrace = L->ntrace;
  d->elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - L->start).count();
  d->estimate = L->estimate;
  d->blocks_done = L->done.load();
  d->err_pc = 0;
  d->err_kind = ERR_NONE;
  d->err_param = -1;
  if (L->faulted.load()) return fault_result(L, d);
  if (L->stop != RC_OK) return L->stop;
  if (!L->error.empty()) {
    snprintf(d->errbuf, d->errlen, "%s", L->error.c_str());
    d->err_kind = L->err_kind;
    d->err_param = L->err_param;
    if (L->err_pc >= d->text_lo && L->err_pc < d->text_hi) d->err_pc = L->err_pc - d->module_base + 1;
    return RC_ERROR;
  }
  for (int tool = 0; tool < NTOOLS; ++tool)
    if (L->totals[tool]) return RC_SANITIZER;
  return RC_OK;
}

// Run a whole grid described by `d` (see wb_launch_desc); returns an RC_* code, with the details in `d`.
WB_EXPORT int wb_launch2(wb_launch_desc* d) {
  std::lock_guard<std::mutex> lg(launch_mu);
  install_preempt_handler();
  Launch L;
  L.d = d;
  L.invoke = d->invoke;
  L.args = d->args;
  L.grid = {d->grid[0], d->grid[1], d->grid[2]};
  L.block = {d->block[0], d->block[1], d->block[2]};
  L.smem = d->smem;
  L.nblocks = (long)d->grid[0] * d->grid[1] * d->grid[2];
  L.cap = d->record_cap;
  L.start = std::chrono::steady_clock::now();
  if (d->checked) {
    L.san = san_create(d);
    if (!san_copy_buffers(L.san, d)) {
      san_free(L.san, d);
      snprintf(d->errbuf, d->errlen, "could not map the checked copies of the buffers (mmap failed)");
      return RC_ERROR;
    }
    guard_note_readonly(&L, L.san);
  } else if (d->guarded && !guard_create(&L, d)) {
    guard_finish(&L, d);
    snprintf(d->errbuf, d->errlen, "could not map the guarded copies of the buffers (mmap failed)");
    return RC_ERROR;
  }
  L.start = std::chrono::steady_clock::now();  // the limits count the kernel's time, not the copying
  if (d->profile) {
    L.prof = true;
    for (int i = 0; i < d->nregion; ++i) {
      const uint64_t* r = d->region + 4 * i;
      if (r[1] > r[0]) L.regions.push_back(ProfRegion{r[0], r[1], r[2] <= r[0] ? r[2] : r[0], (int)r[3], i});
    }
    std::sort(L.regions.begin(), L.regions.end(), [](const ProfRegion& a, const ProfRegion& b) { return a.lo < b.lo; });
    std::vector<ProfRegion> merged;  // aliasing arguments (an in-place kernel): one region, the lower base
    for (const ProfRegion& r : L.regions) {
      if (!merged.empty() && r.lo < merged.back().hi && r.kind == merged.back().kind) {
        merged.back().hi = std::max(merged.back().hi, r.hi);
        merged.back().base = std::min(merged.back().base, r.base);
      } else {
        merged.push_back(r);
      }
    }
    L.regions.swap(merged);
    guard_translate(&L);
  }
  if (d->san_enabled) *d->san_enabled = (d->checked || d->profile) ? 1 : 0;
  install_sigint(true);
  install_fault_handlers(true);
  watchdog().begin(&L);
  run_grid(&L, d->checked ? 1 : d->nthreads);
  watchdog().end();
  install_fault_handlers(false);
  install_sigint(false);
  if (d->san_enabled) *d->san_enabled = 0;
  guard_check(&L, d);
  int rc = finish(&L, d);
  guard_finish(&L, d);
  if (L.san) san_free(L.san, d);
  return rc;
}

}  // extern "C"
