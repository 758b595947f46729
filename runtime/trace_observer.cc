#include "runtime/trace_observer.h"

#include <atomic>

namespace lt {

namespace {
std::atomic<TraceObserver*> g_observer{nullptr};
}  // namespace

TraceObserver* trace_observer() { return g_observer.load(std::memory_order_relaxed); }
void set_trace_observer(TraceObserver* observer) {
  g_observer.store(observer, std::memory_order_relaxed);
}

}  // namespace lt
