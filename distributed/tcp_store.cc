// The store's wire format, one request and one reply at a time per connection:
//   request: u8 op, u32 key length, u32 value length, key bytes, value bytes
//   reply:   u8 status, u32 payload length, payload bytes        (little-endian lengths)
// A connection starts with HELLO (key: the protocol's magic, value: the group's generation).
// The server answers every request at once and keeps no waiting clients: a client waits for a key
// by asking again (1 ms, doubling to 20 ms), so a client that gives up at its timeout leaves no
// stale reply behind on its connection, and the server thread is one poll() loop.
#include "distributed/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <unordered_map>

#include "ir/error.h"

namespace lt::dist {
namespace {

using Clock = std::chrono::steady_clock;

enum Op : uint8_t { kHello = 1, kSet = 2, kGet = 3, kCheck = 4 };
enum Status : uint8_t { kOk = 0, kMissing = 1, kRejected = 2, kBad = 3 };
constexpr char kMagic[] = "lazytensor-tcp-store-v1";
constexpr size_t kHeader = 9, kReplyHeader = 5;
constexpr uint32_t kMaxKey = 1 << 16, kMaxValue = 1u << 30;

void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
std::vector<char> u64_bytes(uint64_t v) {
  std::vector<char> b(8);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return b;
}
uint64_t bytes_u64(const std::vector<char>& b) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
  return v;
}

std::string errno_text(int e) { return std::strerror(e); }

// Writes all of `data`; false (errno set) when the peer is gone or the socket's send timeout hit.
bool send_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, data, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    data += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

enum class Io { Ok, Timeout, Closed, Error };

// Reads exactly n bytes before `deadline`.
Io recv_exact(int fd, char* out, size_t n, Clock::time_point deadline, int* err) {
  while (n > 0) {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    if (left <= 0) return Io::Timeout;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1 << 30)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return *err = errno, Io::Error;
    if (r == 0) continue;  // the loop re-checks the deadline
    ssize_t k = ::recv(fd, out, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k < 0) return *err = errno, Io::Error;
    if (k == 0) return Io::Closed;
    out += k;
    n -= static_cast<size_t>(k);
  }
  return Io::Ok;
}

std::vector<char> frame(uint8_t op, const std::string& key, const std::vector<char>& value) {
  std::vector<char> f(kHeader + key.size() + value.size());
  f[0] = static_cast<char>(op);
  put_u32(&f[1], static_cast<uint32_t>(key.size()));
  put_u32(&f[5], static_cast<uint32_t>(value.size()));
  std::memcpy(f.data() + kHeader, key.data(), key.size());
  if (!value.empty()) std::memcpy(f.data() + kHeader + key.size(), value.data(), value.size());
  return f;
}

