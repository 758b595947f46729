// Timing of the runtime's phases: every sync's hash, lower, compile, run and transfer times feed
// lt::metrics percentiles, and with LT_PROFILE=trace.json they also become Chrome/Perfetto trace
// events (complete "X" events, one per phase and per kernel launch), written when the process
// exits or on flush(). Open the file in ui.perfetto.dev or chrome://tracing.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace lt::profile {

enum class Phase { Trace, Hash, Lower, Compile, Run, Transfer, Kernel, kCount };
const char* phase_name(Phase p);

using Clock = std::chrono::steady_clock;

// Records one interval of `p`; `name` labels the trace event (e.g. a graph hash or kernel name).
void record(Phase p, const std::string& name, Clock::time_point start, Clock::time_point end);

// RAII form of record().
class Scope {
 public:
  Scope(Phase p, std::string name) : phase_(p), name_(std::move(name)), start_(Clock::now()) {}
  ~Scope() { record(phase_, name_, start_, Clock::now()); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Phase phase_;
  std::string name_;
  Clock::time_point start_;
};

// The "trace" phase: from the first lazy op after a sync to the next sync on this thread (the host
// time the user's code spends building the step). note_traced_op() costs one thread-local test.
void note_traced_op();
void end_trace_phase();  // called at a sync: records the phase if ops were traced since the last

bool tracing();  // LT_PROFILE is set: trace events are being collected
void flush();    // writes the trace file now (also done at exit)

struct Percentiles {
  int64_t count = 0;
  double total_ms = 0, p50_ms = 0, p90_ms = 0, p99_ms = 0, max_ms = 0;
};
// Per phase name, over the most recent samples (a bounded window, so long runs stay flat).
std::map<std::string, Percentiles> timings();
void reset_timings();

}  // namespace lt::profile
