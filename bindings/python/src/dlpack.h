// The DLPack ABI (https://github.com/dmlc/dlpack), version 0.x: DLManagedTensor in a PyCapsule
// named "dltensor", the unversioned form that NumPy 2 and PyTorch 2 still produce and consume.
// Declared here rather than included so the build needs no dlpack package; the layout must match
// dlpack.h v0.6-0.8 exactly (these structs cross library boundaries by pointer).
#pragma once
#include <cstdint>

extern "C" {

enum DLDeviceType : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,  // pinned host memory: readable from the CPU like kDLCPU
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
};

struct DLDevice {
  DLDeviceType device_type;
  int32_t device_id;
};

enum DLDataTypeCode : uint8_t {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,  // DLPack 0.8 (NumPy 2 and PyTorch 2 take it; NumPy 1.24 and PyTorch 1.13 did not)
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

}  // extern "C"

static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4, "DLPack ABI layout");
static_assert(sizeof(DLTensor) == 48 && sizeof(DLManagedTensor) == 64,
              "DLPack ABI layout (64-bit)");

// The capsule names of the protocol: a fresh capsule, and one a consumer has taken ownership of.
inline constexpr const char* kDLTensorCapsule = "dltensor";
inline constexpr const char* kUsedDLTensorCapsule = "used_dltensor";
