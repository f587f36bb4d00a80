#pragma once
// The one error type of EPO's host code. Carries what went wrong, what kind of failure it is (which
// decides the exit code) and where it was raised.
#include <sstream>
#include <stdexcept>
#include <string>

namespace epo {

/// Failure classes; the numeric value is the `epo` exit code.
enum class ErrorKind { runtime = 1, input = 2, rejected = 3 };

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what, const char* file, int line)
      : std::runtime_error(what), kind_(kind), file_(file), line_(line) {}
  ErrorKind kind() const { return kind_; }
  const char* file() const { return file_; }
  int line() const { return line_; }
  /// Exit code for this failure (1 runtime, 2 bad input, 3 rejected by the rules).
  int exit_code() const { return static_cast<int>(kind_); }

 private:
  ErrorKind kind_;
  const char* file_;
  int line_;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

}  // namespace epo

/// A user mistake (bad flag, bad file, bad value): exit code 2.
#define EPO_INPUT_ERROR(...) \
  ::epo::Error(::epo::ErrorKind::input, ::epo::detail::concat(__VA_ARGS__), __FILE__, __LINE__)
/// A failure while running: exit code 1.
#define EPO_RUNTIME_ERROR(...) \
  ::epo::Error(::epo::ErrorKind::runtime, ::epo::detail::concat(__VA_ARGS__), __FILE__, __LINE__)
/// Throws an input error unless the condition holds.
#define EPO_REQUIRE_INPUT(cond, ...)          \
  do {                                        \
    if (!(cond)) throw EPO_INPUT_ERROR(__VA_ARGS__); \
  } while (0)
