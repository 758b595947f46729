#include "runtime/profile.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace lt::profile {
namespace {

constexpr size_t kWindow = 4096;        // samples kept per phase for percentiles
constexpr size_t kMaxEvents = 1 << 20;  // trace events kept (a runaway run stays bounded)
constexpr int kPhases = static_cast<int>(Phase::kCount);
// Time zero of the trace: when the library was loaded, before any interval can start.
const Clock::time_point g_origin = Clock::now();

struct Samples {
  std::vector<double> ms;  // ring buffer
  size_t next = 0;
  int64_t count = 0;
  double total = 0;
};

struct Event {
  Phase phase;
  std::string name;
  int64_t ts_us, dur_us;
  size_t tid;
};

struct State {
  std::mutex mu;
  std::array<Samples, kPhases> samples;
  std::vector<Event> events;
  std::string path;
  bool dropped = false;

  State() {
    const char* p = std::getenv("LT_PROFILE");
    if (p && *p) path = p;
  }
  ~State() { write(); }

  void write() {
    if (path.empty()) return;
    std::lock_guard<std::mutex> g(mu);
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "[lazytensor] LT_PROFILE: cannot write %s\n", path.c_str());
      return;
    }
    std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (size_t i = 0; i < events.size(); ++i) {
      const Event& e = events[i];
      std::string name;
      for (char c : e.name) {
        if (c == '"' || c == '\\') name += '\\';
        if (static_cast<unsigned char>(c) >= 0x20) name += c;
      }
      std::fprintf(f,
                   "%s{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %lld, \"dur\": "
                   "%lld, \"pid\": 1, \"tid\": %zu}",
                   i ? ",\n" : "", name.c_str(), phase_name(e.phase),
                   static_cast<long long>(e.ts_us), static_cast<long long>(e.dur_us), e.tid);
    }
    std::fprintf(f, "\n]%s}\n",
                 dropped
                     ? ", \"otherData\": {\"note\": \"event limit reached; later events dropped\"}"
                     : "");
    std::fclose(f);
  }
};

State& state() {
  static State s;
  return s;
}

size_t thread_number() {
  static std::atomic<size_t> next{1};
  thread_local size_t mine = next.fetch_add(1);
  return mine;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

const char* phase_name(Phase p) {
  static const char* names[] = {"trace", "hash", "lower", "compile", "run", "transfer", "kernel"};
  return names[static_cast<int>(p)];
}

void record(Phase p, const std::string& name, Clock::time_point start, Clock::time_point end) {
  State& s = state();
  double ms = std::chrono::duration<double, std::milli>(end - start).count();
  std::lock_guard<std::mutex> g(s.mu);
  Samples& sm = s.samples[static_cast<int>(p)];
  if (sm.ms.size() < kWindow)
    sm.ms.push_back(ms);
  else
    sm.ms[sm.next] = ms;
  sm.next = (sm.next + 1) % kWindow;
  ++sm.count;
  sm.total += ms;
  if (s.path.empty()) return;
  if (s.events.size() >= kMaxEvents) {
    s.dropped = true;
    return;
  }
  auto us = [&](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t - g_origin).count();
  };
  s.events.push_back(
      {p, name, us(start), std::max<int64_t>(0, us(end) - us(start)), thread_number()});
}

namespace {
// Initial-exec (see ir/pool.cc): read for every traced op.
[[gnu::tls_model("initial-exec")]] thread_local bool t_tracing_step = false;
thread_local Clock::time_point t_trace_start;
}  // namespace

void note_traced_op() {
  if (t_tracing_step) return;
  t_tracing_step = true;
  t_trace_start = Clock::now();
}

void end_trace_phase() {
  if (!t_tracing_step) return;
  t_tracing_step = false;
  record(Phase::Trace, "trace", t_trace_start, Clock::now());
}

bool tracing() { return !state().path.empty(); }

void flush() { state().write(); }

std::map<std::string, Percentiles> timings() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  std::map<std::string, Percentiles> r;
  for (int i = 0; i < kPhases; ++i) {
    const Samples& sm = s.samples[i];
    if (!sm.count) continue;
    Percentiles p;
    p.count = sm.count;
    p.total_ms = sm.total;
    p.p50_ms = percentile(sm.ms, 0.5);
    p.p90_ms = percentile(sm.ms, 0.9);
    p.p99_ms = percentile(sm.ms, 0.99);
    p.max_ms = *std::max_element(sm.ms.begin(), sm.ms.end());
    r[phase_name(static_cast<Phase>(i))] = p;
  }
  return r;
}

void reset_timings() {
  State& s = state();
  std::lock_guard<std::mutex> g(s.mu);
  for (auto& sm : s.samples) sm = Samples{};
}

}  // namespace lt::profile
