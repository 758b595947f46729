#include "backends/cuda/nvrtc_worker.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <mutex>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/clocks.h"
#include "ir/error.h"

extern char** environ;

namespace lt {
namespace {

// Request: magic, u8 cubin, u8 effort, then arch, name and source as (u64 length, bytes).
// Reply: magic, u8 status (0 image, 1 compile error), u8 error kind, u64 the worker's CPU
// microseconds, (u64 length, bytes) of the image or the error text. Little-endian; both sides are
// the same build of this file.
constexpr char kWireMagic[8] = {'L', 'T', 'N', 'V', 'R', 'T', 'C', '1'};
constexpr uint64_t kMaxField = uint64_t{1} << 30;  // far above any program or image
constexpr uint8_t kImage = 0, kCompileError = 1;

void put_u64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
}
void put_field(std::string& s, const char* p, size_t n) {
  put_u64(s, n);
  s.append(p, n);
}
void put_field(std::string& s, const std::string& v) { put_field(s, v.data(), v.size()); }

// Reads a message front to back; any short or oversized field clears `ok`.
struct Reader {
  const std::string& s;
  size_t at = 0;
  bool ok = true;
  bool take(size_t n) {
    ok = ok && s.size() - at >= n;
    return ok;
  }
  void magic() {
    if (take(8)) ok = std::memcmp(s.data() + at, kWireMagic, 8) == 0, at += 8;
  }
  uint8_t u8() { return take(1) ? static_cast<uint8_t>(s[at++]) : 0; }
  uint64_t u64() {
    if (!take(8)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(s[at + i])} << (8 * i);
    at += 8;
    return v;
  }
  std::string field() {
    const uint64_t n = u64();
    if (n > kMaxField || !take(n)) return ok = false, std::string();
    at += n;
    return s.substr(at - n, n);
  }
  bool done() const { return ok && at == s.size(); }
};

// Writes all of `data`; on a socket without SIGPIPE (a worker gone early must not kill us).
bool write_all(int fd, const std::string& data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left) {
    ssize_t w = ::send(fd, p, left, MSG_NOSIGNAL);
    if (w < 0 && errno == ENOTSOCK) w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    left -= static_cast<size_t>(w);
  }
  return true;
}

// Reads `fd` to its end (at most kMaxField plus a header).
bool read_all(int fd, std::string* out) {
  char buf[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) return true;
    out->append(buf, static_cast<size_t>(r));
    if (out->size() > kMaxField + 64) return false;
  }
}

// A one-byte socket message with room for one file descriptor (SCM_RIGHTS): how a request's
// socket travels to the fork server.
struct FdMessage {
  char byte = 'r';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
};

bool executable(const std::string& path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string nvrtc_worker_path() {
  if (const char* e = std::getenv("LT_NVRTC_WORKER")) {
    const std::string s = e;
    if (s.empty() || s == "0" || s == "off") return "";
    return executable(s) ? s : "";
  }
  Dl_info info{};
  if (!::dladdr(reinterpret_cast<void*>(&serve_nvrtc_request), &info) || !info.dli_fname) return "";
  const std::string lib = info.dli_fname;
  const size_t slash = lib.rfind('/');
  const std::string w =
      (slash == std::string::npos ? "." : lib.substr(0, slash)) + "/lazytensor-nvrtc";
  return executable(w) ? w : "";
}

namespace {

// The fork server: `lazytensor-nvrtc --server`, spawned once per process (and again when
// LT_NVRTC_WORKER names another file), holds a warm NVRTC and forks one child per request. Each
// request gets a socketpair; one end travels to the server over the control socket (SCM_RIGHTS)
// and becomes the child's. A failed server is not retried for the same path.
class ForkServer {
 public:
  ~ForkServer() { stop(); }

  // Starts the server for `path` unless it runs (or failed) already.
  void ensure(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    ensure_locked(path);
  }

  // A socket connected to a fresh worker child, or -1.
  int connect(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    ensure_locked(path);
    if (failed_) return -1;
    int rq[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rq) != 0) return -1;
    FdMessage m;
    cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &rq[1], sizeof(int));
    ssize_t sent;
    while ((sent = ::sendmsg(control_, &m.msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
    }
    ::close(rq[1]);
    if (sent != 1) {
      ::close(rq[0]);
      stop();
      failed_ = true;
      return -1;
    }
    return rq[0];
  }

 private:
  void ensure_locked(const std::string& path) {
    if (path == path_) return;
    stop();
    path_ = path;
    failed_ = !start();
  }

  bool start() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sv[1], 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    char* argv[] = {const_cast<char*>(path_.c_str()), const_cast<char*>("--server"), nullptr};
    const int spawned = ::posix_spawn(&pid_, path_.c_str(), &actions, nullptr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(sv[1]);
    if (spawned != 0) {
      ::close(sv[0]);
      pid_ = -1;
      return false;
    }
    control_ = sv[0];
    return true;
  }

  // Closing the control socket ends the server (children in flight finish on their own).
  void stop() {
    if (control_ >= 0) ::close(control_);
    control_ = -1;
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);  // a server that is not ours to trust (LT_NVRTC_WORKER) may not exit
      while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    pid_ = -1;
  }

  std::mutex mu_;
  std::string path_;
  bool failed_ = false;
  int control_ = -1;
  pid_t pid_ = -1;
};

ForkServer& fork_server() {
  static ForkServer* s = new ForkServer;  // never destroyed: compiles may run during exit
  return *s;
}

}  // namespace

