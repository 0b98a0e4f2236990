// CPU engine runtime: runs a CUDA grid on the CPU.
//
// * Blocks run in parallel on a pool of OS threads (one block at a time per worker; the launching thread works
//   too). Static __shared__ variables are `static thread_local` in kernel modules, which is right because every
//   fiber of a block runs on the same worker.
// * Each CUDA thread of a block is a fiber with its own stack. A fiber runs until it waits at a barrier
//   (__syncthreads, a warp collective) or exits; the worker's scheduler then resumes the next ready fiber in
//   thread-index order. So barriers are real, and a missing __syncthreads gives a deterministic wrong answer.
// * The context switch is a hand-written x86-64 routine (callee-saved registers only, no syscall); other
//   targets fall back to ucontext.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "wb_abi.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

#define WB_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

enum FiberState { READY = 0, WAIT_BAR = 1, WAIT_WARP = 2, DONE = 3 };

struct Worker;

struct Fiber {
  wb_thread* t;  // lives at the top of the fiber's stack
  void* sp;      // saved stack pointer while switched out
  int state;
  int index;
  Worker* w;
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
};

struct Launch {
  void (*invoke)(void**);
  void** args;
  wb_uint3 grid, block;
  size_t smem;
  long nblocks;
  std::atomic<long> next{0};
  std::atomic<int> abort{0};
  std::mutex mu;
  std::string error;
  std::vector<wb_oob_record> oob;
  long oob_total = 0;
  int max_oob = 64;
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
  char* smem = nullptr;
  size_t smem_cap = 0;
  Launch* L = nullptr;
  int n = 0, live = 0;
  int bar_arrived = 0;
  unsigned bar_gen = 0;
  int bar_acc[3] = {0, 0, 0};
  int bar_result[2] = {0, 0};
  int bar_op = 0;
  Warp warps[32];
  bool aborted = false;
  ~Worker() {
    if (map_base) munmap(map_base, map_bytes);
    free(smem);
  }
};

thread_local Worker* tl_worker = nullptr;

