// The safetensors format layer: bytes in, a validated layout out (and the header of a file to
// write). Depends only on ir/ and nlohmann_json, so tests/fuzz/safetensors_fuzz.cc links this file
// and ir/ alone; the Tensor side is safetensors_io.cc.
#include "nn/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "ir/error.h"

namespace lt::safetensors {
namespace {

using Json = nlohmann::ordered_json;  // keeps the file's order of tensors

constexpr const char* kMetadataKey = "__metadata__";

struct Name {
  DType type;
  const char* name;
};
constexpr Name kNames[] = {
    {DType::Float32, "F32"},   {DType::Float64, "F64"}, {DType::Float16, "F16"},
    {DType::BFloat16, "BF16"}, {DType::Int64, "I64"},   {DType::Int32, "I32"},
    {DType::Int8, "I8"},       {DType::UInt8, "U8"},    {DType::Bool, "BOOL"}};

// Every complaint about a file starts the same way, so callers (and Python's tests) can tell a
// malformed file from other failures.
template <typename... A>
[[noreturn]] void bad(const std::string& source, const A&... why) {
  fail(ErrorKind::Value, source, ": not a valid safetensors file: ", why...);
}

// A JSON value as ASCII text for an error message, cut short: a key or a shape can be megabytes.
std::string json_text(const Json& v) {
  std::string q = v.dump(-1, ' ', true, Json::error_handler_t::replace);
  return q.size() > 80 ? q.substr(0, 76) + "..." + q.back() : q;
}
std::string quoted(const std::string& s) { return json_text(Json(s)); }

// nlohmann's message quotes the bytes it read, which need not be UTF-8: escaped, they can travel
// into a Python exception.
std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// A JSON integer in [0, max] as uint64; nullopt for anything else (floats, bools, negatives).
std::optional<uint64_t> non_negative(const Json& v, uint64_t max) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u <= max) return u;
  } else if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i >= 0 && static_cast<uint64_t>(i) <= max) return static_cast<uint64_t>(i);
  }
  return std::nullopt;
}

// The header parsed with duplicate keys refused at every level: nlohmann would keep one of them
// silently, and two readers of the same file could then disagree about its contents.
Json parse_json(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> open_objects;
  auto on_event = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second)
          bad(source, "duplicate key ", quoted(parsed.get<std::string>()), " in the header");
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), on_event);
  } catch (const Json::exception& e) {
    bad(source, "the header is not JSON (", printable(e.what()), ")");
  }
}

Entry parse_entry(const std::string& name, const Json& info, uint64_t data_bytes,
                  const std::string& source) {
  const std::string where = "entry " + quoted(name);
  if (name.empty()) bad(source, "an entry has an empty name");
  if (!info.is_object() || info.size() != 3 || !info.contains("dtype") || !info.contains("shape") ||
      !info.contains("data_offsets"))
    bad(source, where, " must be an object with exactly dtype, shape and data_offsets");
  Entry e;
  e.name = name;
  const Json& dt = info["dtype"];
  std::optional<DType> t =
      dt.is_string() ? dtype_from_format_name(dt.get<std::string>()) : std::nullopt;
  if (!t) bad(source, where, " has unsupported dtype ", json_text(dt));
  e.dtype = *t;

  const Json& shape = info["shape"];
  if (!shape.is_array()) bad(source, where, " has a shape that is not a list");
  // The element count is checked for overflow in the order lt::numel multiplies, so no prefix
  // of the product overflows either.
  int64_t count = 1;
  for (const Json& d : shape) {
    std::optional<uint64_t> v =
        non_negative(d, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
    if (!v)
      bad(source, where, " has an invalid dimension ", json_text(d), " (dims are integers >= 0)");
    e.shape.push_back(static_cast<int64_t>(*v));
    if (__builtin_mul_overflow(count, static_cast<int64_t>(*v), &count))
      bad(source, where, " has shape ", json_text(shape), " whose element count overflows");
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(count), dtype_size(e.dtype), &bytes))
    bad(source, where, " has shape ", json_text(shape), " whose byte count overflows");

  const Json& offs = info["data_offsets"];
  std::optional<uint64_t> b, end;
  if (offs.is_array() && offs.size() == 2) {
    b = non_negative(offs[0], data_bytes);
    end = non_negative(offs[1], data_bytes);
  }
  if (!b || !end || *b > *end)
    bad(source, where, " has data_offsets ", json_text(offs), " outside the ", data_bytes,
        "-byte data section");
  if (*end - *b != bytes)
    bad(source, where, ": shape ", json_text(shape), " of ", format_dtype_name(e.dtype), " needs ",
        bytes, " bytes, data_offsets give ", *end - *b);
  e.begin = *b;
  e.end = *end;
  return e;
}

}  // namespace

std::string_view format_dtype_name(DType t) {
  for (const Name& n : kNames)
    if (n.type == t) return n.name;
  fail(ErrorKind::Type, "safetensors: no format name for dtype ", dtype_name(t));
}

std::optional<DType> dtype_from_format_name(std::string_view name) {
  for (const Name& n : kNames)
    if (name == n.name) return n.type;
  return std::nullopt;
}

Header parse(std::string_view bytes, const std::string& source) {
  if (bytes.size() < 8) bad(source, bytes.size(), " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8)
    bad(source, "header length ", n, " exceeds the file (", bytes.size(), " bytes)");
  Json header = parse_json(bytes.substr(8, n), source);
  if (!header.is_object()) bad(source, "the header is not a JSON object");

  Header h;
  h.data_start = 8 + n;
  const uint64_t data_bytes = bytes.size() - h.data_start;
  for (const auto& [name, info] : header.items()) {
    if (name == kMetadataKey) {
      if (!info.is_object()) bad(source, "__metadata__ is not an object");
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) bad(source, "__metadata__ value of ", quoted(k), " is not a string");
        h.metadata.emplace(k, v.get<std::string>());
      }
      continue;
    }
    h.entries.push_back(parse_entry(name, info, data_bytes, source));
  }

  // The spans must tile the data section: sorted by (begin, end), each starts where the last ended.
  std::vector<const Entry*> spans;
  for (const Entry& e : h.entries) spans.push_back(&e);
  std::sort(spans.begin(), spans.end(), [](const Entry* a, const Entry* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  uint64_t end = 0;
  for (const Entry* e : spans) {
    if (e->begin != end)
      bad(source, "entry ", quoted(e->name), " starts at ", e->begin, ", expected ", end,
          e->begin < end ? " (it overlaps another tensor)" : " (a gap between tensors)");
    end = e->end;
  }
  if (end != data_bytes) bad(source, data_bytes - end, " bytes after the last tensor");
  return h;
}

std::string encode_header(const std::vector<Entry>& entries,
                          const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  for (const Entry& e : entries) {
    if (e.name.empty() || e.name == kMetadataKey)
      fail(ErrorKind::Value, "safetensors: a tensor cannot be named ", quoted(e.name));
    if (header.contains(e.name))
      fail(ErrorKind::Value, "safetensors: two tensors named ", quoted(e.name));
    header[e.name] = {{"dtype", format_dtype_name(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {e.begin, e.end}}};
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception&) {  // a name or metadata string that is not UTF-8
    fail(ErrorKind::Value, "safetensors: tensor names and metadata must be valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text;
}

}  // namespace lt::safetensors
