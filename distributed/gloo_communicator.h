// The Communicator over Gloo (libgloo-dev) between CPU processes: Gloo's TCP transport carries the
// data, a TcpStore carries the rendezvous. No Gloo type appears here, so the header (and the
// folder) builds without Gloo; make_gloo_communicator then throws.
#pragma once
#include <memory>
#include <string>

#include "distributed/communicator.h"
#include "distributed/tcp_store.h"

namespace lt::dist {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  // Bounds the rendezvous's every wait and each collective end to end.
  Millis timeout{300000};
  // This group's keys in the store: groups sharing a store need distinct prefixes.
  std::string prefix = "lt";
  // Where Gloo's TCP device listens for its peers: a network interface (torch's
  // GLOO_SOCKET_IFNAME), else a hostname or address; both empty: this host's name.
  std::string iface;
  std::string hostname;
};

// Whether the library was built with Gloo (LT_WITH_GLOO).
bool gloo_available();

// Connects rank opts.rank to the other opts.size - 1 ranks, which make the same call with the same
// prefix and size. `store` is used during this call only. Throws lt::Error naming the rank, the
// size and the timeout when the group does not come together (a rank that never joins, a store
// that is gone). Without Gloo: "not implemented: gloo (built without libgloo-dev)".
std::shared_ptr<Communicator> make_gloo_communicator(TcpStore& store, const GlooOptions& opts);

}  // namespace lt::dist
