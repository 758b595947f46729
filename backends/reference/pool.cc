// The interpreter's pool of large element vectors (see interp.h).
#include <list>
#include <mutex>

#include "backends/reference/interp.h"

namespace lt::ref {
namespace {

constexpr size_t kMinElements = 4096;  // smaller vectors are cheap to allocate
constexpr size_t kMaxPooledBytes = size_t{256} << 20;

template <class T>
class Pool {
 public:
  std::vector<T> take(size_t n) {
    if (n >= kMinElements) {
      std::lock_guard<std::mutex> g(mu_);
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->size() == n) {
          std::vector<T> v = std::move(*it);
          free_.erase(it);
          bytes_ -= n * sizeof(T);
          return v;
        }
    }
    return std::vector<T>(n);
  }

  void give(std::vector<T>& v) {
    const size_t b = v.size() * sizeof(T);
    if (v.size() < kMinElements || b > kMaxPooledBytes) return;
    std::lock_guard<std::mutex> g(mu_);
    free_.push_front(std::move(v));
    bytes_ += free_.front().size() * sizeof(T);
    while (bytes_ > kMaxPooledBytes) {
      bytes_ -= free_.back().size() * sizeof(T);
      free_.pop_back();
    }
  }

 private:
  std::mutex mu_;
  std::list<std::vector<T>> free_;  // most recently returned first
  size_t bytes_ = 0;
};

// Leaked on purpose: values may be destroyed during static destruction.
Pool<double>& doubles() {
  static auto* p = new Pool<double>;
  return *p;
}
Pool<int64_t>& ints() {
  static auto* p = new Pool<int64_t>;
  return *p;
}

}  // namespace

std::vector<double> take_doubles(size_t n) { return doubles().take(n); }
std::vector<int64_t> take_ints(size_t n) { return ints().take(n); }

Value::~Value() {
  doubles().give(f);
  ints().give(i);
}

}  // namespace lt::ref
