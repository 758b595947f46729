#include "backends/collective_queue.h"

namespace lt {

CollectiveQueue::CollectiveQueue() : worker_([this] { loop(); }) {}

CollectiveQueue::~CollectiveQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

int64_t CollectiveQueue::submit(std::function<void()> fn) {
  int64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ticket = next_++;
    work_.emplace_back(ticket, std::move(fn));
  }
  cv_.notify_all();
  return ticket;
}

void CollectiveQueue::wait(int64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ >= ticket; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void CollectiveQueue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !work_.empty(); });
    if (work_.empty()) return;  // stop_ and nothing left
    auto [ticket, fn] = std::move(work_.front());
    work_.pop_front();
    // After a failure nothing more runs until a wait has raised it: the ranks no longer agree
    // on what comes next, and a collective of another size would corrupt the exchange.
    const bool skip = error_ != nullptr;
    lock.unlock();
    std::exception_ptr err;
    if (!skip) try {
        fn();
      } catch (...) {
        err = std::current_exception();
      }
    lock.lock();
    if (err && !error_) error_ = err;
    done_ = ticket;
    cv_.notify_all();
  }
}

}  // namespace lt
