/// @file
/// tapestry::Error and the checks that raise it.
///
/// Every misuse reachable from the public API throws tapestry::Error with a message that names the
/// op, the offending argument and the shapes / dtypes / devices involved, e.g.
///   add: shapes (2, 3) and (4,) cannot be broadcast together
/// `assert` is kept for internal invariants only.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tapestry {

/// One exception type for every error Tapestry reports. It derives from std::runtime_error rather
/// than splitting into invalid_argument / runtime_error: callers catch one type, and the message
/// carries the detail.
class Error : public std::runtime_error {
 public:
  /// `message` is the whole text, "<op>: <what went wrong>".
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

/// Throws Error("<op>: <parts...>").
template <class... Parts>
[[noreturn]] void fail(const std::string& op, const Parts&... parts) {
  throw Error(op + ": " + detail::concat(parts...));
}

}  // namespace tapestry

/// TP_CHECK(cond, op, parts...): throws Error("<op>: <parts...>") when cond is false.
#define TP_CHECK(cond, op, ...)                  \
  do {                                           \
    if (!(cond)) ::tapestry::fail(op, __VA_ARGS__); \
  } while (0)