void start_nvrtc_workers() {
  const std::string path = nvrtc_worker_path();
  if (!path.empty()) fork_server().ensure(path);
}

std::optional<std::vector<char>> nvrtc_compile_in_worker(const std::string& source,
                                                         const std::string& arch,
                                                         const std::string& name,
                                                         NvrtcEffort effort, bool cubin,
                                                         double* cpu_s) {
  const std::string path = nvrtc_worker_path();
  if (path.empty()) return std::nullopt;
  std::string request(kWireMagic, 8);
  request.push_back(cubin ? 1 : 0);
  request.push_back(effort == NvrtcEffort::FastCompile ? 1 : 0);
  put_field(request, arch);
  put_field(request, name);
  put_field(request, source);
  const int fd = fork_server().connect(path);
  if (fd < 0) return std::nullopt;
  std::string reply;
  const bool got = write_all(fd, request) && ::shutdown(fd, SHUT_WR) == 0 && read_all(fd, &reply);
  ::close(fd);
  if (!got) return std::nullopt;
  Reader r{reply};
  r.magic();
  const uint8_t what = r.u8(), kind = r.u8();
  const uint64_t cpu_us = r.u64();
  std::string payload = r.field();
  if (!r.done()) return std::nullopt;
  if (what == kCompileError && kind <= static_cast<uint8_t>(ErrorKind::NotImplemented))
    throw Error(static_cast<ErrorKind>(kind), payload);
  if (what != kImage || payload.empty()) return std::nullopt;
  if (cpu_s) *cpu_s = static_cast<double>(cpu_us) * 1e-6;
  return std::vector<char>(payload.begin(), payload.end());
}

std::vector<char> compile_module_image(const std::string& source, const std::string& target,
                                       const std::string& name, NvrtcEffort effort, bool cubin,
                                       bool use_worker, bool* in_worker, double* cpu_s) {
  std::optional<std::vector<char>> image;
  if (use_worker) image = nvrtc_compile_in_worker(source, target, name, effort, cubin, cpu_s);
  if (in_worker) *in_worker = image.has_value();
  if (!image) {
    const double c0 = thread_cpu_seconds();
    if (cubin) {
      image = nvrtc_compile_cubin(source, target, name, effort);
    } else {
      const std::string ptx = nvrtc_compile_ptx(source, target, name, effort);
      image.emplace(ptx.begin(), ptx.end());
    }
    if (cpu_s) *cpu_s = thread_cpu_seconds() - c0;
  }
  if (!cubin) image->push_back('\0');
  return std::move(*image);
}

int serve_nvrtc_request(int in, int out) {
  std::string request;
  if (!read_all(in, &request)) return 2;
  Reader r{request};
  r.magic();
  const uint8_t cubin = r.u8(), effort = r.u8();
  const std::string arch = r.field(), name = r.field(), source = r.field();
  if (!r.done() || cubin > 1 || effort > 1) return 2;
  std::string reply(kWireMagic, 8);
  auto cpu_us = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return static_cast<uint64_t>((u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000 +
                                 u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  };
  try {
    const NvrtcEffort e = effort ? NvrtcEffort::FastCompile : NvrtcEffort::Full;
    std::vector<char> image;
    if (cubin) {
      image = nvrtc_compile_cubin(source, arch, name, e);
    } else {
      const std::string ptx = nvrtc_compile_ptx(source, arch, name, e);
      image.assign(ptx.begin(), ptx.end());
    }
    reply.push_back(static_cast<char>(kImage));
    reply.push_back(0);
    put_u64(reply, cpu_us());
    put_field(reply, image.data(), image.size());
  } catch (const Error& err) {
    reply.push_back(static_cast<char>(kCompileError));
    reply.push_back(static_cast<char>(err.kind()));
    put_u64(reply, cpu_us());
    put_field(reply, err.what(), std::strlen(err.what()));
  }
  return write_all(out, reply) ? 0 : 3;
}

int run_nvrtc_server(int control) {
  ::signal(SIGCHLD, SIG_IGN);  // the kernel reaps the children
  // Load NVRTC and compile once here, so every child starts warm (a cold process spends ~30-40
  // ms of CPU more on its first program, and 16 of them at once far more).
  try {
    nvrtc_compile_ptx("extern \"C\" __global__ void lt_warm_up() {}\n");
  } catch (const Error&) {
  }
  for (;;) {
    FdMessage m;
    const ssize_t r = ::recvmsg(control, &m.msg, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;  // the library's process closed its end (or is gone)
    int fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
          c->cmsg_len == CMSG_LEN(sizeof(int)))
        std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    if (fd < 0) continue;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(control);
      ::_exit(serve_nvrtc_request(fd, fd));
    }
    ::close(fd);  // the child has it (or the fork failed: the client sees EOF and falls back)
  }
}

}  // namespace lt
