// Collectives off the compute thread: a backend hands each collective step to one worker thread,
// in plan order (so every rank issues them in the same order), and keeps computing; a later step
// that touches the collective's result waits for its ticket. That is how a data-parallel step's
// gradient all_reduces overlap the rest of the backward pass (DDP's buckets).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace lt {

class CollectiveQueue {
 public:
  CollectiveQueue();
  ~CollectiveQueue();  // waits for the queued work
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Queues fn (run on the worker, after every earlier one; skipped while an earlier one's error
  // has not been raised by a wait yet); returns its ticket.
  int64_t submit(std::function<void()> fn);
  // Returns once the work of `ticket` and every earlier ticket is done; rethrows the first error
  // any of them raised (once).
  void wait(int64_t ticket);
  void wait_all() { wait(next_ - 1); }

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, std::function<void()>>> work_;
  int64_t next_ = 0;   // the next ticket
  int64_t done_ = -1;  // every ticket up to this one finished
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace lt
