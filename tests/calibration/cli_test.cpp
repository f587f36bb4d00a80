// `epo calibrate fit` and `report` on the committed example files, through the program itself.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "catch.hpp"

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  REQUIRE(v != nullptr);
  return v;
}

/// Runs the command with stdout to `out_file`; returns the exit status.
int run(const std::string& cmd, const std::string& out_file) {
  const int rc = std::system((cmd + " > " + out_file + " 2>&1").c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("epo calibrate fit and report run on the example files") {
  const std::string epo = env("EPO_BIN"), data = EPO_EXAMPLE_DATA_DIR;
  const std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  const std::string profile = dir + "/epo_cli_test_profile.json", log = dir + "/epo_cli_test.log";
  const std::string runs =
      data + "/example_measurement_base.json " + data + "/example_measurement_overlap.json";
  REQUIRE(run(epo + " calibrate fit " + data + "/example_samples.json " + runs +
                  " --base h200-sxm --out " + profile,
              log) == 0);
  const std::string fit = slurp(log);
  CHECK(fit.find("fit gemm") != std::string::npos);
  CHECK(fit.find("rel RMS") != std::string::npos);
  CHECK(!slurp(profile).empty());

  REQUIRE(run(epo + " calibrate report --profile " + profile + " " + runs, log) == 0);
  const std::string rep = slurp(log);
  CHECK(rep.find("step time") != std::string::npos);
  CHECK(rep.find("ranking right for") != std::string::npos);

  // The profile is accepted where a hardware preset is.
  CHECK(run(epo + " predict --model tiny --gpus 4 --ep 4 --gbs 16 --profile " + profile, log) == 0);
  // A missing samples file is an input error (exit 2), and no profile is written.
  std::remove(profile.c_str());
  CHECK(run(epo + " calibrate fit " + data + "/no_such_file.json --out " + profile, log) == 2);
  CHECK(slurp(profile).empty());
}

TEST_CASE("epo calibrate ops keeps every row of the file in its JSON") {
  const std::string epo = env("EPO_BIN"), data = EPO_EXAMPLE_DATA_DIR;
  const std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp");
  const std::string json = dir + "/epo_cli_test_ops.json", log = dir + "/epo_cli_test_ops.log";
  const std::string rows = data + "/op_benchmarks_rows.jsonl";
  std::remove(json.c_str());
  REQUIRE(run(epo + " calibrate ops " + rows + " --fit-on library:HybridEP --json " + json, log) ==
          0);
  const std::string out = slurp(log);
  CHECK(out.find("rows not modelled") != std::string::npos);
  CHECK(out.find("group:HybridEP|H100|dispatch") != std::string::npos);
  const std::string j = slurp(json);
  std::size_t ids = 0;
  for (std::size_t at = j.find("\"id\""); at != std::string::npos; at = j.find("\"id\"", at + 1))
    ++ids;
  CHECK(ids == 10);  // the fixture's rows, modelled or not
  CHECK(j.find("\"unsupported\"") != std::string::npos);
  // A selection naming no known field is bad usage (exit 2).
  CHECK(run(epo + " calibrate ops " + rows + " --fit-on colour:red", log) == 2);
}
