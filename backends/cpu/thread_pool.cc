#include "backends/cpu/thread_pool.h"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>

#include "backends/backend.h"

namespace lt::cpu {
namespace {
// True on pool workers and on a caller while it runs chunks: nested parallel_for runs inline.
thread_local bool tls_in_pool = false;

struct InPoolScope {
  bool saved = tls_in_pool;
  InPoolScope() { tls_in_pool = true; }
  ~InPoolScope() { tls_in_pool = saved; }
};
}  // namespace

struct ThreadPool::Job {
  const RangeFn* fn;
  int64_t begin, end, chunk, nchunks;
  std::atomic<int64_t> next{0};
  std::mutex err_mu;
  std::exception_ptr error;
};

int default_num_threads() {
  // OMP_NUM_THREADS as PyTorch honours it: torchrun sets it to 1 for every rank when it starts
  // several on one host, so that N ranks do not each run a pool as wide as the machine (N pools
  // of polling workers on the same cores).
  for (const char* name : {"LT_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* s = std::getenv(name);
    if (!s) continue;
    char* endp = nullptr;
    long v = std::strtol(s, &endp, 10);
    if (endp != s && *endp == '\0' && v > 0) return static_cast<int>(std::min<long>(v, 1024));
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

ThreadPool::ThreadPool(int num_threads) { start_workers(std::max(1, num_threads) - 1); }

ThreadPool::~ThreadPool() { stop_workers(); }

namespace {
// The process's pool. A forked child has none of the parent's worker threads, so a pool it
// inherited would wait for them forever on its first parallel kernel (a DataLoader worker, a
// multiprocessing fork): the child starts a pool of its own on first use instead, and the
// inherited one is abandoned (its threads do not exist there; nothing may join them).
std::atomic<ThreadPool*> g_pool{nullptr};
std::mutex g_pool_mu;
std::atomic<bool> g_forked_child{false};
void forget_pool_in_child() {
  g_pool.store(nullptr, std::memory_order_relaxed);
  // libgomp's team belongs to the parent's threads: a child keeps to its own pool.
  g_forked_child.store(true, std::memory_order_relaxed);
  new (&g_pool_mu) std::mutex();  // a fork while another thread held it would leave it locked
}
// GCC's OpenMP runtime entry point, looked up in the process (oneDNN links libgomp; PyTorch ships
// its own copy under the same soname, and whichever loaded first serves both), not linked: a
// build without oneDNN has none, and then the pool is used.
using GompParallel = void (*)(void (*)(void*), void*, unsigned, unsigned);
GompParallel gomp_parallel() {
  static const GompParallel fn =
      reinterpret_cast<GompParallel>(dlsym(RTLD_DEFAULT, "GOMP_parallel"));
  return fn;
}

bool use_openmp() {
  return cpu_share_openmp_threads() && !g_forked_child.load(std::memory_order_relaxed) &&
         gomp_parallel() != nullptr;
}
}  // namespace

ThreadPool& ThreadPool::global() {
  if (ThreadPool* p = g_pool.load(std::memory_order_acquire)) return *p;
  static const int registered = pthread_atfork(nullptr, nullptr, &forget_pool_in_child);
  (void)registered;
  std::lock_guard<std::mutex> lk(g_pool_mu);
  ThreadPool* p = g_pool.load(std::memory_order_relaxed);
  if (!p) {
    // Leaked on purpose: workers must not be joined during static destruction, when a kernel
    // running on another thread could still be using the pool.
    p = new ThreadPool(default_num_threads());
    g_pool.store(p, std::memory_order_release);
  }
  return *p;
}

int ThreadPool::num_threads() const {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int>(workers_.size()) + 1;
}

void ThreadPool::set_num_threads(int n) {
  // From inside a chunk the dispatch lock is held by this very parallel_for: waiting would hang.
  if (tls_in_pool)
    throw std::logic_error("ThreadPool::set_num_threads called from inside parallel_for");
  if (n <= 0) n = default_num_threads();
  std::lock_guard<std::mutex> dispatch(dispatch_mu_);
  if (n == num_threads()) return;
  stop_workers();
  start_workers(n - 1);
}

void ThreadPool::start_workers(int n) {
  std::lock_guard<std::mutex> lk(mu_);
  stop_ = false;
  // A worker starts from the current generation even if its thread runs late.
  uint64_t gen = generation_;
  for (int i = 0; i < n; ++i) workers_.emplace_back([this, gen] { worker_loop(gen); });
}

void ThreadPool::stop_workers() {
  std::vector<std::thread> ws;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    ws.swap(workers_);
  }
  work_cv_.notify_all();
  for (auto& t : ws) t.join();
}

void ThreadPool::run_chunks(Job& job) {
  for (;;) {
    int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.nchunks) return;
    int64_t lo = job.begin + c * job.chunk;
    int64_t hi = std::min(job.end, lo + job.chunk);
    try {
      (*job.fn)(lo, hi);
    } catch (...) {
      std::lock_guard<std::mutex> lk(job.err_mu);
      if (!job.error) job.error = std::current_exception();
    }
  }
}

namespace {

// How long a worker polls for the next job, and the caller for its workers to finish, before
// blocking on a condition variable. A thread that blocks lets its virtual CPU halt, and waking a
// halted vCPU takes the hypervisor tens of microseconds to milliseconds: on the 2-core VM, a
// softmax (2048 x 2048) took 0.85 ms back to back but 1.5 ms (single-thread speed: the caller ran
// every chunk before the worker woke) once the process had slept for 10 ms, for calls after that
// too. Polling covers the gaps between the kernels of one graph and between the graphs of a loop;
// after it, an idle pool costs nothing. OpenMP runtimes poll the same way (GOMP_SPINCOUNT).
constexpr auto kPollFor = std::chrono::microseconds(200);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls `ready` for up to kPollFor: a short burst of pause instructions (cheap, no syscall), then
// yields between checks, so a polling thread gives its core to any other runnable thread (a
// machine with more busy threads than cores loses nothing to the wait).
template <typename Ready>
bool poll(const Ready& ready) {
  for (int i = 0; i < 256; ++i) {
    if (ready()) return true;
    cpu_relax();
  }
  const auto deadline = std::chrono::steady_clock::now() + kPollFor;
  while (std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    std::this_thread::yield();
  }
  return ready();
}

}  // namespace

void ThreadPool::worker_loop(uint64_t seen) {
  tls_in_pool = true;
  for (;;) {
    poll([&] { return published_.load(std::memory_order_acquire) != seen; });
    Job* job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      // Joins under mu_, so the caller, once it has closed the job, knows every joiner.
      if (job) pending_.fetch_add(1, std::memory_order_relaxed);
    }
    if (!job) continue;  // woke after the caller had done every chunk and closed the job
    run_chunks(*job);
    // The caller may be polling pending_ rather than waiting: it must see the decrement without
    // the lock. The lock is taken before the notify so a caller that just found pending_ > 0
    // under it is already waiting when the notify comes.
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(mu_);
      done_cv_.notify_one();
    }
  }
}

