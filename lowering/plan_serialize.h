// A compact binary form of a Plan (what an executable needs: buffers, kernels' loop IR, outputs,
// grouping; not the prim graph) for the on-disk compile cache, plus the byte reader/writer that
// backends use for their own part of a cache entry. Readers check every length, index and enum
// they decode and throw lt::Error on anything that does not fit, so a damaged entry is an error,
// never a crash or an out-of-range plan.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lowering/plan.h"

namespace lt {

// Little-endian fixed-width integers and length-prefixed strings appended to a string.
// Kernels whose loop IR is equal but for name and buffer ids compile to the same code (a stack of
// identical layers repeats its kernels), so backends compile one of each. first[c] is the first
// kernel with code c; code_of[i] is kernel i's code.
struct DistinctKernels {
  std::vector<size_t> first;
  std::vector<size_t> code_of;
};
DistinctKernels distinct_kernels(const std::vector<loop::Kernel>& kernels);

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v);
  void bytes(std::string_view s);  // u64 length, then the bytes
  void raw(std::string_view s) { out_.append(s); }
  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads what ByteWriter wrote; every read past the end throws lt::Error naming `what`.
class ByteReader {
 public:
  ByteReader(std::string_view data, const char* what) : data_(data), what_(what) {}
  uint8_t u8();
  uint32_t u32();
  uint64_t u64();
  int64_t i64() { return static_cast<int64_t>(u64()); }
  double f64();
  std::string_view bytes();
  std::string_view raw(size_t n);
  // A count of items that each take at least `min_item_bytes` of what remains (bounds allocations).
  size_t count(size_t min_item_bytes = 1);
  size_t remaining() const { return data_.size() - pos_; }
  bool done() const { return pos_ == data_.size(); }
  [[noreturn]] void bad(const std::string& why) const;

 private:
  void need(size_t n) const;
  std::string_view data_;
  size_t pos_ = 0;
  const char* what_;
};

std::string serialize_plan(const Plan& plan);
// The inverse of serialize_plan; the result's prims are empty. Throws lt::Error on bad bytes.
Plan deserialize_plan(std::string_view bytes);

}  // namespace lt