void set_send_timeout(int fd, Millis t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((t.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

// A listening socket on every interface: IPv6 accepting IPv4 too, or IPv4 where the host has no
// IPv6. Returns -1 with *err set.
int listen_any(uint16_t port, int* err) {
  for (int family : {AF_INET6, AF_INET}) {
    int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      *err = errno;
      continue;
    }
    int on = 1, off = 0;
    // A new group on the same port must not wait out the last group's TIME_WAIT connections.
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    int r;
    if (family == AF_INET6) {
      ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(port);
      r = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(port);
      r = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    }
    if (r == 0 && ::listen(fd, 128) == 0) return fd;
    *err = errno;
    ::close(fd);
    if (*err == EADDRINUSE) return -1;  // IPv4 would be taken as well
  }
  return -1;
}

uint16_t bound_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Server

struct TcpStoreServer::Impl {
  struct Conn {
    int fd;
    std::vector<char> in;
    bool greeted = false;
  };

  uint64_t generation;
  int listen_fd = -1;
  int wake[2] = {-1, -1};  // stop() writes a byte to end the thread's poll
  std::thread thread;
  std::mutex mu;
  bool stopping = false;
  Clock::time_point deadline;
  std::unordered_map<std::string, std::vector<char>> data;  // the thread's alone
  std::vector<Conn> conns;

  void run();
  bool serve(Conn& c);  // false: close the connection
  void close_listener() {
    if (listen_fd >= 0) ::close(listen_fd);
    listen_fd = -1;
  }
  bool reply(Conn& c, uint8_t status, const std::vector<char>& payload = {}) {
    std::vector<char> f(kReplyHeader + payload.size());
    f[0] = static_cast<char>(status);
    put_u32(&f[1], static_cast<uint32_t>(payload.size()));
    if (!payload.empty()) std::memcpy(f.data() + kReplyHeader, payload.data(), payload.size());
    return send_all(c.fd, f.data(), f.size());
  }
};

TcpStoreServer::TcpStoreServer(uint16_t port, uint64_t generation) : impl_(new Impl) {
  impl_->generation = generation;
  int err = 0;
  impl_->listen_fd = listen_any(port, &err);
  LT_CHECK(
      impl_->listen_fd >= 0, ErrorKind::Runtime, "TcpStoreServer: cannot listen on port ", port,
      ": ", errno_text(err),
      err == EADDRINUSE ? " (another program, or another group's rank 0, holds MASTER_PORT)" : "");
  port_ = bound_port(impl_->listen_fd);
  if (::pipe2(impl_->wake, O_CLOEXEC) != 0) {
    err = errno;
    ::close(impl_->listen_fd);
    fail(ErrorKind::Runtime, "TcpStoreServer: pipe: ", errno_text(err));
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

TcpStoreServer::~TcpStoreServer() { stop(Millis(0)); }

void TcpStoreServer::stop(Millis grace) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->thread.joinable()) return;
    impl_->stopping = true;
    impl_->deadline = Clock::now() + grace;
  }
  char b = 1;
  while (::write(impl_->wake[1], &b, 1) < 0 && errno == EINTR) {
  }
  impl_->thread.join();
  ::close(impl_->wake[0]);
  ::close(impl_->wake[1]);
}

void TcpStoreServer::Impl::run() {
  std::vector<pollfd> fds;
  for (;;) {
    bool stop;
    Clock::time_point until;
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = stopping;
      until = deadline;
    }
    int wait_ms = -1;
    if (stop) {
      close_listener();
      // A connection that never greeted is no rank of this group: nothing to wait for.
      std::erase_if(conns, [](const Conn& c) {
        if (!c.greeted) ::close(c.fd);
        return !c.greeted;
      });
      auto left = std::chrono::duration_cast<Millis>(until - Clock::now()).count();
      if (conns.empty() || left <= 0) break;
      wait_ms = static_cast<int>(std::min<long long>(left, 1 << 30));
    }
    fds.clear();
    fds.push_back({wake[0], POLLIN, 0});
    if (listen_fd >= 0) fds.push_back({listen_fd, POLLIN, 0});
    size_t first_conn = fds.size();
    for (auto& c : conns) fds.push_back({c.fd, POLLIN, 0});
    int r = ::poll(fds.data(), fds.size(), wait_ms);
    if (r < 0) continue;  // EINTR; anything else repeats until stop() ends the loop
    if (fds[0].revents) {
      char buf[64];
      [[maybe_unused]] ssize_t k = ::read(wake[0], buf, sizeof(buf));
    }
    std::vector<bool> drop(conns.size(), false);
    for (size_t i = 0; i < conns.size(); ++i)
      if (fds[first_conn + i].revents) drop[i] = !serve(conns[i]);
    for (size_t i = conns.size(); i-- > 0;) {
      if (!drop[i]) continue;
      ::close(conns[i].fd);
      conns.erase(conns.begin() + static_cast<long>(i));
    }
    if (listen_fd >= 0 && fds[1].revents & POLLIN) {
      int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        int on = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
        set_send_timeout(fd, Millis(10000));  // a client that stops reading cannot stall the rest
        conns.push_back({fd, {}, false});
      }
    }
  }
  for (auto& c : conns) ::close(c.fd);
  conns.clear();
  close_listener();
}

