// DLPack exchange (dlpack.h): Tensor.__dlpack__ / __dlpack_device__ export a tensor's host or
// CUDA memory to NumPy, PyTorch, CuPy, ... without a copy, and lt.from_dlpack imports theirs the
// same way.
//
// CUDA: an exported tensor's backend is synchronized first, so the data is complete whatever
// stream the consumer reads it on. An import asks the producer for its data in the order of the
// legacy default stream (__dlpack__(stream=1)); the cuda backend's stream is a blocking stream,
// so its later work waits for that. The imported memory becomes a CudaBuffer that the runtime
// reads but never recycles (Backend::wrap_external); before the producer's deleter runs, the
// backend is synchronized, so no queued kernel still reads memory the producer may reuse.
//
// Export: the capsule's DLManagedTensor holds a reference to the tensor's Storage, so the memory
// outlives the tensor for as long as the consumer needs it; the consumer renames the capsule
// "used_dltensor" and calls the deleter when done, and a capsule nobody consumed is freed by its
// destructor. A pending lazy tensor is synced first and its materialized buffer exported.
// Import: the producer's DLManagedTensor becomes the owner of an ExternalHostBuffer, whose
// release calls the producer's deleter (keeping the producer alive until then). lazytensor tensors
// are contiguous: a strided or misaligned producer is copied into a fresh tensor instead.
#include "dlpack.h"

#include <cstring>
#include <optional>
#include <vector>

#include "bindings.h"
#include "external_buffer.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"

namespace lt::python {
namespace {

std::optional<DLDataType> dl_dtype(DType t) {
  switch (t) {
    case DType::Bool:
      return DLDataType{kDLBool, 8, 1};
    case DType::UInt8:
      return DLDataType{kDLUInt, 8, 1};
    case DType::Int8:
      return DLDataType{kDLInt, 8, 1};
    case DType::Int32:
      return DLDataType{kDLInt, 32, 1};
    case DType::Int64:
      return DLDataType{kDLInt, 64, 1};
    case DType::Float16:
      return DLDataType{kDLFloat, 16, 1};
    case DType::BFloat16:
      return DLDataType{kDLBfloat, 16, 1};
    case DType::Float32:
      return DLDataType{kDLFloat, 32, 1};
    case DType::Float64:
      return DLDataType{kDLFloat, 64, 1};
  }
  return std::nullopt;
}

std::optional<DType> from_dl_dtype(DLDataType d) {
  if (d.lanes != 1) return std::nullopt;
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    std::optional<DLDataType> x = dl_dtype(t);
    if (x && x->code == d.code && x->bits == d.bits) return t;
  }
  return std::nullopt;
}

// (device_type, device_id) as __dlpack_device__ reports it: where the data lives (or will, for a
// pending lazy tensor), without syncing.
std::pair<int, int> dl_device(const Tensor& t) {
  Device d = t.device();
  if (backend_host_memory(d.backend_name())) return {kDLCPU, 0};
  return {kDLCUDA, d.index};
}

// The tensor's materialized host storage (a sync point for pending lazy tensors, reason "numpy").
std::shared_ptr<Storage> host_storage(const Tensor& t, const char* what) {
  if (!backend_host_memory(t.device().backend_name()))
    throw py::buffer_error(std::string(what) +
                           ": only host tensors can be shared; this one is on " + t.device().str() +
                           " (call .cpu() first)");
  if (t.is_pending()) {
    PinSource pin;  // the sync's call site, read while the GIL is held
    py::gil_scoped_release nogil;
    sync({t}, SyncReason::Numpy);
  }
  std::shared_ptr<Storage> s = t.impl()->storage;
  if (!s || !s->buffer || !s->buffer->on_host())
    throw py::buffer_error(std::string(what) + ": the tensor's data is not in host memory");
  return s;
}

// What an exported capsule owns: the storage, and the shape/strides arrays DLTensor points into.
struct ExportCtx {
  std::shared_ptr<Storage> storage;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  DLManagedTensor managed{};
};

void export_deleter(DLManagedTensor* m) { delete static_cast<ExportCtx*>(m->manager_ctx); }

// Frees a capsule that no consumer took (one that did renamed it "used_dltensor" and owns it now).
void capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kDLTensorCapsule)) return;
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kDLTensorCapsule));
  if (m && m->deleter) m->deleter(m);
  PyErr_Restore(type, value, trace);
}