void ThreadPool::run_chunks_in_team(void* job) {
  InPoolScope scope;  // a parallel_for inside a chunk runs inline, as on the pool's workers
  run_chunks(*static_cast<Job*>(job));
}

void ThreadPool::parallel_for(int64_t begin, int64_t end, int64_t grain, int64_t align,
                              const RangeFn& fn) {
  if (end <= begin) return;
  const int64_t n = end - begin;
  grain = std::max<int64_t>(grain, 1);
  align = std::max<int64_t>(align, 1);
  std::unique_lock<std::mutex> dispatch(dispatch_mu_, std::defer_lock);
  const bool openmp = use_openmp();
  int nthreads = 1;
  if (!tls_in_pool && n > grain && dispatch.try_lock()) {
    std::lock_guard<std::mutex> lk(mu_);
    nthreads = static_cast<int>(workers_.size()) + 1;
  }
  if (nthreads <= 1) {
    fn(begin, end);
    return;
  }
  // A few chunks per thread balance uneven progress; each is contiguous and aligned.
  int64_t chunk = std::max(grain, (n + 4 * nthreads - 1) / (4 * nthreads));
  chunk = (chunk + align - 1) / align * align;
  Job job;
  job.fn = &fn;
  job.begin = begin;
  job.end = end;
  job.chunk = chunk;
  job.nchunks = (n + chunk - 1) / chunk;
  if (job.nchunks <= 1) {
    fn(begin, end);
    return;
  }
  if (openmp) {  // the same chunks, taken by the OpenMP team (the pool's size) instead
    gomp_parallel()(&ThreadPool::run_chunks_in_team, &job, static_cast<unsigned>(nthreads), 0);
    if (job.error) std::rethrow_exception(job.error);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = &job;
    pending_.store(0, std::memory_order_relaxed);
    ++generation_;
    published_.store(generation_, std::memory_order_release);
  }
  work_cv_.notify_all();  // no system call while every worker is still polling
  {
    InPoolScope scope;
    run_chunks(job);
  }
  // Every chunk is taken. Close the job and wait only for the workers that joined it: a worker
  // still asleep (it polls for kPollFor, then blocks; waking a halted vCPU takes the hypervisor
  // up to milliseconds) has nothing left to do, and waiting for it to wake made each kernel
  // after an idle gap, such as a oneDNN GEMM, cost a wake-up: a small GPT's training step ran
  // 20% slower on two threads than on one, its graph's p99 run time 3x its median.
  {
    std::lock_guard<std::mutex> lk(mu_);
    job_ = nullptr;
  }
  poll([&] { return pending_.load(std::memory_order_acquire) == 0; });
  {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return pending_.load(std::memory_order_acquire) == 0; });
  }
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace lt::cpu
