// 128-bit hashing for Merkle node hashes and graph keys (two independently seeded 64-bit lanes
// of a multiply-fold mix; collisions across 2^64 graphs are not a practical concern).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace lt {

struct Hash128 {
  uint64_t lo = 0, hi = 0;
  bool operator==(const Hash128& o) const { return lo == o.lo && hi == o.hi; }
  bool operator!=(const Hash128& o) const { return !(*this == o); }
  std::string hex() const;
};

inline uint64_t mix64(uint64_t a, uint64_t b) {
  __uint128_t m = static_cast<__uint128_t>(a ^ 0xa0761d6478bd642full) * (b ^ 0xe7037ed1a0b428dbull);
  return static_cast<uint64_t>(m) ^ static_cast<uint64_t>(m >> 64);
}

class Hasher {
 public:
  explicit Hasher(uint64_t seed = 0)
      : lo_(seed ^ 0x8ebc6af09c88c6e3ull), hi_(~seed ^ 0x589965cc75374cc3ull) {}
  Hasher& add(uint64_t v) {
    lo_ = mix64(lo_, v);
    hi_ = mix64(hi_ ^ 0x1d8e4e27c47d124full, v + 0x9e3779b97f4a7c15ull);
    return *this;
  }
  // A whole 128-bit hash in one step per lane (as wyhash folds 128 bits per multiply), not two:
  // node hashes fold in each operand's, on every traced op.
  Hasher& add(const Hash128& h) {
    const uint64_t lo = lo_;
    lo_ = mix64(lo ^ h.lo, h.hi ^ 0x8bb84b93962eacc9ull);
    hi_ = mix64(hi_ ^ h.hi, h.lo + lo + 0x4b33a62ed433d4a3ull);
    return *this;
  }
  Hasher& add_double(double d) {
    uint64_t u;
    std::memcpy(&u, &d, 8);
    return add(u);
  }
  Hash128 digest() const { return {mix64(lo_, hi_), mix64(hi_, lo_ + 0x2d358dccaa6c78a5ull)}; }

 private:
  uint64_t lo_, hi_;
};

struct Hash128Hasher {
  size_t operator()(const Hash128& h) const { return static_cast<size_t>(h.lo ^ (h.hi * 31)); }
};

}  // namespace lt
