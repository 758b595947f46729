// Clocks for compile timings and the benchmarks: wall seconds since a steady-clock point, and the
// CPU seconds of the calling thread or of the whole process (POSIX clock_gettime). A thread's CPU
// time is what a compile thread costs when cores are free; wall time is what a user waits.
#pragma once
#include <time.h>

#include <chrono>

namespace lt {

using SteadyClock = std::chrono::steady_clock;

inline double seconds_since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

inline double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
inline double thread_cpu_seconds() { return cpu_seconds(CLOCK_THREAD_CPUTIME_ID); }
inline double process_cpu_seconds() { return cpu_seconds(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace lt
