// --bridge-config as users run it: predict and validate read Bridge's printed configuration and
// list what they did not know; a malformed file exits 2 naming the file and line; check-log
// finds the configuration Bridge printed into its log; diff takes two such files.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "catch.hpp"
#include "run_epo.hpp"

using epo::test::has;
using epo::test::run_epo;

namespace {

std::string data(const std::string& rel) {
  return epo::test::env_path("EPO_TEST_DATA", rel);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Writes `text` to `path` and returns the path.
std::string write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

}  // namespace

TEST_CASE("epo predict / validate --bridge-config") {
  const std::string yaml = data("bridge/qwen3_30b_a3b_run_config.yaml");
  auto r = run_epo("predict --bridge-config " + yaml);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "Bridge configuration " + yaml));
  CHECK(has(r.output, "model.share_embeddings_and_output_weights"));  // listed, not refused
  r = run_epo("validate --bridge-config " + yaml + " --bridge-overrides " +
              write("bc_overrides.txt", "model.expert_model_parallel_size=4\n"));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  std::remove("bc_overrides.txt");
}

TEST_CASE("a malformed Bridge configuration exits 2 naming the file and line") {
  const std::string bad = write("bc_tab.yaml", "model:\n  num_layers: 4\n\thidden_size: 8\n");
  auto r = run_epo("predict --bridge-config " + bad);
  CHECK(r.exit_code == 2);
  CHECK(has(r.output, "bc_tab.yaml line 3"));
  write("bc_indent.yaml", "model:\n  num_layers: 4\n      hidden_size: 8\n");
  r = run_epo("plan --bridge-config bc_indent.yaml");
  CHECK(r.exit_code == 2);
  CHECK(has(r.output, "bc_indent.yaml line 3: bad indentation"));
  write("bc_value.yaml", "model:\n  num_layers: four\n");
  r = run_epo("predict --bridge-config bc_value.yaml");
  CHECK(r.exit_code == 2);
  CHECK(has(r.output, "num_layers"));
  for (const char* f : {"bc_tab.yaml", "bc_indent.yaml", "bc_value.yaml"}) std::remove(f);
}

TEST_CASE("epo check-log finds the configuration Bridge printed at start-up") {
  const auto r = run_epo("check-log " + data("logs/synthetic_bridge_task_configuration.log") +
                         " --tolerance 1000");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "Bridge configuration block found in the log"));
  CHECK(has(r.output, "overlap_moe_expert_parallel_comm = True (Bridge configuration block)"));
}

TEST_CASE("epo check-log reads Bridge v0.4's configuration summary") {
  const auto r = run_epo("check-log " + data("logs/synthetic_bridge_summary_v04.log") +
                         " --gpus 8 --hardware gb200-nvl72 --tolerance 1000 --json cl_summary.json");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "Bridge configuration summary found in the log"));
  CHECK(has(r.output, "EP overlap active: no"));  // Megatron-Core's default: not in the summary
  CHECK(has(r.output, "step time 5.803 s"));
  CHECK(has(r.output, "predicted ("));  // the summary held the whole architecture
  std::remove("cl_summary.json");
}

TEST_CASE("epo diff of two Bridge configurations") {
  const std::string on = data("bridge/qwen3_30b_a3b_run_config.yaml");
  const std::string off =
      write("bc_overlap_off.yaml", replaced(read_text(on), "overlap_moe_expert_parallel_comm: true",
                                            "overlap_moe_expert_parallel_comm: false"));
  const auto r = run_epo("diff " + on + " " + off);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(has(r.output, "(Bridge configuration)"));
  CHECK(has(r.output, "options.overlap_moe_expert_parallel_comm"));
  std::remove(off.c_str());
}
