// distributed/: the rendezvous store and the environment's parsing in this process; the process
// group and its collectives across real processes. Each rank is a fresh process of dist_worker
// (tests/cpp/dist_worker.cc) started by dist_group.h's run_group. DistributedDataParallel's tests
// are in data_parallel_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "dist_group.h"
#include "distributed/gloo_communicator.h"
#include "distributed/process_group.h"
#include "distributed/tcp_store.h"
#include "ir/error.h"
#include "runtime/distributed.h"
#include "runtime/sync.h"
#include "test_util.h"

namespace lt_dist_test {

// ------------------------------------------------------------------------------------------------
// The store, in this process

TEST(DistributedStore, SetGetCheckWait) {
  lt::dist::TcpStoreServer server(0, 7);
  lt::dist::TcpStore a("127.0.0.1", server.port(), 7, Millis(5000));
  lt::dist::TcpStore b("localhost", server.port(), 7, Millis(5000));
  EXPECT_FALSE(b.check("k"));
  std::vector<char> big(300000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    a.set("k", big);
    a.set("empty", {});
  });
  EXPECT_EQ(b.get("k"), big);  // waits for the key
  later.join();
  b.wait({"k", "empty"});
  EXPECT_TRUE(b.check("empty"));
  EXPECT_TRUE(b.get("empty").empty());
  a.set("k", {'x'});  // overwrite
  EXPECT_EQ(b.get("k"), std::vector<char>{'x'});
}

TEST(DistributedStore, TimeoutsNameTheKeyTheAddressAndTheTimeout) {
  lt::dist::TcpStoreServer server(0, 1);
  lt::dist::TcpStore s("127.0.0.1", server.port(), 1, Millis(300));
  std::string port = std::to_string(server.port());
  auto t0 = Clock::now();
  std::string msg = error_of([&] { s.get("nobody/sets/this"); });
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  EXPECT_TRUE(has(msg, "timed out after 0.3 s") && has(msg, "'nobody/sets/this'") &&
              has(msg, "127.0.0.1:" + port))
      << msg;
  s.set("a", {'1'});
  msg = error_of([&] { s.wait({"a", "b", "c"}, Millis(100)); });
  EXPECT_TRUE(has(msg, "timed out after 0.1 s") && has(msg, "keys 'b', 'c'") && !has(msg, "'a'"))
      << msg;
  EXPECT_EQ(s.get("a"), std::vector<char>{'1'});  // a timeout leaves the connection usable
}

TEST(DistributedStore, AServerThatIsGoneIsAnErrorNotAHang) {
  auto server = std::make_unique<lt::dist::TcpStoreServer>(0, 1);
  uint16_t port = server->port();
  lt::dist::TcpStore s("127.0.0.1", port, 1, Millis(20000));
  s.set("a", {'1'});
  // stop() waits for connected clients at most its grace period.
  auto t0 = Clock::now();
  server->stop(Millis(200));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  server.reset();
  t0 = Clock::now();
  std::string msg = error_of([&] { s.get("b"); });
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3)) << "a 20 s timeout was waited out";
  EXPECT_TRUE(has(msg, "closed the connection") || has(msg, "is gone")) << msg;
  EXPECT_TRUE(has(msg, "127.0.0.1:" + std::to_string(port))) << msg;
  msg = error_of([&] { s.set("c", {}); });
  EXPECT_TRUE(has(msg, "lost earlier")) << msg;
}

TEST(DistributedStore, NoServerFailsAtTheTimeout) {
  uint16_t port = free_port();
  auto t0 = Clock::now();
  std::string msg = error_of([&] { lt::dist::TcpStore s("127.0.0.1", port, 1, Millis(400)); });
  auto took = Clock::now() - t0;
  EXPECT_GE(took, std::chrono::milliseconds(350));
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_TRUE(has(msg, "could not connect") && has(msg, "within the timeout of 0.4 s") &&
              has(msg, "127.0.0.1:" + std::to_string(port)))
      << msg;
}

TEST(DistributedStore, AClientOfAnotherGroupIsTurnedAway) {
  lt::dist::TcpStoreServer server(0, 1);
  std::string msg =
      error_of([&] { lt::dist::TcpStore s("127.0.0.1", server.port(), 2, Millis(200)); });
  EXPECT_TRUE(has(msg, "another process group")) << msg;
  // ...and gets in once that group's server has made way for its own.
  uint16_t port = server.port();
  server.stop(Millis(0));
  std::thread next_server([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    lt::dist::TcpStoreServer s2(port, 2);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  });
  lt::dist::TcpStore s("127.0.0.1", port, 2, Millis(5000));
  s.set("x", {'y'});
  next_server.join();
}

