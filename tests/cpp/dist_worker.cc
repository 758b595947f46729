// One rank of a process group for distributed_test.cc, which starts a fresh process of this program
// per rank (no fork() of the multi-threaded test process) with RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT and LT_DIST_TIMEOUT set. Usage: dist_worker <scenario> [args...]. The
// DistributedDataParallel scenarios are in dist_worker_ddp.cc.
//
// Exit codes: 0 the scenario passed; 1 a check failed (stderr says which); 3 the scenario ended in
// the lt::Error it expects, printed to stderr as "ERROR: <message>" for the test to check.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dist_worker_ddp.h"
#include "distributed/process_group.h"
#include "ir/error.h"
#include "ir/half.h"

namespace {

using lt::DType;
using lt::dist::ReduceOp;
using Clock = std::chrono::steady_clock;

int g_rank = -1;
int g_checks = 0;

#define WCHECK(cond, ...)                                                                      \
  do {                                                                                         \
    ++g_checks;                                                                                \
    if (!(cond)) {                                                                             \
      std::fprintf(stderr, "rank %d: check failed at %s:%d: %s: ", g_rank, __FILE__, __LINE__, \
                   #cond);                                                                     \
      std::fprintf(stderr, __VA_ARGS__);                                                       \
      std::fprintf(stderr, "\n");                                                              \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

// Runs f, which must throw lt::Error; returns its message.
template <typename F>
std::string error_of(F&& f, lt::ErrorKind* kind = nullptr) {
  try {
    f();
  } catch (const lt::Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

long long ms_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// ------------------------------------------------------------------------------------------------
// all_reduce: each rank's data comes from a seed of its own; every rank recomputes all ranks' data
// and the expected result with a plain loop. Floating values are multiples of 1/64 below 64 in
// magnitude, so a float32 (and float64) sum of three is exact in any order: the results must
// match bit for bit, and a 16-bit result must equal the exact sum rounded once.

uint64_t seed_of(int rank, DType t, size_t n) {
  return 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank + 1) +
         1000003ull * static_cast<int>(t) + n;
}

std::vector<uint8_t> make_data(int rank, DType t, size_t n) {
  std::mt19937_64 gen(seed_of(rank, t, n));
  std::vector<uint8_t> b(n * lt::dtype_size(t));
  std::uniform_int_distribution<int> k(-4096, 4096);
  std::uniform_int_distribution<int32_t> i32(INT32_MIN, INT32_MAX);
  std::uniform_int_distribution<int64_t> i64(INT64_MIN, INT64_MAX);
  for (size_t i = 0; i < n; ++i) {
    void* p = b.data() + i * lt::dtype_size(t);
    if (t == DType::Int32)
      *static_cast<int32_t*>(p) = i32(gen);
    else if (t == DType::Int64)
      *static_cast<int64_t*>(p) = i64(gen);
    else
      lt::store_from_double(p, t, k(gen) / 64.0);  // float16/bfloat16: rounded here
  }
  return b;
}

// all[r]: rank r's data.
std::vector<uint8_t> expected_of(const std::vector<std::vector<uint8_t>>& all, DType t, size_t n,
                                 ReduceOp op) {
  int world = static_cast<int>(all.size());
  size_t es = lt::dtype_size(t);
  std::vector<uint8_t> out(n * es);
  for (size_t i = 0; i < n; ++i) {
    void* o = out.data() + i * es;
    if (t == DType::Int32 || t == DType::Int64) {
      uint64_t sum = 0;  // wraps like the collective's sum
      int64_t mx = INT64_MIN;
      for (int r = 0; r < world; ++r) {
        int64_t v = lt::load_as_int(all[r].data() + i * es, t);
        sum += static_cast<uint64_t>(v);
        mx = std::max(mx, v);
      }
      lt::store_from_int(o, t, op == ReduceOp::Max ? mx : static_cast<int64_t>(sum));
      continue;
    }
    double sum = 0, mx = -1e300;
    for (int r = 0; r < world; ++r) {
      double v = lt::load_as_double(all[r].data() + i * es, t);
      sum += v;
      mx = std::max(mx, v);
    }
    double v = op == ReduceOp::Max ? mx : sum;
    if (op == ReduceOp::Avg)  // the division happens in the type the sum is kept in
      v = t == DType::Float64 ? sum / world : static_cast<double>(static_cast<float>(sum) / world);
    lt::store_from_double(o, t, v);
  }
  return out;
}

void check_all_reduce(lt::dist::Communicator& c, const std::vector<std::vector<uint8_t>>& all,
                      DType t, size_t n, ReduceOp op) {
  std::vector<uint8_t> data = all[c.rank()];
  c.all_reduce(data.data(), static_cast<int64_t>(n), t, op);
  std::vector<uint8_t> want = expected_of(all, t, n, op);
  size_t es = lt::dtype_size(t);
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(data.data() + i * es, want.data() + i * es, es) == 0) continue;
    WCHECK(false, "all_reduce %s of %zu %s: element %zu is %.17g, expected %.17g",
           std::string(lt::dist::reduce_op_name(op)).c_str(), n,
           std::string(lt::dtype_name(t)).c_str(), i, lt::load_as_double(data.data() + i * es, t),
           lt::load_as_double(want.data() + i * es, t));
  }
  ++g_checks;
}

std::vector<uint8_t> pattern(int seed, size_t n) {
  std::vector<uint8_t> b(n);
  std::mt19937 gen(static_cast<uint32_t>(seed));
  for (auto& x : b) x = static_cast<uint8_t>(gen());
  return b;
}

int collectives() {
  lt::dist::init_process_group("gloo");
  auto c = lt::dist::default_communicator();
  int rank = c->rank(), world = c->size();
  WCHECK(rank == lt::dist::get_rank() && world == lt::dist::get_world_size(), "rank %d size %d",
         rank, world);

  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int32,
                  DType::Int64}) {
    for (size_t n : {size_t(1), size_t(1000), size_t(1000003)}) {
      std::vector<std::vector<uint8_t>> all;
      for (int r = 0; r < world; ++r) all.push_back(make_data(r, t, n));
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        if (op == ReduceOp::Avg && !lt::is_floating(t)) {
          std::vector<uint8_t> d(n * lt::dtype_size(t));
          lt::ErrorKind kind{};
          std::string msg = error_of([&] { c->all_reduce(d.data(), int64_t(n), t, op); }, &kind);
          WCHECK(kind == lt::ErrorKind::Type && msg.find("Avg") != std::string::npos,
                 "integer Avg: '%s'", msg.c_str());
          continue;
        }
        check_all_reduce(*c, all, t, n, op);
      }
    }
  }
  // A dtype the engine lacks: a clear error, raised before any communication (every rank skips it).
  {
    uint8_t b[4] = {};
    lt::ErrorKind kind{};
    std::string msg = error_of([&] { c->all_reduce(b, 4, DType::Bool, ReduceOp::Sum); }, &kind);
    WCHECK(kind == lt::ErrorKind::NotImplemented &&
               msg.find("not implemented: all_reduce of bool on gloo") != std::string::npos,
           "bool: '%s'", msg.c_str());
  }