// DLPack's name for the consumer's stream when it is CUDA's legacy default stream.
constexpr int64_t kLegacyDefaultStream = 1;

// The tensor's materialized CUDA storage (a sync point for pending lazy tensors), its data ready
// for work the consumer queues on `stream`. The CUDA backend queues on a blocking stream, which the
// legacy default stream's later work waits for by CUDA's rules: a consumer there (PyTorch's
// default, which passes 1) needs no wait, and the host stays ahead of the GPU. For any other
// stream, or none named, the backend's queued work is waited for.
std::shared_ptr<Storage> cuda_storage(const Tensor& t, const char* what,
                                      const py::object& stream = py::none()) {
  if (t.is_pending()) {
    PinSource pin;  // the sync's call site, read while the GIL is held
    py::gil_scoped_release nogil;
    sync({t}, SyncReason::Numpy);
  }
  std::shared_ptr<Storage> s = t.impl()->storage;
  if (!s || !s->buffer || s->buffer->on_host())
    throw py::buffer_error(std::string(what) + ": the tensor's data is not in device memory");
  if (!stream.is_none() && stream.cast<int64_t>() == kLegacyDefaultStream) return s;
  PinSource pin;  // the sync's call site, read while the GIL is held
  py::gil_scoped_release nogil;
  get_backend(s->backend).synchronize();
  return s;
}

py::object to_dlpack(const Tensor& t, const py::object& stream) {
  const bool host = backend_host_memory(t.device().backend_name());
  if (host && !stream.is_none())
    throw py::buffer_error("Tensor.__dlpack__: stream must be None for host tensors, got " +
                           py::repr(stream).cast<std::string>());
  if (!host && !stream.is_none() && !py::isinstance<py::int_>(stream))
    throw py::type_error("Tensor.__dlpack__: stream must be None or an int (a CUDA stream), got " +
                         py::repr(stream).cast<std::string>());
  std::optional<DLDataType> dt = dl_dtype(t.dtype());
  auto ctx = std::make_unique<ExportCtx>();
  ctx->storage =
      host ? host_storage(t, "Tensor.__dlpack__") : cuda_storage(t, "Tensor.__dlpack__", stream);
  if (auto* ext = dynamic_cast<const ExternalHostBuffer*>(ctx->storage->buffer.get());
      ext && !ext->writable())
    throw py::buffer_error(
        "Tensor.__dlpack__: the tensor shares a read-only NumPy array's memory, and DLPack "
        "cannot mark data read-only (use .clone() first)");
  ctx->shape.assign(t.shape().begin(), t.shape().end());
  ctx->strides.resize(ctx->shape.size());
  int64_t step = 1;
  for (size_t i = ctx->shape.size(); i-- > 0;) {
    ctx->strides[i] = step;
    step *= std::max<int64_t>(ctx->shape[i], 1);
  }
  DLTensor& d = ctx->managed.dl_tensor;
  d.data = ctx->storage->buffer->data();
  if (host) {
    d.device = {kDLCPU, 0};
  } else {
    auto [type, id] = dl_device(t);
    d.device = {static_cast<DLDeviceType>(type), id};
  }
  d.ndim = static_cast<int32_t>(ctx->shape.size());
  d.dtype = *dt;
  d.shape = ctx->shape.data();
  d.strides = ctx->strides.data();
  d.byte_offset = 0;
  ctx->managed.manager_ctx = ctx.get();
  ctx->managed.deleter = export_deleter;
  PyObject* capsule = PyCapsule_New(&ctx->managed, kDLTensorCapsule, capsule_destructor);
  if (!capsule) throw py::error_already_set();
  ctx.release();  // the capsule (or its consumer) owns it now
  return py::reinterpret_steal<py::object>(capsule);
}

// Calls the producer's deleter unless ownership moved on (to a buffer) first.
struct ManagedGuard {
  DLManagedTensor* m;
  ~ManagedGuard() {
    if (m && m->deleter) m->deleter(m);
  }
};

