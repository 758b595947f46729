// Little-endian fixed-width integers and length-prefixed strings in a string: the binary encoding
// shared by the on-disk compile cache's parts (the lowered plan, each backend's code, the entry
// around them). It lives in ir/ so every layer above can use it without reaching into lowering.
// Readers check every length they decode and throw lt::Error on anything that does not fit, so a
// damaged entry is an error, never a crash.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace lt {

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

}  // namespace lt
