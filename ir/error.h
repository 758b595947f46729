// lt::Error: the one exception type of the library. `kind` lets the Python layer map it to the
// exception PyTorch would raise (ValueError, TypeError, IndexError, RuntimeError).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace lt {

enum class ErrorKind { Runtime, Value, Type, Index, NotImplemented };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& msg) : std::runtime_error(msg), kind_(kind) {}
  explicit Error(const std::string& msg) : Error(ErrorKind::Runtime, msg) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
inline void append(std::ostringstream&) {}
template <typename T, typename... R>
void append(std::ostringstream& os, const T& v, const R&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

template <typename... A>
[[noreturn]] void fail(ErrorKind kind, const A&... parts) {
  std::ostringstream os;
  detail::append(os, parts...);
  throw Error(kind, os.str());
}

}  // namespace lt

#define LT_CHECK(cond, kind, ...)               \
  do {                                          \
    if (!(cond)) ::lt::fail(kind, __VA_ARGS__); \
  } while (0)
