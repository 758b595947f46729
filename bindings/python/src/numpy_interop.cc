// Host data in and out: NumPy arrays -> tensors (lt::from_host), tensors -> NumPy arrays, Python
// scalars and nested lists (Tensor::copy_to_host). Every read is a sync point with its reason.
#include <cstring>
#include <vector>

#include "bindings.h"
#include "external_buffer.h"
#include "ir/half.h"
#include "runtime/tensor_impl.h"

namespace lt::python {
namespace {

// Reads the whole tensor into host memory in its own dtype (a sync point for pending tensors).
std::vector<unsigned char> host_bytes(const Tensor& t, SyncReason reason) {
  std::vector<unsigned char> raw(static_cast<size_t>(t.numel()) * dtype_size(t.dtype()));
  PinSource pin;  // the sync's call site, read while the GIL is held
  py::gil_scoped_release nogil;
  t.copy_to_host(raw.data(), reason);
  return raw;
}

py::object scalar_object(const void* p, DType t) {
  if (is_bool(t)) return py::bool_(load_as_int(p, t) != 0);
  if (is_integral(t)) return py::int_(load_as_int(p, t));
  return py::float_(load_as_double(p, t));
}

py::object nested_list(const unsigned char* data, DType t, const Shape& shape, size_t dim) {
  size_t item = dtype_size(t);
  if (dim == shape.size()) return scalar_object(data, t);
  int64_t inner = 1;
  for (size_t k = dim + 1; k < shape.size(); ++k) inner *= shape[k];
  py::list out(static_cast<size_t>(shape[dim]));
  for (int64_t i = 0; i < shape[dim]; ++i)
    out[static_cast<size_t>(i)] =
        nested_list(data + static_cast<size_t>(i * inner) * item, t, shape, dim + 1);
  return out;
}

// A fresh C-contiguous NumPy array holding the tensor's values. bfloat16 has no NumPy dtype: it is
// refused (TypeError, like PyTorch) unless `upcast_bfloat16`, which gives float32 (for printing).
py::array to_numpy(const Tensor& t, SyncReason reason, bool upcast_bfloat16) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  if (t.dtype() == DType::BFloat16) {
    if (!upcast_bfloat16) throw py::type_error("Got unsupported ScalarType BFloat16");
    std::vector<unsigned char> raw = host_bytes(t, reason);
    py::array_t<float> out(shape);
    float* dst = out.mutable_data();
    for (int64_t i = 0; i < t.numel(); ++i) {
      uint16_t h;
      std::memcpy(&h, raw.data() + 2 * i, 2);
      dst[i] = bfloat16_to_float(h);
    }
    return out;
  }
  py::array out(numpy_dtype(t.dtype()), shape);
  void* dst = out.mutable_data();
  {
    PinSource pin;  // the sync's call site, read while the GIL is held
    py::gil_scoped_release nogil;
    t.copy_to_host(dst, reason);
  }
  return out;
}

py::object item(const Tensor& t, SyncReason reason) {
  if (t.numel() != 1)
    fail(ErrorKind::Runtime, "a Tensor with ", t.numel(),
         " elements cannot be converted to Scalar (shape ", shape_str(t.shape()), ")");
  alignas(8) unsigned char raw[8] = {};
  {
    PinSource pin;  // the sync's call site, read while the GIL is held
    py::gil_scoped_release nogil;
    t.copy_to_host(raw, reason);
  }
  return scalar_object(raw, t.dtype());
}

Tensor from_numpy(const py::array& arr, const Device& device) {
  // Contiguous and in native byte order first; the data is copied, never shared.
  py::array a = py::array::ensure(arr, py::array::c_style);
  if (!a) throw py::type_error("expected a NumPy array");
  char order = a.dtype().attr("byteorder").cast<std::string>()[0];
  if (order == '>' || order == '<') {
    bool native_little =
        py::module_::import("sys").attr("byteorder").cast<std::string>() == "little";
    if ((order == '<') != native_little) a = a.attr("astype")(a.dtype().attr("newbyteorder")("="));
  }
  DType t = dtype_from_numpy(a.dtype());
  Shape shape(a.shape(), a.shape() + a.ndim());
  return from_host(a.data(), t, std::move(shape), device);
}

constexpr int kNpyAligned = py::detail::npy_api::NPY_ARRAY_ALIGNED_;
constexpr int kNpyWriteable = py::detail::npy_api::NPY_ARRAY_WRITEABLE_;

// lt.from_numpy: a cpu tensor over the array's own memory (torch.from_numpy's semantics: a write
// through either is seen by the other) when the array is C-contiguous, element-aligned, in native
// byte order and of a supported dtype; otherwise a copy as from_numpy makes. The array stays alive
// while any tensor (or view handed out again) uses its memory; a read-only array stays read-only.
Tensor from_numpy_shared(const py::array& arr) {
  DType t = dtype_from_numpy(arr.dtype());  // TypeError for unsupported dtypes, as PyTorch
  char order = arr.dtype().attr("byteorder").cast<std::string>()[0];
  bool little = py::module_::import("sys").attr("byteorder").cast<std::string>() == "little";
  bool native = order == '=' || order == '|' || (order == '<') == little;
  size_t bytes = static_cast<size_t>(arr.nbytes());
  int flags = arr.flags();
  if (!native || !(flags & py::array::c_style) || !(flags & kNpyAligned) || bytes == 0)
    return from_numpy(arr, kCPU);
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  PyObject* owner = arr.inc_ref().ptr();  // dropped by the buffer's release, under the GIL
  auto s = std::make_shared<Storage>();
  s->backend = "cpu";
  s->buffer = std::make_shared<ExternalHostBuffer>(const_cast<void*>(arr.data()), bytes,
                                                   (flags & kNpyWriteable) != 0,
                                                   [owner] { Py_DECREF(owner); });
  return Tensor(make_data_tensor(std::move(s), t, std::move(shape), kCPU));
}

// Tensor.numpy(): for a cpu tensor, an array over the tensor's memory (writes are seen by the
// tensor and every tensor sharing that storage), keeping the storage alive; a copy for other
// devices (a lazy tensor's memory belongs to the runtime's graphs) and for bfloat16 (TypeError).
py::array numpy_view(const Tensor& t) {
  const std::shared_ptr<Storage>& s = t.impl()->storage;
  if (t.device().type != Device::Type::CPU || t.dtype() == DType::BFloat16 || t.is_pending() ||
      !s || !s->buffer->on_host() || t.numel() == 0)
    return to_numpy(t, SyncReason::Numpy, false);
  auto* keep = new std::shared_ptr<Storage>(s);
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array out(numpy_dtype(t.dtype()), shape, s->buffer->data(), base);
  auto* ext = dynamic_cast<const ExternalHostBuffer*>(s->buffer.get());
  if (ext && !ext->writable()) out.attr("setflags")(py::arg("write") = false);
  return out;
}

}  // namespace