  // broadcast from the first and the last rank, small and large (odd) sizes
  for (int root : {0, world - 1}) {
    for (size_t n : {size_t(1), size_t(1000003)}) {
      std::vector<uint8_t> want = pattern(100 + root, n);
      std::vector<uint8_t> b = rank == root ? want : std::vector<uint8_t>(n, 0xee);
      c->broadcast(b.data(), n, root);
      WCHECK(b == want, "broadcast of %zu bytes from root %d", n, root);
    }
  }

  // all_gather: rank r's bytes land at r * bytes_per_rank; out of place, then in place
  for (size_t n : {size_t(1), size_t(1001)}) {
    std::vector<uint8_t> in = pattern(200 + rank, n), out(n * world, 0xee);
    c->all_gather(in.data(), out.data(), n);
    for (int r = 0; r < world; ++r) {
      std::vector<uint8_t> want = pattern(200 + r, n);
      WCHECK(std::memcmp(out.data() + r * n, want.data(), n) == 0,
             "all_gather of %zu bytes: rank %d's slot", n, r);
    }
    std::vector<uint8_t> inplace(n * world, 0xee);
    std::memcpy(inplace.data() + rank * n, in.data(), n);
    c->all_gather(inplace.data() + rank * n, inplace.data(), n);
    WCHECK(inplace == out, "in-place all_gather of %zu bytes", n);
  }

