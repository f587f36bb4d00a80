#include "model/json_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "model/config_io.hpp"
#include "model/error.hpp"

namespace epo::model {

namespace {

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

/// Closes a descriptor on every path out.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string read_input_file(const std::string& path) {
  EPO_REQUIRE_INPUT(!path.empty(), "an input file name is empty (allowed: a path to a file)");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw EPO_INPUT_ERROR(path, ": cannot open file (", std::strerror(errno), ")");
  if (!S_ISREG(st.st_mode))
    throw EPO_INPUT_ERROR(path, ": is ", file_kind(st.st_mode),
                          " (allowed: a regular JSON file)");
  if (static_cast<unsigned long long>(st.st_size) > kMaxInputFileBytes)
    throw EPO_INPUT_ERROR(path, ": ", st.st_size, " bytes is too large (allowed: up to ",
                          kMaxInputFileBytes, " bytes)");
  Fd f;
  // O_NONBLOCK: a file swapped for a FIFO between stat and open does not block the open.
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd < 0) throw EPO_INPUT_ERROR(path, ": cannot open file (", std::strerror(errno), ")");
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw EPO_INPUT_ERROR(path, ": is ", file_kind(st.st_mode), " (allowed: a regular JSON file)");
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw EPO_INPUT_ERROR(path, ": cannot read file (", std::strerror(errno), ")");
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
    if (text.size() > kMaxInputFileBytes)
      throw EPO_INPUT_ERROR(path, ": more than ", kMaxInputFileBytes,
                            " bytes (allowed: up to ", kMaxInputFileBytes, " bytes)");
  }
  return text;
}

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
  const auto nul = text.find('\0');
  if (nul != std::string::npos)
    throw EPO_INPUT_ERROR(where, ": holds a NUL byte at offset ", nul,
                          " (allowed: JSON text without NUL bytes)");
  // Depth and duplicate keys are checked while parsing, before any value is built deeper than
  // kMaxJsonDepth (formatting or destroying a deeply nested value recurses).
  std::vector<std::set<std::string>> keys;
  using Event = nlohmann::json::parse_event_t;
  auto check = [&](int depth, Event ev, nlohmann::json& parsed) {
    switch (ev) {
      case Event::object_start:
      case Event::array_start:
        if (depth >= kMaxJsonDepth)
          throw EPO_INPUT_ERROR(where, ": JSON nested deeper than ", kMaxJsonDepth,
                                " levels (allowed: up to ", kMaxJsonDepth, ")");
        if (ev == Event::object_start) keys.emplace_back();
        break;
      case Event::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
          throw EPO_INPUT_ERROR(where, ": key '", parsed.get<std::string>(),
                                "' appears twice in one object (allowed: each key once)");
        break;
      case Event::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::exception& e) {
    // Syntax errors and numbers out of range (1e400) alike: the text is not usable JSON.
    throw EPO_INPUT_ERROR(where, ": not valid JSON (", e.what(), ")");
  }
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json_text(read_input_file(path), path);
}

void check_output_paths(const std::vector<std::string>& outputs,
                        const std::vector<std::string>& inputs) {
  std::set<std::pair<dev_t, ino_t>> input_files;
  std::set<std::string> input_names;
  for (const auto& in : inputs) {
    if (in.empty()) continue;
    input_names.insert(in);
    struct stat st {};
    if (::stat(in.c_str(), &st) == 0) input_files.insert({st.st_dev, st.st_ino});
  }
  std::set<std::string> seen;
  std::set<std::pair<dev_t, ino_t>> seen_files;
  for (const auto& out : outputs) {
    if (out.empty()) continue;
    EPO_REQUIRE_INPUT(seen.insert(out).second, out,
                      ": named as two outputs (allowed: a different file for each output)");
    EPO_REQUIRE_INPUT(!input_names.count(out), out,
                      ": is also an input; writing it would overwrite the input (allowed: an "
                      "output path that is not an input)");
    struct stat st {};
    if (::stat(out.c_str(), &st) == 0) {
      if (!S_ISREG(st.st_mode))
        throw EPO_INPUT_ERROR(out, ": is ", file_kind(st.st_mode),
                              " (allowed: a path to a new or regular file)");
      EPO_REQUIRE_INPUT(!input_files.count({st.st_dev, st.st_ino}), out,
                        ": is the same file as an input; writing it would overwrite the input "
                        "(allowed: an output path that is not an input)");
      EPO_REQUIRE_INPUT(seen_files.insert({st.st_dev, st.st_ino}).second, out,
                        ": is the same file as another output (allowed: a different file for "
                        "each output)");
    }
    EPO_REQUIRE_INPUT(out.back() != '/', out, ": names a directory (allowed: a file path)");
    const std::string dir = dir_of(out);
    struct stat dst {};
    if (::stat(dir.c_str(), &dst) != 0 || !S_ISDIR(dst.st_mode))
      throw EPO_INPUT_ERROR(out, ": directory '", dir,
                            "' does not exist (allowed: a file in an existing directory)");
    EPO_REQUIRE_INPUT(::access(dir.c_str(), W_OK) == 0, out, ": directory '", dir,
                      "' is not writable (allowed: a file in a writable directory)");
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  check_output_paths({path}, {});
  std::string tmp = path + ".XXXXXX";
  Fd f;
  f.fd = ::mkstemp(tmp.data());
  if (f.fd < 0) throw EPO_INPUT_ERROR(path, ": cannot write file (", std::strerror(errno), ")");
  ::fchmod(f.fd, 0644 & ~[] {
    const mode_t m = ::umask(0);
    ::umask(m);
    return m;
  }());
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(f.fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::unlink(tmp.c_str());
      throw EPO_RUNTIME_ERROR(path, ": write failed (", std::strerror(err), ")");
    }
    done += static_cast<std::size_t>(n);
  }
  const int closed = ::close(f.fd);
  f.fd = -1;
  if (closed != 0) {
    ::unlink(tmp.c_str());
    throw EPO_RUNTIME_ERROR(path, ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    throw EPO_RUNTIME_ERROR(path, ": cannot move the finished file into place");
  }
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  // Strings EPO writes come from checked input; replace rather than throw on invalid UTF-8.
  write_text_file(path, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

}  // namespace epo::model
