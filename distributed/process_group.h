// The default process group of this process (torch.distributed's init_process_group and friends):
// one Communicator shared by everything in the process, set up from torchrun's environment.
//
//   RANK, WORLD_SIZE           this process's rank and the number of processes (required)
//   MASTER_ADDR, MASTER_PORT   where rank 0 serves the rendezvous store (required); under
//                              torchrun (TORCHELASTIC_USE_AGENT_STORE=True), whose agent holds
//                              MASTER_PORT, the port after it
//   LT_DIST_STORE_PORT         the store's port instead (optional)
//   LOCAL_RANK                 the rank on this host (optional; kept for choosing a GPU)
//   LT_DIST_TIMEOUT            seconds that bound every wait (default 300)
//   GLOO_SOCKET_IFNAME         the network interface Gloo's transport uses (optional), else
//   LT_GLOO_HOSTNAME           a hostname or address to bind (optional; default: this host's
//                              name, or the loopback address when MASTER_ADDR is a loopback one)
//
// All functions are thread-safe. init and destroy are serialized with each other; the accessors
// never wait for them.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "distributed/timeout.h"

namespace lt::dist {

struct ProcessGroupConfig {
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;  // -1: LOCAL_RANK was not set
  std::string master_addr;
  uint16_t master_port = 0;
  Millis timeout{300000};
  std::string gloo_iface;
  std::string gloo_hostname;
};

// The configuration the environment describes; `getenv` returns nullptr for an unset variable.
// A missing or malformed variable is an lt::Error naming it.
ProcessGroupConfig config_from_env(const std::function<const char*(const char*)>& getenv);

class TcpStore;

// What an engine other than Gloo needs to join a group: the group's configuration, its rendezvous
// store and the key prefix of this group in it (every rank gets the same).
struct EngineRendezvous {
  const ProcessGroupConfig& cfg;
  TcpStore& store;
  std::string prefix;
};
// Makes the engine's communicator for this rank (collective: every rank calls it); throws
// lt::Error.
using EngineFactory = std::function<std::shared_ptr<Communicator>(const EngineRendezvous&)>;
// Makes engine `name` ("nccl") known to init_process_group. The layers above distributed/ register
// theirs (runtime/distributed.cc registers the CUDA backend's NCCL): this folder names no device.
// A later registration of the same name replaces the earlier one.
void register_engine(const std::string& name, EngineFactory make);

// Joins the group that the environment describes: returns once every rank has joined, or throws
// lt::Error (naming the timeout when a rank did not join in time). backend "" or "gloo": Gloo;
// another name: a registered engine ("nccl": lt::distributed registers it when built with CUDA),
// else "not implemented". An error when a group is already initialized in this process.
void init_process_group(const std::string& backend = "");
bool is_initialized();
// These throw lt::Error when no group is initialized.
int get_rank();
int get_world_size();
int get_local_rank();  // -1 when LOCAL_RANK was not set
std::shared_ptr<Communicator> default_communicator();
// Leaves the group; init_process_group may be called again afterwards. On rank 0 it waits (at most
// LT_DIST_TIMEOUT) until the other ranks have closed their connections to the store, which lives
// in rank 0's process. A communicator still held elsewhere stays usable until its last holder lets
// go of it. Throws lt::Error when no group is initialized.
void destroy_process_group();

}  // namespace lt::dist
