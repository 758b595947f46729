// The part of NCCL's API (nccl.h, NCCL 2.18 and later) that backends/cuda/nccl_communicator.cc
// calls, declared here because NCCL is loaded with dlopen and its header is not on the build
// machines (it ships with PyTorch on the GPU machine, in the nvidia-nccl wheel). The values, the
// unique id's size and the leading fields of ncclConfig_t are NCCL's ABI; NCCL reads a config by
// its `size` and `version` fields, so a caller that declares only the leading fields (as of
// version 2.18.0) gets the library's defaults for the rest. tests/gpu/nccl_abi_check.cc compares
// all of it with the real header on the GPU machine.
#pragma once
#include <cstddef>
#include <string>

namespace lt::nccl {

using Comm = struct CommStruct*;  // ncclComm_t
using Result = int;               // ncclResult_t
using Stream = void*;             // cudaStream_t, the same handle as the driver's CUstream

enum : Result { kSuccess = 0, kInProgress = 7 };
enum RedOp : int { kSum = 0, kMax = 2, kAvg = 4 };
enum DataType : int {
  kInt8 = 0,
  kInt32 = 2,
  kInt64 = 4,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9
};

inline constexpr size_t kUniqueIdBytes = 128;
struct UniqueId {
  char internal[kUniqueIdBytes];
};

// NCCL_CONFIG_INITIALIZER's magic, and the version whose fields this struct holds.
inline constexpr unsigned kConfigMagic = 0xcafebeef;
inline constexpr unsigned kConfigVersion = 21800;        // NCCL_VERSION(2, 18, 0)
inline constexpr int kConfigUndefInt = -2147483647 - 1;  // NCCL_CONFIG_UNDEF_INT (INT_MIN)

// ncclConfig_t up to splitShare (NCCL 2.18); every int field starts "undefined" (the library's
// default) as NCCL_CONFIG_INITIALIZER leaves it.
struct Config {
  size_t size = sizeof(Config);
  unsigned magic = kConfigMagic;
  unsigned version = kConfigVersion;
  int blocking = kConfigUndefInt;
  int cga_cluster_size = kConfigUndefInt;
  int min_ctas = kConfigUndefInt;
  int max_ctas = kConfigUndefInt;
  const char* net_name = nullptr;
  int split_share = kConfigUndefInt;
};

// The entry points, as dlsym finds them (C linkage; NCCL's names in the loader, nccl_api.cc).
struct Api {
  Result (*get_version)(int*);
  Result (*get_unique_id)(UniqueId*);
  Result (*comm_init_rank_config)(Comm*, int nranks, UniqueId id, int rank, Config*);
  Result (*comm_get_async_error)(Comm, Result*);
  Result (*comm_abort)(Comm);
  Result (*comm_destroy)(Comm);
  Result (*comm_finalize)(Comm);
  const char* (*get_error_string)(Result);
  const char* (*get_last_error)(Comm);
  Result (*all_reduce)(const void* send, void* recv, size_t count, int dtype, int op, Comm, Stream);
  Result (*broadcast)(const void* send, void* recv, size_t count, int dtype, int root, Comm,
                      Stream);
  Result (*all_gather)(const void* send, void* recv, size_t send_count, int dtype, Comm, Stream);
  Result (*group_start)();  // the calls between these two run as one (ncclGroupStart/End)
  Result (*group_end)();
};

struct Library {
  Api api{};
  int version = 0;    // ncclGetVersion's, e.g. 22703
  std::string error;  // why NCCL could not be loaded (api unusable then)
  bool ok() const { return error.empty(); }
};

// The process's NCCL, loaded on first use (thread-safe, never throws): LT_NCCL_LIBRARY, then
// libnccl.so.2 on the loader's path, then the nvidia-nccl wheel of the Python that configured the
// build (LT_NCCL_DIR).
const Library& library();

}  // namespace lt::nccl
