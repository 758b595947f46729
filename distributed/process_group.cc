#include "distributed/process_group.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <mutex>

#include "distributed/gloo_communicator.h"
#include "distributed/tcp_store.h"
#include "ir/error.h"

namespace lt::dist {
namespace {

constexpr char kEnvHint[] =
    " (torchrun sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; set them yourself when you "
    "start the processes another way)";

long long env_int(const std::function<const char*(const char*)>& getenv, const char* name,
                  long long lo, long long hi, const char* expected) {
  const char* v = getenv(name);
  LT_CHECK(v != nullptr, ErrorKind::Value, "init_process_group: environment variable ", name,
           " is not set", kEnvHint);
  long long x = 0;
  const char* end = v + std::char_traits<char>::length(v);
  auto [p, ec] = std::from_chars(v, end, x);
  LT_CHECK(*v && ec == std::errc() && p == end && x >= lo && x <= hi, ErrorKind::Value,
           "init_process_group: environment variable ", name, "='", v, "' is not ", expected);
  return x;
}

bool is_loopback(const std::string& addr) {
  return addr.rfind("127.", 0) == 0 || addr == "localhost" || addr == "::1";
}

// The process's group. `current` is swapped under state_mu only, so the accessors never wait for
// a rendezvous or a teardown, which hold lifecycle_mu throughout.
struct Group {
  ProcessGroupConfig cfg;
  std::unique_ptr<TcpStoreServer> server;  // rank 0 only
  std::unique_ptr<TcpStore> store;
  std::shared_ptr<Communicator> comm;
};

std::mutex lifecycle_mu;
std::mutex state_mu;
std::shared_ptr<Group> current;
// Engines other than Gloo, by name (register_engine).
std::mutex engines_mu;
std::map<std::string, EngineFactory>& engines() {
  static std::map<std::string, EngineFactory> m;
  return m;
}

EngineFactory engine_named(const std::string& name) {
  std::lock_guard<std::mutex> lock(engines_mu);
  auto it = engines().find(name);
  return it == engines().end() ? EngineFactory{} : it->second;
}

// How many groups this process has started: every rank counts alike, so it names the group in the
// store (a key prefix, and the store's generation that turns away a client of another group).
uint64_t groups_started = 0;

// graceful: rank 0 serves the store until the other ranks let go of it (or the timeout passes).
void teardown(Group& g, bool graceful) {
  g.comm.reset();
  g.store.reset();  // closes this rank's connection to the store
  if (g.server) g.server->stop(graceful ? g.cfg.timeout : Millis(0));
  g.server.reset();
}

std::shared_ptr<Group> current_or_fail(const char* fn) {
  std::lock_guard<std::mutex> lock(state_mu);
  LT_CHECK(current != nullptr, ErrorKind::Runtime, fn,
           ": no process group is initialized (call init_process_group first)");
  return current;
}

}  // namespace

ProcessGroupConfig config_from_env(const std::function<const char*(const char*)>& getenv) {
  ProcessGroupConfig c;
  c.rank = static_cast<int>(env_int(getenv, "RANK", 0, 1 << 24, "an integer >= 0"));
  c.world_size = static_cast<int>(env_int(getenv, "WORLD_SIZE", 1, 1 << 24, "an integer >= 1"));
  LT_CHECK(c.rank < c.world_size, ErrorKind::Value, "init_process_group: RANK=", c.rank,
           " is not below WORLD_SIZE=", c.world_size);
  const char* addr = getenv("MASTER_ADDR");
  LT_CHECK(addr && *addr, ErrorKind::Value, "init_process_group: environment variable MASTER_ADDR",
           addr ? " is empty" : " is not set", kEnvHint);
  c.master_addr = addr;
  c.master_port =
      static_cast<uint16_t>(env_int(getenv, "MASTER_PORT", 1, 65535, "a port in [1, 65535]"));
  // torchrun's agent serves PyTorch's own store on MASTER_PORT (and says so to its workers with
  // TORCHELASTIC_USE_AGENT_STORE), so under it rank 0 serves ours on the next port;
  // LT_DIST_STORE_PORT chooses another. Every rank reads the same environment.
  if (getenv("LT_DIST_STORE_PORT"))
    c.master_port = static_cast<uint16_t>(
        env_int(getenv, "LT_DIST_STORE_PORT", 1, 65535, "a port in [1, 65535]"));
  else if (const char* agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
           agent && std::string(agent) == "True")
    LT_CHECK(c.master_port++ < 65535, ErrorKind::Value, "init_process_group: MASTER_PORT=65535 ",
             "under torchrun leaves no port for lazytensor's store (set LT_DIST_STORE_PORT)");
  if (getenv("LOCAL_RANK"))
    c.local_rank = static_cast<int>(env_int(getenv, "LOCAL_RANK", 0, 1 << 24, "an integer >= 0"));
  if (const char* t = getenv("LT_DIST_TIMEOUT")) {
    char* end = nullptr;
    double s = std::strtod(t, &end);
    LT_CHECK(*t && end && *end == 0 && std::isfinite(s) && s > 0 && s < 1e9, ErrorKind::Value,
             "init_process_group: environment variable LT_DIST_TIMEOUT='", t,
             "' is not a positive number of seconds");
    c.timeout = Millis(std::max<long long>(1, std::llround(s * 1000)));
  }
  if (const char* v = getenv("GLOO_SOCKET_IFNAME")) c.gloo_iface = v;
  if (const char* v = getenv("LT_GLOO_HOSTNAME")) c.gloo_hostname = v;
  // Every rank on this host: the loopback address needs no name resolution.
  if (c.gloo_iface.empty() && c.gloo_hostname.empty() && is_loopback(c.master_addr))
    c.gloo_hostname = c.master_addr == "localhost" ? "127.0.0.1" : c.master_addr;
  return c;
}

void register_engine(const std::string& name, EngineFactory make) {
  std::lock_guard<std::mutex> lock(engines_mu);
  engines()[name] = std::move(make);
}

void init_process_group(const std::string& backend) {
  std::lock_guard<std::mutex> life(lifecycle_mu);
  {
    std::lock_guard<std::mutex> lock(state_mu);
    LT_CHECK(current == nullptr, ErrorKind::Runtime,
             "init_process_group: a process group is already initialized (rank ", current->cfg.rank,
             " of ", current->cfg.world_size,
             "); call destroy_process_group() before initializing another");
  }
  std::string b = backend.empty() ? "gloo" : backend;
  EngineFactory engine = b == "gloo" ? EngineFactory{} : engine_named(b);
  LT_CHECK(b != "nccl" || engine, ErrorKind::NotImplemented,
           "not implemented: nccl process group (built without CUDA)");
  LT_CHECK(b == "gloo" || engine, ErrorKind::Value, "init_process_group: unknown backend '",
           backend, "' (expected \"gloo\", \"nccl\" or \"\")");
  LT_CHECK(engine || gloo_available(), ErrorKind::NotImplemented,
           "not implemented: gloo (built without libgloo-dev)");
  auto g = std::make_shared<Group>();
  g->cfg = config_from_env([](const char* n) -> const char* { return std::getenv(n); });
  const ProcessGroupConfig& c = g->cfg;
  uint64_t generation = ++groups_started;
  try {
    if (c.rank == 0) g->server = std::make_unique<TcpStoreServer>(c.master_port, generation);
    g->store = std::make_unique<TcpStore>(c.master_addr, c.master_port, generation, c.timeout);
    const std::string prefix = "lt/pg" + std::to_string(generation);
    if (engine) {
      g->comm = engine(EngineRendezvous{c, *g->store, prefix});
    } else {
      GlooOptions o;
      o.rank = c.rank;
      o.size = c.world_size;
      o.timeout = c.timeout;
      o.prefix = prefix;
      o.iface = c.gloo_iface;
      o.hostname = c.gloo_hostname;
      g->comm = make_gloo_communicator(*g->store, o);
    }
  } catch (const Error& e) {
    teardown(*g, false);
    fail(e.kind(), "init_process_group(", b, "): rank ", c.rank, " of ", c.world_size,
         " (LT_DIST_TIMEOUT=", seconds_text(c.timeout), "): ", e.what());
  }
  std::lock_guard<std::mutex> lock(state_mu);
  current = std::move(g);
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(state_mu);
  return current != nullptr;
}

int get_rank() { return current_or_fail("get_rank")->cfg.rank; }
int get_world_size() { return current_or_fail("get_world_size")->cfg.world_size; }
int get_local_rank() { return current_or_fail("get_local_rank")->cfg.local_rank; }
std::shared_ptr<Communicator> default_communicator() {
  return current_or_fail("default_communicator")->comm;
}

void destroy_process_group() {
  std::lock_guard<std::mutex> life(lifecycle_mu);
  std::shared_ptr<Group> g;
  {
    std::lock_guard<std::mutex> lock(state_mu);
    g = std::move(current);
  }
  LT_CHECK(g != nullptr, ErrorKind::Runtime,
           "destroy_process_group: no process group is initialized");
  teardown(*g, true);
}

}  // namespace lt::dist