DType dtype_from_numpy(const py::dtype& dt) {
  char kind = dt.kind();
  size_t size = static_cast<size_t>(dt.itemsize());
  if (kind == 'b') return DType::Bool;
  if (kind == 'u' && size == 1) return DType::UInt8;
  if (kind == 'i' && size == 1) return DType::Int8;
  if (kind == 'i' && size == 4) return DType::Int32;
  if (kind == 'i' && size == 8) return DType::Int64;
  if (kind == 'f' && size == 2) return DType::Float16;
  if (kind == 'f' && size == 4) return DType::Float32;
  if (kind == 'f' && size == 8) return DType::Float64;
  throw py::type_error(
      "can't convert np.ndarray of type " + dt.attr("name").cast<std::string>() +
      ". The only supported types are: float64, float32, float16, int64, int32, int8, uint8, "
      "and bool.");
}

py::dtype numpy_dtype(DType t) {
  switch (t) {
    case DType::Bool:
      return py::dtype::of<bool>();
    case DType::UInt8:
      return py::dtype::of<uint8_t>();
    case DType::Int8:
      return py::dtype::of<int8_t>();
    case DType::Int32:
      return py::dtype::of<int32_t>();
    case DType::Int64:
      return py::dtype::of<int64_t>();
    case DType::Float16:
      return py::dtype("float16");
    case DType::Float32:
      return py::dtype::of<float>();
    case DType::Float64:
      return py::dtype::of<double>();
    case DType::BFloat16:
      break;
  }
  throw py::type_error("Got unsupported ScalarType BFloat16");
}

void init_numpy(py::module_& m, py::class_<Tensor>& cls) {
  m.def("from_numpy", &from_numpy, py::arg("array"), py::arg("device"),
        "A tensor on `device` holding a copy of a NumPy array (bool, uint8, int8, int32, int64, "
        "float16, "
        "float32, float64).");
  m.def(
      "from_numpy_shared", &from_numpy_shared, py::arg("array"),
      "A cpu tensor sharing the array's memory when it is C-contiguous, aligned and in native byte "
      "order (else a copy).");
  m.def("numpy_dtype", &numpy_dtype, py::arg("dtype"));
  m.def(
      "dtype_from_numpy",
      [](const py::object& dt) { return dtype_from_numpy(py::dtype::from_args(dt)); },
      py::arg("numpy_dtype"));
  cls.def("_numpy", &to_numpy, py::arg("reason") = SyncReason::Numpy,
          py::arg("upcast_bfloat16") = false)
      .def("_numpy_view", &numpy_view, "numpy(): shares a cpu tensor's memory, copies otherwise")
      .def("_item", &item, py::arg("reason") = SyncReason::Item)
      .def("_tolist", [](const Tensor& t) {
        std::vector<unsigned char> raw = host_bytes(t, SyncReason::ToList);
        return nested_list(raw.data(), t.dtype(), t.shape(), 0);
      });
}

}  // namespace lt::python