Worker* get_worker() {
  if (!tl_worker) tl_worker = new Worker();  // lives as long as its OS thread (pool threads never exit)
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

void release_barrier(Worker* w) {
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

void release_warp(Worker* w, int wi) {
  Warp& W = w->warps[wi];
  int slot = W.gen & 1;
  W.active[slot] = W.arrived_mask;
  W.arrived = 0;
  W.arrived_mask = 0;
  W.gen++;
  int base = wi * 32;
  for (int l = 0; l < 32 && base + l < w->n; ++l)
    if (w->fibers[base + l].state == WAIT_WARP) w->fibers[base + l].state = READY;
}

void oob_resolve_thread(wb_thread* t) {
  if (t->oob_pending < 0) return;
  Launch* L = ((Fiber*)t->runtime)->w->L;
  bool wrote = false;
  for (unsigned char c : t->scratch) wrote |= (c != 0xCD);
  {
    std::lock_guard<std::mutex> g(L->mu);
    if (t->oob_pending < (int)L->oob.size() && L->oob[t->oob_pending].kind == 2)
      L->oob[t->oob_pending].kind = wrote ? 1 : 0;
  }
  t->oob_pending = -1;
  std::memset(t->scratch, 0xCD, sizeof t->scratch);
}

void fiber_main(Fiber* f) {
  Worker* w = f->w;
  w->L->invoke(w->L->args);
  oob_resolve_thread(f->t);
  f->state = DONE;
  w->live--;
  if (w->bar_arrived > 0 && w->bar_arrived == w->live) release_barrier(w);
  Warp& W = w->warps[f->t->warp];
  W.live &= ~(1u << f->t->lane);
  if (W.arrived > 0 && W.arrived == __builtin_popcount(W.expect & W.live)) release_warp(w, (int)f->t->warp);
  switch_to_sched(f);
  __builtin_trap();
}

void run_block(Worker* w, Launch* L, long b) {
  const wb_uint3 bd = L->block, gd = L->grid;
  wb_uint3 bid;
  bid.x = (unsigned)(b % gd.x);
  bid.y = (unsigned)((b / gd.x) % gd.y);
  bid.z = (unsigned)(b / ((long)gd.x * gd.y));
  int n = (int)(bd.x * bd.y * bd.z);
  w->n = n;
  w->live = n;
  w->bar_arrived = 0;
  w->bar_acc[0] = 0;
  w->bar_acc[1] = 1;
  w->bar_acc[2] = 0;
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
    t->oob_pending = -1;
    std::memset(t->scratch, 0xCD, sizeof t->scratch);
    t->runtime = f;
  }
  while (w->live > 0) {
    bool progress = false;
    for (int i = 0; i < n; ++i) {
      Fiber* f = &w->fibers[i];
      if (f->state != READY) continue;
      progress = true;
      switch_to_fiber(w, f);
      if (w->aborted) return;
    }
    if (!progress) {
      int nb = 0, nw = 0, first_b = -1, first_w = -1, first_done = -1;
      for (int i = 0; i < n; ++i) {
        int s = w->fibers[i].state;
        if (s == WAIT_BAR) { nb++; if (first_b < 0) first_b = i; }
        if (s == WAIT_WARP) { nw++; if (first_w < 0) first_w = i; }
        if (s == DONE && first_done < 0) first_done = i;
      }
      char msg[512];
      snprintf(msg, sizeof msg,
               "deadlock in block (%u,%u,%u): %d thread(s) wait at __syncthreads() (first: linear thread %d), "
               "%d wait at a warp collective (first: %d), %d exited (first: %d). A barrier inside a branch "
               "that not all threads of the block (or all lanes named in the mask) take never completes.",
               bid.x, bid.y, bid.z, nb, first_b, nw, first_w, n - w->live, first_done);
      set_error(L, msg);
      w->aborted = true;
      return;
    }
  }
}

void work(Launch* L) {
  Worker* w = get_worker();
  int n = (int)(L->block.x * L->block.y * L->block.z);
  if (!ensure_stacks(w, n)) {
    set_error(L, "could not allocate fiber stacks (mmap failed)");
    return;
  }
  if (w->smem_cap < L->smem || !w->smem) {
    free(w->smem);
    size_t cap = L->smem < 256 ? 256 : L->smem;
    w->smem = (char*)aligned_alloc(128, (cap + 127) & ~(size_t)127);
    w->smem_cap = cap;
  }
  w->L = L;
  w->aborted = false;
  for (;;) {
    if (L->abort.load(std::memory_order_relaxed)) break;
    long b = L->next.fetch_add(1);
    if (b >= L->nblocks) break;
    run_block(w, L, b);
    if (w->aborted) break;
  }
  w->L = nullptr;
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

}  // namespace

// ---------------------------------------------------------------- device-side entry points
extern "C" {

void wb_syncthreads(void) {
  Fiber* f = self_fiber();
  Worker* w = f->w;
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

const uint64_t* wb_warp_gather(unsigned mask, uint64_t v, unsigned* active) {
  Fiber* f = self_fiber();
  Worker* w = f->w;
  const unsigned lane = f->t->lane;
  const int wi = (int)f->t->warp;
  Warp& W = w->warps[wi];
  const unsigned slot = W.gen & 1;
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

void wb_syncwarp(unsigned mask) { wb_warp_gather(mask, 0, nullptr); }

void wb_trap(const char* what, const char* file, int line) {
  Fiber* f = self_fiber();
  Worker* w = f->w;
  std::string msg = what;
  if (file && line > 0) msg += std::string(" (at ") + file + ":" + std::to_string(line) + ")";
  msg += ", in " + where(f->t);
  set_error(w->L, msg);
  w->aborted = true;
  f->state = DONE;
  switch_to_sched(f);
  __builtin_trap();
}

int wb_report_oob(int param, int kind, int64_t offset, uint64_t size, uint64_t buf_bytes, const char* file,
                  int line) {
  wb_thread* t = wb_self();
  oob_resolve_thread(t);
  Launch* L = ((Fiber*)t->runtime)->w->L;
  std::lock_guard<std::mutex> g(L->mu);
  L->oob_total++;
  if ((int)L->oob.size() >= L->max_oob) return -1;
  wb_oob_record r;
  r.param = param;
  r.kind = kind;
  r.offset = offset;
  r.size = size;
  r.buf_bytes = buf_bytes;
  r.block[0] = t->blockIdx.x;
  r.block[1] = t->blockIdx.y;
  r.block[2] = t->blockIdx.z;
  r.thread[0] = t->threadIdx.x;
  r.thread[1] = t->threadIdx.y;
  r.thread[2] = t->threadIdx.z;
  r.line = line;
  r.file = file;
  L->oob.push_back(r);
  int idx = (int)L->oob.size() - 1;
  if (kind == 2) t->oob_pending = idx;
  return idx;
}

void wb_oob_resolve(void) { oob_resolve_thread(wb_self()); }

// ---------------------------------------------------------------- host-side API (ctypes)
WB_EXPORT int wb_runtime_abi(void) { return WB_ABI_VERSION; }

// Run a whole grid; returns 0 on success, 1 on a device error (message in errbuf), 2 if out-of-bounds
// accesses were recorded (fetch them with wb_oob_records).
WB_EXPORT int wb_launch(void (*invoke)(void**), void** args, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, size_t smem, int nthreads, char* errbuf, size_t errlen,
                        wb_oob_record* oob_out, int oob_cap, long* oob_total) {
  std::lock_guard<std::mutex> lg(launch_mu);
  Launch L;
  L.invoke = invoke;
  L.args = args;
  L.grid = {gx, gy, gz};
  L.block = {bx, by, bz};
  L.smem = smem;
  L.nblocks = (long)gx * gy * gz;
  L.max_oob = oob_cap;
  Pool& P = pool();
  int helpers = nthreads - 1;
  if (helpers > L.nblocks - 1) helpers = (int)(L.nblocks - 1);
  if (helpers < 0) helpers = 0;
  if (helpers > 0) {
    std::lock_guard<std::mutex> g(P.mu);
    P.resize(helpers);
    P.job = &L;
    P.want = helpers;
    P.active = helpers;
    P.gen++;
    P.cv.notify_all();
  }
  work(&L);
  if (helpers > 0) {
    std::unique_lock<std::mutex> g(P.mu);
    P.done_cv.wait(g, [&] { return P.active == 0; });
    P.job = nullptr;
  }
  if (oob_total) *oob_total = L.oob_total;
  int n = (int)L.oob.size() < oob_cap ? (int)L.oob.size() : oob_cap;
  for (int i = 0; i < n; ++i) oob_out[i] = L.oob[i];
  if (!L.error.empty()) {
    snprintf(errbuf, errlen, "%s", L.error.c_str());
    return 1;
  }
  return L.oob_total > 0 ? 2 : 0;
}

}  // extern "C"
