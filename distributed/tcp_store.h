// The rendezvous key-value store of a process group, over TCP: rank 0 runs a TcpStoreServer on
// MASTER_PORT, and every rank (rank 0 too) talks to it through a TcpStore client. Keys are
// strings, values bytes. Only the rendezvous goes through it (each rank's transport addresses, for
// Gloo; the NCCL unique id later); the collectives' data never does.
//
// Engine-neutral: gloo_communicator.cc adapts a TcpStore to gloo::rendezvous::Store, so this
// header builds without Gloo and can serve an NCCL group too.
//
// Every blocking call is bounded by a timeout and throws lt::Error naming what it waited for, the
// server's address and the timeout. A server that is gone (its process died, or the group was
// destroyed) is an error at once, never a hang.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/timeout.h"

namespace lt::dist {

// Serves the store from a thread of its own, on every interface (IPv6 and IPv4 where the host has
// both). `generation` tells one process group of a port from the next: a client of another
// generation (a rank that already re-initialized while this group's server is winding down) is
// turned away and retries, so it cannot leave its keys in a store about to disappear.
class TcpStoreServer {
 public:
  // port 0: the kernel picks one (see port()). Throws lt::Error when the port cannot be bound.
  TcpStoreServer(uint16_t port, uint64_t generation);
  ~TcpStoreServer();  // stop(Millis(0))
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const { return port_; }
  // Stops accepting, serves the clients still connected until each has closed its connection or
  // `grace` has passed (other ranks may still be reading rendezvous keys when rank 0 is done), then
  // closes everything and joins the thread. Idempotent.
  void stop(Millis grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

// One connection to the server; its calls are serialized by a mutex. `timeout` bounds each call
// that has none of its own, and the connecting too (the server may come up after the client: the
// client retries until then).
class TcpStore {
 public:
  TcpStore(std::string host, uint16_t port, uint64_t generation, Millis timeout);
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::vector<char>& value);
  // Waits until the key exists.
  std::vector<char> get(const std::string& key) { return get(key, timeout_); }
  std::vector<char> get(const std::string& key, Millis timeout);
  // Whether the key exists now.
  bool check(const std::string& key);
  // Waits until every key exists.
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, Millis timeout);

  Millis timeout() const { return timeout_; }
  const std::string& address() const { return address_; }  // "host:port"

 private:
  struct Reply {
    uint8_t status;
    std::vector<char> payload;
  };
  Reply request(uint8_t op, const std::string& key, const std::vector<char>& value,
                const char* what);
  void connect_locked();
  [[noreturn]] void lost(const std::string& why);

  std::string host_;
  uint16_t port_;
  uint64_t generation_;
  Millis timeout_;
  std::string address_;
  std::mutex mu_;
  int fd_ = -1;
  std::string broken_;  // why the connection was lost: later calls fail at once
};

}  // namespace lt::dist
