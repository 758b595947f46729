#include "runtime/cpp_source.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>
#include <unwind.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/node.h"

extern char** environ;

namespace lt {
namespace {

struct Range {
  uintptr_t lo, hi;
};

// The loaded segments of the object this file is linked into (liblazytensor.so): frames there are
// the library's, the first frame outside is the caller.
const std::vector<Range>& self_ranges() {
  static const std::vector<Range> ranges = [] {
    struct Search {
      uintptr_t probe;
      std::vector<Range> found;
    } s{reinterpret_cast<uintptr_t>(&self_ranges), {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) -> int {
          auto* s = static_cast<Search*>(data);
          std::vector<Range> segs;
          bool mine = false;
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const auto& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD) continue;
            uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
            segs.push_back({lo, hi});
            mine |= s->probe >= lo && s->probe < hi;
          }
          if (!mine) return 0;
          s->found = std::move(segs);
          return 1;
        },
        &s);
    return s.found;
  }();
  return ranges;
}

bool in_self(uintptr_t pc) {
  for (const Range& r : self_ranges())
    if (pc >= r.lo && pc < r.hi) return true;
  return false;
}

struct Walk {
  uintptr_t caller = 0;
  int depth = 0;
};

_Unwind_Reason_Code step(_Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<Walk*>(arg);
  uintptr_t pc = _Unwind_GetIP(ctx);
  if (pc == 0 || ++w->depth > 128) return _URC_END_OF_STACK;
  if (in_self(pc)) return _URC_NO_REASON;
  w->caller = pc;
  return _URC_END_OF_STACK;  // any reason other than NO_REASON ends the walk
}

// One `addr2line -e FILE` child per module, kept running and fed one address per line on its
// stdin (binutils flushes each answer): the module's debug information is read once, not once per
// call site. A socket pair rather than pipes, so a child that died makes send() fail instead of
// raising SIGPIPE in the user's process. Guarded by g_mu.
struct Addr2line {
  int fd = -1;
  bool failed = false;
  std::string pending;  // bytes read past the last answer
};

std::unordered_map<std::string, Addr2line>& addr2line_children() {
  static std::unordered_map<std::string, Addr2line> m;
  return m;
}

bool start(Addr2line& c, const std::string& file) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  std::string prog = "addr2line", e = "-e";
  std::vector<char*> argv = {prog.data(), e.data(), const_cast<char*>(file.c_str()), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);  // dup2 clears close-on-exec on 0 and 1
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "addr2line", &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    return false;
  }
  c.fd = sv[0];  // the child exits at EOF, when this process ends
  return true;
}

// The first line addr2line prints for `addr` in `file`, or "".
std::string addr2line(const std::string& file, uintptr_t addr) {
  Addr2line& c = addr2line_children()[file];
  if (c.failed || (c.fd < 0 && !start(c, file))) {
    c.failed = true;
    return "";
  }
  char hex[32];
  int n = std::snprintf(hex, sizeof hex, "0x%llx\n", static_cast<unsigned long long>(addr));
  if (send(c.fd, hex, static_cast<size_t>(n), MSG_NOSIGNAL) != n) {
    c.failed = true;
    return "";
  }
  size_t nl;
  while ((nl = c.pending.find('\n')) == std::string::npos) {
    char buf[512];
    ssize_t got = recv(c.fd, buf, sizeof buf, 0);
    if (got <= 0) {
      c.failed = true;
      return "";
    }
    c.pending.append(buf, static_cast<size_t>(got));
  }
  std::string out = c.pending.substr(0, nl);
  c.pending.erase(0, nl + 1);
  if (auto d = out.find(" (discriminator"); d != std::string::npos) out.resize(d);
  return out;
}

// "file.cc:41" for a return address, or "binary+0x1a2b" when there is no debug information.
std::string resolve(uintptr_t pc) {
  Dl_info info{};
  link_map* lm = nullptr;
  if (!dladdr1(reinterpret_cast<void*>(pc), &info, reinterpret_cast<void**>(&lm),
               RTLD_DL_LINKMAP) ||
      !lm)
    return "";
  std::string file = lm->l_name ? lm->l_name : "";
  if (file.empty()) {  // the program itself: its path (addr2line would read its own /proc/self/exe)
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    file = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "program";
  }
  const uintptr_t rel = pc - 1 - lm->l_addr;  // the call instruction, relative to the load bias
  std::string loc = addr2line(file, rel);
  const bool known = !loc.empty() && loc[0] != '?' && !loc.ends_with(":0") && !loc.ends_with(":?");
  if (known) return loc;
  char off[32];
  std::snprintf(off, sizeof off, "+0x%llx", static_cast<unsigned long long>(rel));
  return file.substr(file.rfind('/') + 1) + off;
}

std::mutex g_mu;  // guards g_sites; held while resolving a new call site
std::unordered_map<uintptr_t, int32_t>& sites() {
  static std::unordered_map<uintptr_t, int32_t> m;
  return m;
}
thread_local std::unordered_map<uintptr_t, int32_t> t_sites;  // lock-free repeat lookups

int32_t cpp_source_provider() {
  Walk w;
  _Unwind_Backtrace(step, &w);
  if (!w.caller) return -1;
  if (auto it = t_sites.find(w.caller); it != t_sites.end()) return it->second;
  int32_t id;
  {
    std::lock_guard<std::mutex> g(g_mu);
    auto it = sites().find(w.caller);
    if (it == sites().end()) {
      std::string loc = resolve(w.caller);
      it = sites().emplace(w.caller, loc.empty() ? -1 : intern_source(loc)).first;
    }
    id = it->second;
  }
  t_sites.emplace(w.caller, id);
  return id;
}

std::atomic<bool> g_on{false};

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

// On at load when debugging output is requested; off costs nothing (no provider).
const bool g_initialized = [] {
  if (env_on("LT_SOURCE_LOCATIONS") || env_on("LT_DUMP_DIR") || env_on("LT_DEBUG"))
    set_cpp_source_locations(true);
  return true;
}();

}  // namespace

void set_cpp_source_locations(bool on) {
  if (on == g_on.exchange(on)) return;
  set_source_provider(on ? &cpp_source_provider : nullptr);
}

bool cpp_source_locations() { return g_on.load(); }

}  // namespace lt
