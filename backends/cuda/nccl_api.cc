#include "backends/cuda/nccl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <type_traits>
#include <vector>

namespace lt::nccl {

const Library& library() {
  static Library l;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char* e = std::getenv("LT_NCCL_LIBRARY"); e && *e) names.push_back(e);
    names.push_back("libnccl.so.2");
#ifdef LT_NCCL_DIR
    names.push_back(std::string(LT_NCCL_DIR) + "/libnccl.so.2");
#endif
    // RTLD_LOCAL: NCCL's symbols stay out of the global scope, where PyTorch's own copy of NCCL
    // (the same wheel, loaded by torch) may already be; each handle resolves its own.
    void* h = nullptr;
    std::string tried;
    for (const std::string& name : names) {
      if ((h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
      tried += (tried.empty() ? "" : ", ") + name;
    }
    if (!h) {
      l.error = "cannot load NCCL (tried " + tried +
                "; install PyTorch's nvidia-nccl wheel or set LT_NCCL_LIBRARY to libnccl.so.2)";
      return;
    }
    std::string missing;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    Api& a = l.api;
    sym(a.get_version, "ncclGetVersion");
    sym(a.get_unique_id, "ncclGetUniqueId");
    sym(a.comm_init_rank_config, "ncclCommInitRankConfig");
    sym(a.comm_get_async_error, "ncclCommGetAsyncError");
    sym(a.comm_abort, "ncclCommAbort");
    sym(a.comm_destroy, "ncclCommDestroy");
    sym(a.comm_finalize, "ncclCommFinalize");
    sym(a.get_error_string, "ncclGetErrorString");
    sym(a.get_last_error, "ncclGetLastError");
    sym(a.all_reduce, "ncclAllReduce");
    sym(a.broadcast, "ncclBroadcast");
    sym(a.all_gather, "ncclAllGather");
    sym(a.group_start, "ncclGroupStart");
    sym(a.group_end, "ncclGroupEnd");
    if (!missing.empty()) {
      l.error = "NCCL is too old (no " + missing + "; lazytensor needs NCCL 2.18 or later)";
      return;
    }
    if (a.get_version(&l.version) != kSuccess || l.version < 21800)
      l.error =
          "NCCL " + std::to_string(l.version) + " is too old (lazytensor needs 2.18 or later)";
  });
  return l;
}

}  // namespace lt::nccl
