#include "ir/bytes.h"

#include <cstring>

#include "ir/error.h"

namespace lt {

void ByteWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
}

void ByteWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
}

void ByteWriter::f64(double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  u64(u);
}

void ByteWriter::bytes(std::string_view s) {
  u64(s.size());
  out_.append(s);
}

void ByteReader::bad(const std::string& why) const {
  fail(ErrorKind::Value, what_, ": ", why, " (at byte ", pos_, " of ", data_.size(), ")");
}

void ByteReader::need(size_t n) const {
  if (n > data_.size() - pos_) bad("truncated");
}

uint8_t ByteReader::u8() {
  need(1);
  return static_cast<uint8_t>(data_[pos_++]);
}

uint32_t ByteReader::u32() {
  need(4);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<uint32_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
  pos_ += 4;
  return v;
}

uint64_t ByteReader::u64() {
  need(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
  pos_ += 8;
  return v;
}

double ByteReader::f64() {
  uint64_t u = u64();
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

std::string_view ByteReader::raw(size_t n) {
  need(n);
  std::string_view s = data_.substr(pos_, n);
  pos_ += n;
  return s;
}

std::string_view ByteReader::bytes() {
  uint64_t n = u64();
  if (n > remaining()) bad("truncated");
  return raw(static_cast<size_t>(n));
}

size_t ByteReader::count(size_t min_item_bytes) {
  uint64_t n = u64();
  if (min_item_bytes == 0) min_item_bytes = 1;
  if (n > remaining() / min_item_bytes) bad("count " + std::to_string(n) + " exceeds the data");
  return static_cast<size_t>(n);
}

}  // namespace lt
