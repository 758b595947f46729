// What the tests of process groups share (distributed_test.cc, data_parallel_test.cc): groups of
// dist_worker processes (tests/cpp/dist_worker.cc), one per rank, started with posix_spawn (the
// test process has threads, so fork() without exec is not an option), each reporting through its
// exit code and stderr, every group under a hard deadline after which its processes are killed.
#pragma once
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "distributed/gloo_communicator.h"
#include "distributed/tcp_store.h"
#include "ir/error.h"

extern char** environ;

namespace lt_dist_test {

using Clock = std::chrono::steady_clock;
using lt::dist::Millis;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const lt::Error& e) {
    return e.what();
  }
  return "";
}

inline bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A port nobody listens on right now (the kernel's pick for port 0).
inline uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

struct Rank {
  int rank;
  pid_t pid = -1;
  std::string log;
  int exit_code = -1;  // -1: killed or crashed
  std::string output;  // its stdout and stderr
};

struct GroupRun {
  std::vector<Rank> ranks;
  bool timed_out = false;
  double seconds = 0;
  std::string report() const {
    std::ostringstream os;
    for (const auto& r : ranks)
      os << "--- rank " << r.rank << " exit " << r.exit_code << ":\n" << r.output << "\n";
    return os.str();
  }
};

// Starts dist_worker <scenario> [args...] as the given ranks of a group of `world` (the ranks left
// out never join), with LT_DIST_TIMEOUT=3, and waits for them all; after `deadline` they are
// killed.
inline GroupRun run_group(const std::string& scenario, int world, std::vector<int> ranks,
                          std::chrono::seconds deadline = std::chrono::seconds(60),
                          std::vector<std::string> args = {}) {
  static const char* kOurs[] = {
      "RANK=",       "WORLD_SIZE=",      "MASTER_ADDR=",        "MASTER_PORT=",
      "LOCAL_RANK=", "LT_DIST_TIMEOUT=", "GLOO_SOCKET_IFNAME=", "LT_GLOO_HOSTNAME="};
  std::vector<std::string> base;
  for (char** e = environ; *e; ++e) {
    bool ours = false;
    for (const char* p : kOurs) ours = ours || std::string(*e).rfind(p, 0) == 0;
    if (!ours) base.push_back(*e);
  }
  uint16_t port = free_port();
  char dir_template[] = "/tmp/lt_dist_test_XXXXXX";
  std::string dir = ::mkdtemp(dir_template);
  GroupRun run;
  auto t0 = Clock::now();
  for (int r : ranks) {
    Rank rk;
    rk.rank = r;
    rk.log = dir + "/rank" + std::to_string(r) + ".log";
    std::vector<std::string> env = base;
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("LOCAL_RANK=" + std::to_string(r));
    env.push_back("WORLD_SIZE=" + std::to_string(world));
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    env.push_back("LT_DIST_TIMEOUT=3");
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = LT_DIST_WORKER_PATH;
    std::vector<char*> argv = {exe.data(), const_cast<char*>(scenario.c_str())};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, rk.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    int rc = posix_spawn(&rk.pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    EXPECT_EQ(rc, 0) << "posix_spawn " << exe << ": " << std::strerror(rc);
    if (rc != 0) rk.pid = -1;
    run.ranks.push_back(rk);
  }
  size_t left = 0;
  for (auto& r : run.ranks) left += r.pid > 0;
  while (left > 0) {
    for (auto& r : run.ranks) {
      if (r.pid <= 0) continue;
      int status = 0;
      if (::waitpid(r.pid, &status, WNOHANG) != r.pid) continue;
      r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      if (WIFSIGNALED(status))
        r.output = "killed by signal " + std::to_string(WTERMSIG(status)) + "\n";
      r.pid = 0;
      --left;
    }
    if (left > 0 && Clock::now() - t0 > deadline) {
      run.timed_out = true;
      for (auto& r : run.ranks) {
        if (r.pid <= 0) continue;
        ::kill(r.pid, SIGKILL);
        ::waitpid(r.pid, nullptr, 0);
        r.pid = 0;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& r : run.ranks) {
    std::ifstream f(r.log);
    std::stringstream ss;
    ss << f.rdbuf();
    r.output += ss.str();
    std::remove(r.log.c_str());
  }
  ::rmdir(dir.c_str());
  return run;
}

inline std::vector<int> first_ranks(int n) {
  std::vector<int> r;
  for (int i = 0; i < n; ++i) r.push_back(i);
  return r;
}

#define SKIP_WITHOUT_GLOO() \
  if (!lt::dist::gloo_available()) GTEST_SKIP() << "built without Gloo"

}  // namespace lt_dist_test