TEST(DistributedStore, APortInUseIsNamed) {
  lt::dist::TcpStoreServer server(0, 1);
  std::string msg = error_of([&] { lt::dist::TcpStoreServer again(server.port(), 1); });
  EXPECT_TRUE(has(msg, "cannot listen on port " + std::to_string(server.port()))) << msg;
}

// ------------------------------------------------------------------------------------------------
// The environment, read through a map instead of the process's environment

lt::dist::ProcessGroupConfig config_of(std::map<std::string, std::string> env) {
  return lt::dist::config_from_env([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(DistributedConfig, ReadsTorchrunsVariables) {
  auto c = config_of({{"RANK", "2"},
                      {"WORLD_SIZE", "4"},
                      {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", "29500"},
                      {"LOCAL_RANK", "1"},
                      {"LT_DIST_TIMEOUT", "2.5"}});
  EXPECT_EQ(c.rank, 2);
  EXPECT_EQ(c.world_size, 4);
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.master_addr, "127.0.0.1");
  EXPECT_EQ(c.master_port, 29500);
  EXPECT_EQ(c.timeout, Millis(2500));
  EXPECT_EQ(c.gloo_hostname, "127.0.0.1");  // a loopback master: the ranks share this host
  c = config_of({{"RANK", "0"},
                 {"WORLD_SIZE", "1"},
                 {"MASTER_ADDR", "node7"},
                 {"MASTER_PORT", "1"},
                 {"GLOO_SOCKET_IFNAME", "eth1"}});
  EXPECT_EQ(c.local_rank, -1);
  EXPECT_EQ(c.timeout, Millis(300000));
  EXPECT_EQ(c.gloo_iface, "eth1");
  EXPECT_EQ(c.gloo_hostname, "");
}

TEST(DistributedConfig, AMissingOrMalformedVariableIsNamed) {
  std::map<std::string, std::string> ok = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  struct Case {
    std::string var, value;  // value "": unset
    std::string expect;
  };
  std::vector<Case> cases = {
      {"RANK", "", "RANK is not set"},
      {"WORLD_SIZE", "", "WORLD_SIZE is not set"},
      {"MASTER_ADDR", "", "MASTER_ADDR is not set"},
      {"MASTER_PORT", "", "MASTER_PORT is not set"},
      {"RANK", "one", "RANK='one' is not an integer"},
      {"RANK", "-1", "RANK='-1'"},
      {"RANK", "1 ", "RANK='1 '"},
      {"RANK", "2", "RANK=2 is not below WORLD_SIZE=2"},
      {"WORLD_SIZE", "0", "WORLD_SIZE='0'"},
      {"MASTER_PORT", "65536", "MASTER_PORT='65536' is not a port"},
      {"MASTER_PORT", "x", "MASTER_PORT='x'"},
      {"LOCAL_RANK", "a", "LOCAL_RANK='a'"},
      {"LT_DIST_TIMEOUT", "0", "LT_DIST_TIMEOUT='0' is not a positive number of seconds"},
      {"LT_DIST_TIMEOUT", "5s", "LT_DIST_TIMEOUT='5s'"},
  };
  for (const auto& c : cases) {
    auto env = ok;
    if (c.value.empty())
      env.erase(c.var);
    else
      env[c.var] = c.value;
    std::string msg = error_of([&] { config_of(env); });
    EXPECT_TRUE(has(msg, c.expect)) << c.var << "='" << c.value << "': " << msg;
  }
}

TEST(DistributedConfig, BackendsOtherThanGlooAreErrors) {
  std::string msg = error_of([] { lt::dist::init_process_group("nccl"); });
  EXPECT_TRUE(has(msg, "not implemented: nccl process group (built without CUDA)")) << msg;
  msg = error_of([] { lt::dist::init_process_group("mpi"); });
  EXPECT_TRUE(has(msg, "unknown backend 'mpi'")) << msg;
  EXPECT_FALSE(lt::dist::is_initialized());
  msg = error_of([] { lt::dist::get_rank(); });
  EXPECT_TRUE(has(msg, "no process group is initialized")) << msg;
}

// ------------------------------------------------------------------------------------------------
// A group of one in this process: argument checks, without other processes.

TEST(DistributedGloo, AGroupOfOne) {
  if (!lt::dist::gloo_available()) {
    lt::dist::TcpStoreServer server(0, 1);
    lt::dist::TcpStore store("127.0.0.1", server.port(), 1, Millis(2000));
    std::string msg = error_of([&] { lt::dist::make_gloo_communicator(store, {}); });
    EXPECT_TRUE(has(msg, "not implemented: gloo (built without libgloo-dev")) << msg;
    GTEST_SKIP() << "built without Gloo";
  }
  lt::dist::TcpStoreServer server(0, 1);
  lt::dist::TcpStore store("127.0.0.1", server.port(), 1, Millis(2000));
  lt::dist::GlooOptions o;
  o.hostname = "127.0.0.1";
  o.timeout = Millis(2000);
  auto c = lt::dist::make_gloo_communicator(store, o);
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  std::vector<float> x = {1.5f, -2.0f};
  c->all_reduce(x.data(), 2, lt::DType::Float32, lt::dist::ReduceOp::Avg);
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
  int32_t i = 3;
  std::string msg =
      error_of([&] { c->all_reduce(&i, 1, lt::DType::Int32, lt::dist::ReduceOp::Avg); });
  EXPECT_TRUE(has(msg, "Avg of int32")) << msg;
  msg = error_of([&] { c->all_reduce(&i, 1, lt::DType::Int8, lt::dist::ReduceOp::Sum); });
  EXPECT_TRUE(has(msg, "not implemented: all_reduce of int8 on gloo")) << msg;
  msg = error_of([&] { c->all_reduce(&i, -1, lt::DType::Int32, lt::dist::ReduceOp::Sum); });
  EXPECT_TRUE(has(msg, "count must be >= 0, got -1")) << msg;
  msg = error_of([&] { c->broadcast(&i, 4, 1); });
  EXPECT_TRUE(has(msg, "root 1 is not a rank of the group of 1")) << msg;
  char in[3] = {'a', 'b', 'c'}, out[3] = {};
  c->all_gather(in, out, 3);
  EXPECT_EQ(std::string(out, 3), "abc");
  c->barrier();
}

// ------------------------------------------------------------------------------------------------
// Groups of processes (dist_group.h)

void collectives(int world) {
  GroupRun run = run_group("collectives", world, first_ranks(world));
  ASSERT_FALSE(run.timed_out) << run.report();
  for (const auto& r : run.ranks) {
    EXPECT_EQ(r.exit_code, 0) << run.report();
    EXPECT_TRUE(has(r.output, "collectives passed")) << run.report();
  }
}
TEST(DistributedProcesses, Collectives2) {
  SKIP_WITHOUT_GLOO();
  collectives(2);
}
TEST(DistributedProcesses, Collectives3) {
  SKIP_WITHOUT_GLOO();
  collectives(3);
}

// The ranks that came fail with lt::Error once LT_DIST_TIMEOUT (3 s) has passed, naming it.
void never_joins(int world, std::vector<int> ranks) {
  GroupRun run = run_group("never_joins", world, ranks);
  ASSERT_FALSE(run.timed_out) << run.report();
  EXPECT_LT(run.seconds, 12.0) << run.report();
  for (const auto& r : run.ranks) {
    EXPECT_EQ(r.exit_code, 3) << run.report();
    EXPECT_TRUE(has(r.output, "ERROR: init_process_group(gloo): rank " + std::to_string(r.rank) +
                                  " of " + std::to_string(world)))
        << run.report();
    EXPECT_TRUE(has(r.output, "LT_DIST_TIMEOUT=3 s")) << run.report();
    EXPECT_TRUE(has(r.output, "timed out after 3 s") || has(r.output, "within the timeout of 3 s"))
        << run.report();
  }
}
TEST(DistributedProcesses, LastRankNeverJoins2) {
  SKIP_WITHOUT_GLOO();
  never_joins(2, {0});
}
TEST(DistributedProcesses, LastRankNeverJoins3) {
  SKIP_WITHOUT_GLOO();
  never_joins(3, {0, 1});
}
TEST(DistributedProcesses, RankZeroNeverJoins3) {  // no store server: the clients cannot connect
  SKIP_WITHOUT_GLOO();
  never_joins(3, {1, 2});
}

// The last rank exits right after init; the others' all_reduce fails well before the timeout.
void peer_dies(int world) {
  GroupRun run = run_group("peer_dies", world, first_ranks(world));
  ASSERT_FALSE(run.timed_out) << run.report();
  EXPECT_LT(run.seconds, 12.0) << run.report();
  for (const auto& r : run.ranks) {
    if (r.rank == world - 1) {
      EXPECT_EQ(r.exit_code, 0) << run.report();
      continue;
    }
    EXPECT_EQ(r.exit_code, 3) << run.report();
    EXPECT_TRUE(has(r.output, "ERROR: all_reduce on gloo failed on rank " + std::to_string(r.rank) +
                                  " of " + std::to_string(world) +
                                  " (timeout 3 s, LT_DIST_TIMEOUT)"))
        << run.report();
    EXPECT_TRUE(has(r.output, "AGAIN: barrier on gloo: rank")) << run.report();
  }
}
TEST(DistributedProcesses, PeerExitsAfterInit2) {
  SKIP_WITHOUT_GLOO();
  peer_dies(2);
}
TEST(DistributedProcesses, PeerExitsAfterInit3) {
  SKIP_WITHOUT_GLOO();
  peer_dies(3);
}

// A rank that comes to an all_reduce after the timeout: the others fail at the timeout, naming it.
TEST(DistributedProcesses, AllReduceTimesOut3) {
  SKIP_WITHOUT_GLOO();
  GroupRun run = run_group("straggler", 3, first_ranks(3));
  ASSERT_FALSE(run.timed_out) << run.report();
  EXPECT_LT(run.seconds, 12.0) << run.report();
  for (const auto& r : run.ranks) {
    EXPECT_EQ(r.exit_code, 3) << run.report();
    EXPECT_TRUE(has(r.output, "ERROR: all_reduce on gloo failed on rank " + std::to_string(r.rank) +
                                  " of 3 (timeout 3 s, LT_DIST_TIMEOUT)"))
        << run.report();
  }
  // Ranks 0 and 1 waited out the timeout: Gloo's message says so.
  EXPECT_TRUE(has(run.ranks[0].output + run.ranks[1].output, "Timed out")) << run.report();
}

// init without RANK, double init, destroy then init again.
void lifecycle(int world) {
  GroupRun run = run_group("lifecycle", world, first_ranks(world));
  ASSERT_FALSE(run.timed_out) << run.report();
  for (const auto& r : run.ranks) {
    EXPECT_EQ(r.exit_code, 0) << run.report();
    EXPECT_TRUE(has(r.output, "NO_RANK: init_process_group: environment variable RANK is not set"))
        << run.report();
    EXPECT_TRUE(has(r.output, "DOUBLE: init_process_group: a process group is already initialized"))
        << run.report();
    EXPECT_TRUE(has(r.output, "lifecycle passed")) << run.report();
  }
}
TEST(DistributedProcesses, Lifecycle2) {
  SKIP_WITHOUT_GLOO();
  lifecycle(2);
}
TEST(DistributedProcesses, Lifecycle3) {
  SKIP_WITHOUT_GLOO();
  lifecycle(3);
}

// ------------------------------------------------------------------------------------------------
// lt::distributed (runtime/distributed.h), the public C++ API, in a group of one in this process:
// the collectives run through the IR, the CPU executable's worker and Gloo.

TEST(DistributedApi, AGroupOfOneThroughThePublicApi) {
  SKIP_WITHOUT_GLOO();
  namespace ld = lt::distributed;
  lt::Tensor t = lt::testing::random_tensor({4, 5}, 3, lt::testing::kLazyCpu);
  EXPECT_TRUE(has(error_of([&] { ld::all_reduce(t); }), "init_process_group"));
  const std::string port = std::to_string(free_port());
  setenv("RANK", "0", 1), setenv("WORLD_SIZE", "1", 1), setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", port.c_str(), 1);
  ld::init_process_group();
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(v);
  EXPECT_EQ(ld::get_rank(), 0);
  EXPECT_EQ(ld::get_world_size(), 1);
  const std::vector<float> before = t.to_vector<float>();
  lt::Tensor u = t * 2.0;
  ld::all_reduce(u, lt::ReduceOp::Avg);  // one rank: the average is the value
  ld::broadcast(t, 0);
  std::vector<lt::Tensor> out = {lt::testing::random_tensor({4, 5}, 9, lt::testing::kLazyCpu)};
  ld::all_gather(out, t);
  const std::vector<float> doubled = u.to_vector<float>(), gathered = out[0].to_vector<float>();
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_FLOAT_EQ(doubled[i], 2 * before[i]);
    EXPECT_FLOAT_EQ(gathered[i], before[i]);
  }
  std::vector<lt::Tensor> two(2, t);
  EXPECT_TRUE(has(error_of([&] { ld::all_gather(two, t); }), "2 output tensors for a group of 1"));
  ld::barrier();
  ld::destroy_process_group();
  EXPECT_FALSE(ld::is_initialized());
}

}  // namespace lt_dist_test