// Copies a strided (or misaligned) producer element by element into row-major order.
void gather(const char* base, const Shape& shape, const int64_t* strides, size_t item,
            unsigned char* out) {
  const int64_t n = numel(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += idx[d] * strides[d];
    std::memcpy(out + static_cast<size_t>(k) * item, base + off * static_cast<int64_t>(item), item);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// A CUDA producer's contiguous memory as a tensor on the cuda device, without a copy.
// Whether the DLTensor's strides (absent: row-major) lay out `shape` row-major.
bool row_major(const DLTensor& d, const Shape& shape) {
  if (!d.strides) return true;
  int64_t step = 1;
  for (int32_t i = d.ndim; i-- > 0;) {
    if (shape[i] != 1 && d.strides[i] != step) return false;
    step *= shape[i];
  }
  return true;
}

Tensor from_cuda_dlpack(DLManagedTensor* m, ManagedGuard& guard, DType t, Shape shape,
                        size_t bytes) {
  const DLTensor& d = m->dl_tensor;
  const int ordinal = d.device.device_id;
  if (ordinal < 0 || !backend_available(cuda_backend_name(ordinal)))
    throw py::buffer_error("lt.from_dlpack: the data is on CUDA device " + std::to_string(ordinal) +
                           ", which lazytensor does not see");
  if (!row_major(d, shape))
    throw py::buffer_error("lt.from_dlpack: a strided CUDA tensor of shape " + shape_str(shape) +
                           " cannot be shared; call .contiguous() on it first");
  char* data = static_cast<char*>(d.data) + d.byte_offset;
  if (reinterpret_cast<uintptr_t>(data) % dtype_size(t) != 0)
    throw py::buffer_error("lt.from_dlpack: misaligned CUDA data; call .clone() on it first");
  const std::string name = cuda_backend_name(ordinal);
  Backend& cuda = get_backend(name);  // a clear error without that CUDA device
  BufferPtr buf = cuda.wrap_external(data, bytes, [m, &cuda] {
    release_with_gil([m, &cuda] {
      try {
        cuda.synchronize();  // queued kernels may still read the producer's memory
      } catch (...) {
      }
      if (m->deleter) m->deleter(m);
    });
  });
  if (!buf) throw py::buffer_error("lt.from_dlpack: the cuda backend cannot hold foreign memory");
  guard.m = nullptr;  // the buffer releases the producer now
  auto s = std::make_shared<Storage>();
  s->backend = name;
  s->buffer = std::move(buf);
  return Tensor(make_data_tensor(std::move(s), t, std::move(shape), Device::cuda(ordinal)));
}

Tensor from_dlpack(const py::object& obj) {
  py::object capsule;
  if (py::hasattr(obj, "__dlpack__")) {
    int type = kDLCPU;
    if (py::hasattr(obj, "__dlpack_device__")) {
      py::tuple dev = obj.attr("__dlpack_device__")();
      type = dev[0].cast<int>();
      if (type != kDLCPU && type != kDLCUDAHost && type != kDLCUDA)
        throw py::buffer_error("lt.from_dlpack: the producer's data is on DLPack device type " +
                               std::to_string(type) +
                               "; only host (cpu) and CUDA data can be shared");
      if (type == kDLCUDA && !backend_available("cuda"))
        throw py::buffer_error(
            "lt.from_dlpack: the producer's data is on a CUDA device (DLPack device type 2), "
            "and lazytensor sees no CUDA device here");
    }
    // CUDA: the producer orders its data before the legacy default stream's later work (1).
    capsule =
        type == kDLCUDA ? obj.attr("__dlpack__")(py::arg("stream") = 1) : obj.attr("__dlpack__")();
  } else if (PyCapsule_CheckExact(obj.ptr())) {
    capsule = obj;
  } else {
    throw py::type_error(
        "lt.from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got " +
        std::string(Py_TYPE(obj.ptr())->tp_name));
  }
  if (!PyCapsule_IsValid(capsule.ptr(), kDLTensorCapsule)) {
    const char* name = PyCapsule_GetName(capsule.ptr());
    PyErr_Clear();
    if (name && std::strcmp(name, kUsedDLTensorCapsule) == 0)
      throw py::value_error("lt.from_dlpack: this DLPack capsule was already consumed");
    throw py::type_error(std::string("lt.from_dlpack: not a DLPack capsule (named '") +
                         (name ? name : "") + "')");
  }
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kDLTensorCapsule));
  if (!m) throw py::error_already_set();
  // Ours from here: renamed first, so neither the capsule's destructor nor a second import frees
  // it.
  if (PyCapsule_SetName(capsule.ptr(), kUsedDLTensorCapsule) != 0) throw py::error_already_set();
  ManagedGuard guard{m};

  const DLTensor& d = m->dl_tensor;
  const bool on_cuda = d.device.device_type == kDLCUDA;
  if (d.device.device_type != kDLCPU && d.device.device_type != kDLCUDAHost && !on_cuda)
    throw py::buffer_error("lt.from_dlpack: DLPack device type " +
                           std::to_string(d.device.device_type) +
                           " is neither host nor CUDA memory");
  std::optional<DType> t = from_dl_dtype(d.dtype);
  if (!t)
    throw py::buffer_error(
        "lt.from_dlpack: unsupported DLPack dtype (code " + std::to_string(d.dtype.code) + ", " +
        std::to_string(d.dtype.bits) + " bits, " + std::to_string(d.dtype.lanes) +
        " lanes); lazytensor has bool, uint8, int8, int32, int64, float16, bfloat16, "
        "float32 and float64");
  if (d.ndim < 0 || (d.ndim > 0 && !d.shape))
    throw py::value_error("lt.from_dlpack: malformed DLTensor (ndim " + std::to_string(d.ndim) +
                          ")");
  Shape shape(d.shape, d.shape + d.ndim);
  int64_t count = 1;
  for (int64_t s : shape)
    if (s < 0 || __builtin_mul_overflow(count, s, &count))
      throw py::value_error("lt.from_dlpack: malformed DLTensor shape " + shape_str(shape));
  const size_t item = dtype_size(*t);
  const size_t bytes = static_cast<size_t>(count) * item;
  const char* data = static_cast<const char*>(d.data) + d.byte_offset;
  if (bytes == 0)
    return from_host(nullptr, *t, std::move(shape),
                     on_cuda ? Device::cuda(d.device.device_id) : kCPU);
  if (on_cuda) return from_cuda_dlpack(m, guard, *t, std::move(shape), bytes);

  if (!row_major(d, shape) || reinterpret_cast<uintptr_t>(data) % item != 0) {
    std::vector<unsigned char> packed(bytes);
    if (d.strides) {
      gather(data, shape, d.strides, item, packed.data());
    } else {
      std::memcpy(packed.data(), data, bytes);
    }
    return from_host(packed.data(), *t, std::move(shape), kCPU);
  }
  auto s = std::make_shared<Storage>();
  s->backend = "cpu";
  s->buffer = std::make_shared<ExternalHostBuffer>(const_cast<char*>(data), bytes, true, [m] {
    if (m->deleter) m->deleter(m);
  });
  guard.m = nullptr;  // the buffer releases the producer now
  return Tensor(make_data_tensor(std::move(s), *t, std::move(shape), kCPU));
}

}  // namespace

void init_dlpack(py::module_& m) {
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  cls.def("__dlpack__", &to_dlpack, py::arg("stream") = py::none(),
          "A DLPack capsule sharing this tensor's host or CUDA memory (a pending lazy tensor is "
          "synced "
          "first).")
      .def(
          "__dlpack_device__", [](const Tensor& t) { return dl_device(t); },
          "(DLPack device type, index): (1, 0) for host memory, (2, N) for cuda:N.")
      .def(
          "data_ptr",
          [](const Tensor& t) -> uintptr_t {
            if (t.is_pending()) {
              PinSource pin;  // the sync's call site, read while the GIL is held
              py::gil_scoped_release nogil;
              sync({t}, SyncReason::Numpy);
            }
            return reinterpret_cast<uintptr_t>(t.impl()->storage->buffer->data());
          },
          "Address of the first element (a sync point for pending lazy tensors). An in-place "
          "operation gives the tensor new memory, so the address can change.");
  m.def(
      "from_dlpack", &from_dlpack, py::arg("ext_tensor"),
      "A cpu tensor sharing the host memory of a DLPack producer (an object with __dlpack__, or a "
      "capsule); strided or misaligned data is copied, as lazytensor tensors are contiguous.");
}

}  // namespace lt::python
