#pragma once
// Runs the epo program (path in $EPO_BIN) and captures its exit code and output; small checks
// the CLI tests share.
#include <string>

namespace epo::test {

struct RunResult {
  int exit_code = -1;
  std::string output;  ///< stdout and stderr together
};

/// Runs `epo <args>` through the shell; args are passed verbatim.
RunResult run_epo(const std::string& args);

/// Runs a shell command line (stderr joined to stdout) and captures both and the exit code.
RunResult run_shell(const std::string& command);

/// `rel` under the folder the environment variable `var` names (EPO_TEST_DATA, EPO_PRESETS; set
/// by ctest); throws when it is not set.
std::string env_path(const char* var, const std::string& rel);

/// Does `s` contain `part`?
bool has(const std::string& s, const std::string& part);

/// Does the path exist (file, directory or anything else)?
bool exists(const std::string& path);

}  // namespace epo::test