  // barrier: nobody leaves it before the last rank (which arrives 300 ms late) entered it
  auto t0 = Clock::now();
  if (rank == world - 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  c->barrier();
  WCHECK(ms_since(t0) >= 250, "rank %d left the barrier after %lld ms", rank, ms_since(t0));

  c.reset();
  lt::dist::destroy_process_group();
  std::fprintf(stderr, "rank %d: collectives passed %d checks\n", rank, g_checks);
  return 0;
}

// ------------------------------------------------------------------------------------------------

// The parent starts every rank but one: init must fail with lt::Error, after about LT_DIST_TIMEOUT.
int never_joins() {
  auto t0 = Clock::now();
  std::string msg = error_of([] { lt::dist::init_process_group(); });
  WCHECK(!msg.empty(), "init_process_group succeeded without every rank");
  WCHECK(!lt::dist::is_initialized(), "a failed init left a group behind");
  std::fprintf(stderr, "ERROR: %s\nelapsed_ms=%lld\n", msg.c_str(), ms_since(t0));
  return 3;
}

// The last rank exits right after the group came up; the others' all_reduce fails, and so does the
// next call (the group is unusable), without waiting for the timeout.
int peer_dies() {
  lt::dist::init_process_group();
  auto c = lt::dist::default_communicator();
  c->barrier();                              // everyone is up
  if (c->rank() == c->size() - 1) _exit(0);  // no destructor, no goodbye: as if it crashed
  std::vector<float> x(100000, 1.0f);
  auto t0 = Clock::now();
  std::string msg = error_of([&] {
    for (int i = 0; i < 20; ++i)
      c->all_reduce(x.data(), int64_t(x.size()), DType::Float32, ReduceOp::Sum);
  });
  WCHECK(!msg.empty(), "all_reduce went on after a peer exited");
  std::string again = error_of([&] { c->barrier(); });
  WCHECK(again.find("unusable") != std::string::npos, "second call: '%s'", again.c_str());
  std::fprintf(stderr, "ERROR: %s\nelapsed_ms=%lld\nAGAIN: %s\n", msg.c_str(), ms_since(t0),
               again.c_str());
  c.reset();
  lt::dist::destroy_process_group();
  return 3;
}

// The last rank comes to the all_reduce 4 s late, past LT_DIST_TIMEOUT (3 s): the others' call
// fails at their timeout, naming it; the latecomer's fails at once (the others closed their
// connections when they failed).
int straggler() {
  lt::dist::init_process_group();
  auto c = lt::dist::default_communicator();
  c->barrier();
  if (c->rank() == c->size() - 1) std::this_thread::sleep_for(std::chrono::seconds(4));
  float x = 1;
  auto t0 = Clock::now();
  std::string msg = error_of([&] { c->all_reduce(&x, 1, DType::Float32, ReduceOp::Sum); });
  WCHECK(!msg.empty(), "all_reduce succeeded although a rank came after the timeout");
  std::fprintf(stderr, "ERROR: %s\nelapsed_ms=%lld\n", msg.c_str(), ms_since(t0));
  c.reset();
  lt::dist::destroy_process_group();
  return 3;
}

// The sum of rank + 1 over the group, through the default communicator.
void check_group_works() {
  auto c = lt::dist::default_communicator();
  int64_t v = c->rank() + 1;
  c->all_reduce(&v, 1, DType::Int64, ReduceOp::Sum);
  int64_t n = c->size();
  WCHECK(v == n * (n + 1) / 2, "sum of rank + 1 is %lld", static_cast<long long>(v));
}

int lifecycle() {
  std::string rank = std::getenv("RANK");
  // init without RANK: an error naming it (nothing is started, so the other ranks are unaffected)
  unsetenv("RANK");
  std::string msg = error_of([] { lt::dist::init_process_group(); });
  WCHECK(msg.find("RANK") != std::string::npos && msg.find("not set") != std::string::npos,
         "init without RANK: '%s'", msg.c_str());
  std::fprintf(stderr, "NO_RANK: %s\n", msg.c_str());
  setenv("RANK", rank.c_str(), 1);
  WCHECK(!lt::dist::is_initialized(), "initialized after a failed init");
  msg = error_of([] { lt::dist::default_communicator(); });
  WCHECK(msg.find("no process group") != std::string::npos, "'%s'", msg.c_str());

  lt::dist::init_process_group();
  WCHECK(lt::dist::is_initialized() && lt::dist::get_rank() == std::atoi(rank.c_str()), "init");
  msg = error_of([] { lt::dist::init_process_group(); });
  WCHECK(msg.find("already initialized") != std::string::npos, "double init: '%s'", msg.c_str());
  std::fprintf(stderr, "DOUBLE: %s\n", msg.c_str());
  check_group_works();  // the failed second init left the first group intact
  auto held = lt::dist::default_communicator();
  lt::dist::destroy_process_group();
  WCHECK(!lt::dist::is_initialized(), "initialized after destroy");
  msg = error_of([] { lt::dist::destroy_process_group(); });
  WCHECK(msg.find("no process group") != std::string::npos, "double destroy: '%s'", msg.c_str());

  for (int round = 0; round < 2; ++round) {  // destroy, then init again, twice
    lt::dist::init_process_group("");
    check_group_works();
    lt::dist::destroy_process_group();
  }
  held.reset();

  // A group still initialized when the program returns: exit tears it down without a fuss.
  lt::dist::init_process_group();
  check_group_works();
  lt::dist::default_communicator()->barrier();  // nobody's store or peers go while others need them
  std::fprintf(stderr, "rank %s: lifecycle passed %d checks\n", rank.c_str(), g_checks);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: dist_worker collectives|never_joins|peer_dies|straggler|lifecycle|"
                 "ddp_train|ddp_no_sync [args...]\n");
    return 2;
  }
  if (const char* r = std::getenv("RANK")) g_rank = std::atoi(r);
  std::string s = argv[1];
  try {
    const int ddp =
        lt_ddp_test::run_ddp_scenario(s, std::vector<std::string>(argv + 2, argv + argc));
    if (ddp >= 0) return ddp;
    if (s == "collectives") return collectives();
    if (s == "never_joins") return never_joins();
    if (s == "peer_dies") return peer_dies();
    if (s == "straggler") return straggler();
    if (s == "lifecycle") return lifecycle();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: unexpected exception in %s: %s\n", g_rank, s.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr, "dist_worker: unknown scenario '%s'\n", s.c_str());
  return 2;
}