bool TcpStoreServer::Impl::serve(Conn& c) {
  char buf[65536];
  ssize_t k = ::recv(c.fd, buf, sizeof(buf), 0);
  if (k < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (k <= 0) return false;  // closed by the client (or its process exited)
  c.in.insert(c.in.end(), buf, buf + k);
  size_t at = 0;
  while (c.in.size() - at >= kHeader) {
    const char* h = c.in.data() + at;
    uint8_t op = static_cast<uint8_t>(h[0]);
    uint32_t klen = get_u32(h + 1), vlen = get_u32(h + 5);
    if (klen > kMaxKey || vlen > kMaxValue) return false;  // not our protocol
    if (c.in.size() - at < kHeader + klen + vlen) break;
    std::string key(h + kHeader, klen);
    std::vector<char> value(h + kHeader + klen, h + kHeader + klen + vlen);
    at += kHeader + klen + vlen;
    if (!c.greeted) {
      if (op != kHello || key != kMagic || value.size() != 8) {
        reply(c, kBad);
        return false;
      }
      if (bytes_u64(value) != generation) {
        reply(c, kRejected);
        return false;
      }
      c.greeted = true;
      if (!reply(c, kOk)) return false;
      continue;
    }
    bool ok;
    switch (op) {
      case kSet:
        data[key] = std::move(value);
        ok = reply(c, kOk);
        break;
      case kGet: {
        auto it = data.find(key);
        ok = it == data.end() ? reply(c, kMissing) : reply(c, kOk, it->second);
        break;
      }
      case kCheck:
        ok = reply(c, data.count(key) ? kOk : kMissing);
        break;
      default:
        reply(c, kBad);
        return false;
    }
    if (!ok) return false;
  }
  c.in.erase(c.in.begin(), c.in.begin() + static_cast<long>(at));
  return true;
}

// ---------------------------------------------------------------------------------------------
// Client

TcpStore::TcpStore(std::string host, uint16_t port, uint64_t generation, Millis timeout)
    : host_(std::move(host)), port_(port), generation_(generation), timeout_(timeout) {
  LT_CHECK(timeout_.count() > 0, ErrorKind::Value, "TcpStore: timeout must be positive, got ",
           timeout_.count(), " ms");
  address_ = (host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_) + ":" +
             std::to_string(port_);
  std::lock_guard<std::mutex> lock(mu_);
  connect_locked();
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// One attempt at a greeted connection; -1 with *why set when it fails. An attempt cut short by
// the deadline keeps the reason an earlier attempt gave (a refusal says more than "no reply").
int try_connect(const std::string& host, uint16_t port, uint64_t generation,
                Clock::time_point deadline, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int g = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (g != 0) {
    *why = std::string("cannot resolve host '") + host + "': " + ::gai_strerror(g);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) {
      *why = "socket: " + errno_text(errno);
      continue;
    }
    int r = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    int err = r == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
      pollfd p{fd, POLLOUT, 0};
      int pr = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 1 << 30)));
      socklen_t len = sizeof(err);
      if (pr == 0 && *why != "no attempt") {
        ::close(fd);
        fd = -1;
        continue;
      }
      if (pr <= 0)
        err = ETIMEDOUT;
      else
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err != 0) {
      *why = "connect: " + errno_text(err);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) return -1;
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));

  std::vector<char> f = frame(kHello, kMagic, u64_bytes(generation));
  char reply[kReplyHeader];
  int err = 0;
  if (!send_all(fd, f.data(), f.size())) {
    *why = "sending the greeting: " + errno_text(errno);
  } else {
    Io io = recv_exact(fd, reply, kReplyHeader, deadline, &err);
    if (io == Io::Ok && reply[0] == kOk && get_u32(reply + 1) == 0) return fd;
    if (io == Io::Ok && reply[0] == kRejected)
      *why =
          "the server there serves another process group (a previous group still shutting "
          "down, or ranks that disagree on how many groups they made)";
    else if (io == Io::Ok)
      *why = "the server there is no lazytensor store (unexpected reply to the greeting)";
    else if (io == Io::Timeout) {
      if (*why == "no attempt") *why = "no reply to the greeting";
    } else if (io == Io::Closed)
      *why = "the server closed the connection after the greeting";
    else
      *why = "reading the greeting's reply: " + errno_text(err);
  }
  ::close(fd);
  return -1;
}

}  // namespace

