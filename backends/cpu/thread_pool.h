// The CPU backend's thread pool: persistent workers that split a kernel's flattened outer range
// into contiguous chunks. One pool per process (LT_NUM_THREADS, default: hardware concurrency).
// With cpu_share_openmp_threads() (backends/backend.h) the same chunks run on the process's
// OpenMP team, as many threads as the pool has, and the pool's workers stay asleep.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lt::cpu {

// LT_NUM_THREADS when set to a positive integer, else OMP_NUM_THREADS (as PyTorch; torchrun sets
// it to 1 for several ranks on one host), else std::thread::hardware_concurrency().
int default_num_threads();

class ThreadPool {
 public:
  using RangeFn = std::function<void(int64_t, int64_t)>;

  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // The process-wide pool, created on first use with default_num_threads().
  static ThreadPool& global();

  int num_threads() const;  // including the calling thread
  // Waits for a running parallel_for to finish, then resizes the pool (n <= 0 means the default).
  void set_num_threads(int n);

  // Calls fn(lo, hi) on contiguous chunks that exactly cover [begin, end). Chunks hold at least
  // `grain` items and, except the last, a multiple of `align` items. The calling thread takes part.
  // Runs inline (one call, on the caller) when the pool has one thread, when another
  // parallel_for is in flight (several callers are serialized by running the late ones inline),
  // or when called from inside a chunk (re-entrant use never deadlocks). Rethrows the first
  // exception a chunk threw.
  void parallel_for(int64_t begin, int64_t end, int64_t grain, int64_t align, const RangeFn& fn);

 private:
  struct Job;
  void start_workers(int n);
  void stop_workers();
  void worker_loop(uint64_t seen);
  static void run_chunks(Job& job);
  static void run_chunks_in_team(void* job);  // the body each OpenMP thread runs

  std::mutex dispatch_mu_;  // held by the thread that owns the workers for one parallel_for
  mutable std::mutex mu_;   // guards the fields below
  std::condition_variable work_cv_, done_cv_;
  std::vector<std::thread> workers_;
  Job* job_ = nullptr;
  uint64_t generation_ = 0;
  bool stop_ = false;
  // Read without mu_ by polling threads: generation_ once the job is set (workers poll it
  // before they wait on work_cv_), and the workers that have not finished the current generation
  // (incremented under mu_ when a worker joins the job, decremented without mu_ when it is done;
  // the caller polls it before it waits on done_cv_).
  std::atomic<uint64_t> published_{0};
  std::atomic<int> pending_{0};
};

}  // namespace lt::cpu
