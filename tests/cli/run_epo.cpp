#include "run_epo.hpp"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <sys/stat.h>
#include <sys/wait.h>

namespace epo::test {

RunResult run_epo(const std::string& args) {
  const char* bin = std::getenv("EPO_BIN");
  if (!bin) throw std::runtime_error("EPO_BIN is not set (run the tests through ctest)");
  return run_shell(std::string(bin) + " " + args);
}

RunResult run_shell(const std::string& command) {
  const std::string cmd = command + " 2>&1";
  RunResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string env_path(const char* var, const std::string& rel) {
  const char* dir = std::getenv(var);
  if (!dir) throw std::runtime_error(std::string(var) + " is not set (run the tests through ctest)");
  return std::string(dir) + "/" + rel;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace epo::test
