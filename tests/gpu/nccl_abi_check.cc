// Compiled (not run) by tests/gpu/run.sh where NCCL's header is installed (PyTorch's nvidia-nccl
// wheel): the declarations backends/cuda/nccl_api.h makes for the dlopen'ed NCCL must match the
// real ones, value for value and byte for byte, or the build of this file fails.
#include <nccl.h>

#include <cstddef>
#include <type_traits>

#include "backends/cuda/nccl_api.h"

namespace n = lt::nccl;

constexpr int I(int v) { return v; }  // enums of two types compare as ints

static_assert(I(ncclSuccess) == n::kSuccess && I(ncclInProgress) == n::kInProgress);
static_assert(I(ncclSum) == n::kSum && I(ncclMax) == n::kMax && I(ncclAvg) == n::kAvg);
static_assert(I(ncclInt8) == n::kInt8 && I(ncclInt32) == n::kInt32 && I(ncclInt64) == n::kInt64 &&
              I(ncclFloat16) == n::kFloat16 && I(ncclFloat32) == n::kFloat32 &&
              I(ncclFloat64) == n::kFloat64 && I(ncclBfloat16) == n::kBfloat16);
static_assert(NCCL_UNIQUE_ID_BYTES == n::kUniqueIdBytes &&
              sizeof(ncclUniqueId) == sizeof(n::UniqueId));
static_assert(NCCL_CONFIG_UNDEF_INT == n::kConfigUndefInt);
static_assert(NCCL_VERSION(2, 18, 0) == n::kConfigVersion);
static_assert(sizeof(ncclResult_t) == sizeof(n::Result) && sizeof(ncclRedOp_t) == sizeof(int) &&
              sizeof(ncclDataType_t) == sizeof(int));

// Our Config is the leading part of ncclConfig_t, field for field.
static_assert(sizeof(n::Config) <= sizeof(ncclConfig_t));
static_assert(offsetof(ncclConfig_t, size) == offsetof(n::Config, size) &&
              offsetof(ncclConfig_t, magic) == offsetof(n::Config, magic) &&
              offsetof(ncclConfig_t, version) == offsetof(n::Config, version) &&
              offsetof(ncclConfig_t, blocking) == offsetof(n::Config, blocking) &&
              offsetof(ncclConfig_t, cgaClusterSize) == offsetof(n::Config, cga_cluster_size) &&
              offsetof(ncclConfig_t, minCTAs) == offsetof(n::Config, min_ctas) &&
              offsetof(ncclConfig_t, maxCTAs) == offsetof(n::Config, max_ctas) &&
              offsetof(ncclConfig_t, netName) == offsetof(n::Config, net_name) &&
              offsetof(ncclConfig_t, splitShare) == offsetof(n::Config, split_share));

// The magic NCCL_CONFIG_INITIALIZER writes.
constexpr ncclConfig_t kInit = NCCL_CONFIG_INITIALIZER;
static_assert(kInit.magic == n::kConfigMagic);

// The entry points' types, parameter for parameter (enums and handles as the ints and pointers
// nccl_api.h declares).
static_assert(std::is_same_v<decltype(&ncclGetVersion), ncclResult_t (*)(int*)>);
static_assert(std::is_same_v<decltype(&ncclGetUniqueId), ncclResult_t (*)(ncclUniqueId*)>);
static_assert(std::is_same_v<decltype(&ncclCommInitRankConfig),
                             ncclResult_t (*)(ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*)>);
static_assert(
    std::is_same_v<decltype(&ncclCommGetAsyncError), ncclResult_t (*)(ncclComm_t, ncclResult_t*)>);
static_assert(std::is_same_v<decltype(&ncclCommAbort), ncclResult_t (*)(ncclComm_t)>);
static_assert(std::is_same_v<decltype(&ncclCommDestroy), ncclResult_t (*)(ncclComm_t)>);
static_assert(std::is_same_v<decltype(&ncclCommFinalize), ncclResult_t (*)(ncclComm_t)>);
static_assert(std::is_same_v<decltype(&ncclGetErrorString), const char* (*)(ncclResult_t)>);
static_assert(std::is_same_v<decltype(&ncclGetLastError), const char* (*)(ncclComm_t)>);
static_assert(std::is_same_v<decltype(&ncclAllReduce),
                             ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t,
                                              ncclRedOp_t, ncclComm_t, cudaStream_t)>);
static_assert(std::is_same_v<decltype(&ncclBroadcast),
                             ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, int,
                                              ncclComm_t, cudaStream_t)>);
static_assert(std::is_same_v<decltype(&ncclAllGather),
                             ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t,
                                              ncclComm_t, cudaStream_t)>);
static_assert(std::is_same_v<decltype(&ncclGroupStart), ncclResult_t (*)()>);
static_assert(std::is_same_v<decltype(&ncclGroupEnd), ncclResult_t (*)()>);
static_assert(sizeof(ncclComm_t) == sizeof(n::Comm) && sizeof(cudaStream_t) == sizeof(n::Stream));
