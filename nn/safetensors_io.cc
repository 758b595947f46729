// The tensor layer of safetensors (nn/safetensors.h): lt::save / lt::load and the ordered
// write_file / read_file that they and Python's lt.save / lt.load use.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "ir/error.h"
#include "nn/safetensors.h"
#include "runtime/ops.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"

namespace lt::safetensors {
namespace {

// The format is little-endian and tensors are copied byte for byte.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// The whole file in memory. Read rather than mapped: a file truncated while mapped would fault
// (SIGBUS) on access, and tensors are copied out of it once anyway.
std::string read_whole(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorKind::Runtime, "lt.load: cannot open ", path, ": ", std::strerror(errno));
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* p) { ::close(*p); });
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    fail(ErrorKind::Runtime, "lt.load: cannot stat ", path, ": ", std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(ErrorKind::Runtime, "lt.load: ", path, " is not a regular file");
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(ErrorKind::Runtime, "lt.load: cannot read ", path, ": ", std::strerror(errno));
    if (n == 0) break;
    data.append(chunk, static_cast<size_t>(n));
  }
  return data;
}

void write_all(std::FILE* f, const void* p, size_t n, const std::string& path) {
  if (n && std::fwrite(p, 1, n, f) != n)
    fail(ErrorKind::Runtime, "lt.save: cannot write ", path, ": ", std::strerror(errno));
}

}  // namespace

void write_file(const NamedTensors& tensors, const std::string& path,
                const std::map<std::string, std::string>& metadata) {
  std::vector<Entry> entries;
  std::vector<Tensor> pending;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) fail(ErrorKind::Value, "lt.save: tensor ", name, " is undefined");
    Entry e;
    e.name = name;
    e.dtype = t.dtype();
    e.shape = t.shape();
    e.begin = offset;
    offset += static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    e.end = offset;
    entries.push_back(std::move(e));
    if (t.is_pending()) pending.push_back(t);
  }
  std::string header = encode_header(entries, metadata);  // refuses bad names before the file opens
  if (!pending.empty()) sync(pending, SyncReason::ToCpu);  // one graph for every pending tensor

  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "wb"));
  if (!f)
    fail(ErrorKind::Runtime, "lt.save: cannot open ", path, " for writing: ", std::strerror(errno));
  write_all(f.get(), header.data(), header.size(), path);
  std::vector<unsigned char> staging;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    size_t bytes = static_cast<size_t>(entries[i].end - entries[i].begin);
    const Storage* s = t.impl()->storage.get();
    if (bytes && s && s->buffer->on_host()) {  // host data goes straight from its buffer
      write_all(f.get(), s->buffer->data(), bytes, path);
    } else if (bytes) {
      staging.resize(bytes);
      t.copy_to_host(staging.data(), SyncReason::ToCpu);
      write_all(f.get(), staging.data(), bytes, path);
    }
  }
  if (std::fflush(f.get()) != 0)
    fail(ErrorKind::Runtime, "lt.save: cannot write ", path, ": ", std::strerror(errno));
}

NamedTensors read_file(const std::string& path, const Device& device,
                       std::map<std::string, std::string>* metadata) {
  const std::string file = read_whole(path);
  Header h = parse(file, "lt.load: " + path);
  NamedTensors out;
  out.reserve(h.entries.size());
  std::vector<unsigned char> bools;
  for (const Entry& e : h.entries) {
    const char* src = file.data() + h.data_start + e.begin;
    if (e.dtype == DType::Bool) {  // any nonzero byte is true; the runtime's bools are 0 or 1
      bools.assign(src, src + (e.end - e.begin));
      for (unsigned char& b : bools) b = b != 0;
      src = reinterpret_cast<const char*>(bools.data());
    }
    out.emplace_back(e.name, from_host(src, e.dtype, e.shape, device));
  }
  if (metadata) *metadata = std::move(h.metadata);
  return out;
}

}  // namespace lt::safetensors

namespace lt {

void save(const std::map<std::string, Tensor>& tensors, const std::string& path,
          const std::map<std::string, std::string>& metadata) {
  safetensors::write_file(safetensors::NamedTensors(tensors.begin(), tensors.end()), path,
                          metadata);
}

std::map<std::string, Tensor> load(const std::string& path, const Device& device) {
  safetensors::NamedTensors v = safetensors::read_file(path, device);
  return std::map<std::string, Tensor>(std::make_move_iterator(v.begin()),
                                       std::make_move_iterator(v.end()));
}

}  // namespace lt
