#include "cli/ingest_flags.hpp"

#include <cstdio>
#include <iostream>
#include <iterator>

#include "ingest/bridge_config.hpp"
#include "ingest/bridge_overrides.hpp"
#include "ingest/mlm_args.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"

namespace epo::cli {

std::string read_text_input(const std::string& path) {
  if (path != "-") return model::read_input_file(path);
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
    text.append(buf, n);
    EPO_REQUIRE_INPUT(text.size() <= model::kMaxInputFileBytes, "standard input: more than ",
                      model::kMaxInputFileBytes, " bytes");
  }
  EPO_REQUIRE_INPUT(text.find('\0') == std::string::npos, "standard input: holds a NUL byte");
  return text;
}

void print_read_report(const std::string& what, const ingest::ReadReport& r) {
  std::fprintf(stderr,
               "epo: %s: %zu read, %zu ignored (no effect on the prediction), %zu not modelled, "
               "%zu unknown\n",
               what.c_str(), r.read.size(), r.ignored.size(), r.not_modelled.size(),
               r.unknown.size());
  for (const auto& n : r.not_modelled)
    std::fprintf(stderr, "epo: warning: not modelled: %s\n", n.c_str());
  if (!r.unknown.empty()) {
    std::string s;
    for (const auto& u : r.unknown) s += (s.empty() ? "" : ", ") + u;
    std::fprintf(stderr, "epo: warning: not known to EPO (not read): %s\n", s.c_str());
  }
  for (const auto& w : r.warnings) std::fprintf(stderr, "epo: warning: %s\n", w.c_str());
  // A command line leaves these to Megatron-LM's defaults; one line says which.
  if (!r.assumed.empty()) {
    std::string s;
    for (const auto& a : r.assumed) s += (s.empty() ? "" : ", ") + a.key + " = " + a.value;
    std::fprintf(stderr, "epo: not in the arguments, defaults taken: %s\n", s.c_str());
  }
}

namespace {
/// Reads `path` (or standard input for "-") with `read` and reports what it read as `kind`.
template <class Read>
model::Config apply_file(const model::Config& base, const std::string& path, const char* kind,
                         Read read) {
  ingest::ReadReport r;
  const std::string source = path == "-" ? "standard input" : path;
  model::Config c = read(base, read_text_input(path), source, r);
  print_read_report(std::string(kind) + " " + source, r);
  return c;
}
}  // namespace

model::Config apply_mlm_args_file(const model::Config& base, const std::string& path) {
  return apply_file(base, path, "Megatron-LM arguments",
                    [](const model::Config& b, const std::string& t, const std::string& s,
                       ingest::ReadReport& r) { return ingest::config_from_mlm_args(b, t, s, r); });
}

model::Config apply_bridge_config_file(const model::Config& base, const std::string& path) {
  return apply_file(base, path, "Bridge configuration",
                    [](const model::Config& b, const std::string& t, const std::string& s,
                       ingest::ReadReport& r) { return ingest::config_from_bridge_config(b, t, s, r); });
}

model::Config apply_bridge_file(const model::Config& base, const std::string& path) {
  return apply_file(base, path, "Bridge overrides",
                    [](const model::Config& b, const std::string& t, const std::string& s,
                       ingest::ReadReport& r) { return ingest::config_from_bridge_overrides(b, t, s, r); });
}

}  // namespace epo::cli
