// The safetensors file format (huggingface/safetensors), read and written without Python:
//
//   8 bytes   little-endian u64 N, the header's length
//   N bytes   UTF-8 JSON object: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b,
//   e]},
//             ..., "__metadata__": {"key": "value"}}, padded with spaces to a multiple of 8
//   the rest  the tensors' bytes, little-endian, row-major, at [b, e) from the data section's start
//
// Two layers. The format layer (lt::safetensors::parse / encode_header, safetensors.cc) works on
// bytes and depends only on ir/ and nlohmann_json, so the fuzz target (tests/fuzz) links it alone.
// The tensor layer (lt::save / lt::load, safetensors_io.cc) moves Tensors in and out of files.
// Every file read is validated completely; a bad one throws lt::Error (ValueError) naming the file,
// the entry and what is wrong, and nothing is read outside the bytes given.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"
#include "runtime/device.h"
#include "runtime/tensor.h"

namespace lt {
namespace safetensors {

// The format's names of the dtypes lazytensor has (F32, F64, F16, BF16, I64, I32, I8, U8, BOOL).
std::string_view format_dtype_name(DType t);
std::optional<DType> dtype_from_format_name(std::string_view name);  // nullopt: not one of ours

// One tensor of a file: its bytes are data[data_start + begin, data_start + end).
struct Entry {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct Header {
  std::vector<Entry> entries;                   // in the header's order
  std::map<std::string, std::string> metadata;  // "__metadata__" (string -> string)
  uint64_t data_start = 0;                      // 8 + N
};

// The format's own limit on N (a larger header is refused before anything is allocated).
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

// Validates `bytes` (a whole file) and returns its layout. `source` names the file in errors:
// "<source>: not a valid safetensors file: <why>". Checks: length field against the size, JSON
// syntax and UTF-8, an object at the top, no duplicate keys (at any level), entries with exactly
// dtype/shape/data_offsets, known dtypes, dims that are non-negative integers whose product times
// the element size neither overflows nor differs from end - begin, offsets in range, and spans that
// tile the data section exactly (sorted, no gap, no overlap, no trailing bytes).
Header parse(std::string_view bytes, const std::string& source);

// The first 8 + N bytes of a file holding `entries` (whose offsets the caller chose) and
// `metadata`: the length field and the space-padded JSON. Tensors are written in the given order.
// Throws lt::Error (ValueError) for a name that is not UTF-8, empty, or "__metadata__".
std::string encode_header(const std::vector<Entry>& entries,
                          const std::map<std::string, std::string>& metadata);

// The ordered file API that lt::save / lt::load wrap (Python uses it to keep dict order).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
void write_file(const NamedTensors& tensors, const std::string& path,
                const std::map<std::string, std::string>& metadata = {});
NamedTensors read_file(const std::string& path, const Device& device = kCPU,
                       std::map<std::string, std::string>* metadata = nullptr);

}  // namespace safetensors

// Writes `tensors` to `path` as a safetensors file (a sync point for pending tensors). Files open
// with any safetensors reader (Python's safetensors, PyTorch via it, the Rust crate).
void save(const std::map<std::string, Tensor>& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata = {});
// Reads a safetensors file into tensors on `device`; throws lt::Error (ValueError) for a malformed
// file and lt::Error (RuntimeError) when the file cannot be read.
std::map<std::string, Tensor> load(const std::string& path, const Device& device = kCPU);

}  // namespace lt