void TcpStore::connect_locked() {
  auto deadline = Clock::now() + timeout_;
  std::string why = "no attempt";
  Millis backoff(10);
  for (;;) {
    fd_ = try_connect(host_, port_, generation_, deadline, &why);
    if (fd_ >= 0) break;
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    if (left.count() <= 0)
      fail(ErrorKind::Runtime, "TcpStore: could not connect to the rendezvous store at ", address_,
           " within the timeout of ", seconds_text(timeout_), ": ", why,
           " (is rank 0 running, and are MASTER_ADDR and MASTER_PORT the same on every rank?)");
    std::this_thread::sleep_for(std::min(backoff, left));  // the server may not be up yet
    backoff = std::min(backoff * 2, Millis(200));
  }
  set_send_timeout(fd_, timeout_);
}

void TcpStore::lost(const std::string& why) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  broken_ = why;
  fail(ErrorKind::Runtime, "TcpStore: ", why);
}

TcpStore::Reply TcpStore::request(uint8_t op, const std::string& key,
                                  const std::vector<char>& value, const char* what) {
  LT_CHECK(key.size() <= kMaxKey && value.size() <= kMaxValue, ErrorKind::Value, "TcpStore: ", what,
           " '", key.substr(0, 64), "': key of ", key.size(), " bytes or value of ", value.size(),
           " bytes over the limits (", kMaxKey, ", ", kMaxValue, ")");
  if (!broken_.empty())
    fail(ErrorKind::Runtime, "TcpStore: cannot go on ", what, " '", key,
         "': the connection to the store at ", address_, " was lost earlier (", broken_, ")");
  std::vector<char> f = frame(op, key, value);
  if (!send_all(fd_, f.data(), f.size()))
    lost("the store server at " + address_ + " is gone (" + errno_text(errno) + ") while " + what +
         " '" + key + "': did rank 0 exit or destroy its process group?");
  char h[kReplyHeader];
  int err = 0;
  auto deadline = Clock::now() + timeout_;
  Io io = recv_exact(fd_, h, kReplyHeader, deadline, &err);
  Reply r{static_cast<uint8_t>(h[0]), {}};
  if (io == Io::Ok) {
    r.payload.resize(get_u32(h + 1));
    io = recv_exact(fd_, r.payload.data(), r.payload.size(), deadline, &err);
  }
  if (io == Io::Closed)
    lost("the store server at " + address_ + " closed the connection while " + what + " '" + key +
         "': did rank 0 exit or destroy its process group?");
  if (io == Io::Timeout)
    lost("no reply from the store server at " + address_ + " within " + seconds_text(timeout_) +
         " while " + what + " '" + key + "'");
  if (io == Io::Error)
    lost("reading from the store server at " + address_ + " while " + what + " '" + key +
         "': " + errno_text(err));
  if (r.status == kBad || r.status == kRejected)
    lost("the store server at " + address_ + " refused the request " + what + " '" + key + "'");
  return r;
}

void TcpStore::set(const std::string& key, const std::vector<char>& value) {
  std::lock_guard<std::mutex> lock(mu_);
  request(kSet, key, value, "setting key");
}

bool TcpStore::check(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return request(kCheck, key, {}, "checking key").status == kOk;
}

std::vector<char> TcpStore::get(const std::string& key, Millis timeout) {
  auto deadline = Clock::now() + timeout;
  Millis backoff(1);
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      Reply r = request(kGet, key, {}, "getting key");
      if (r.status == kOk) return std::move(r.payload);
    }
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    if (left.count() <= 0)
      fail(ErrorKind::Runtime, "TcpStore: timed out after ", seconds_text(timeout),
           " waiting for key '", key, "' at ", address_,
           " (a rank that never joined, or one that failed before publishing it?)");
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, Millis(20));
  }
}

void TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  auto deadline = Clock::now() + timeout;
  Millis backoff(1);
  std::vector<std::string> missing = keys;
  for (;;) {
    std::erase_if(missing, [&](const std::string& k) { return check(k); });
    if (missing.empty()) return;
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    if (left.count() <= 0) {
      std::string names;
      for (const auto& k : missing) names += (names.empty() ? "'" : ", '") + k + "'";
      fail(ErrorKind::Runtime, "TcpStore: timed out after ", seconds_text(timeout),
           " waiting for key", missing.size() > 1 ? "s " : " ", names, " at ", address_,
           " (a rank that never joined, or one that failed before publishing it?)");
    }
    std::this_thread::sleep_for(std::min(backoff, left));
    backoff = std::min(backoff * 2, Millis(20));
  }
}

}  // namespace lt::dist
