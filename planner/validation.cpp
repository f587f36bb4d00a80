#include "planner/validation.hpp"

#include <cstdlib>
#include <sstream>

#include "model/error.hpp"
#include "planner/rules_common.hpp"

namespace epo::planner {

namespace {
constexpr const char* kVersionNames[] = {"core_v0.14", "core_v0.15", "core_v0.16", "core_v0.17",
                                         "core_v0.18", "core_v0.19", "main"};

std::vector<Rule> build_rules() {
  std::vector<Rule> r;
  // The order the checks run in: Megatron-LM's validate_args and Bridge's recipe and
  // comm_overlap setup come before TransformerConfig.__post_init__; the backends at run time.
  rules::add_mlm_rules(r);
  rules::add_bridge_rules(r);
  rules::add_mcore_rules(r);
  rules::add_pipeline_rules(r);
  rules::add_deepep_rules(r);
  rules::add_hybridep_rules(r);
  rules::add_te_rules(r);
  rules::add_runtime_rules(r);
  return r;
}

Violation make_violation(const Rule& r, std::string msg, const model::Config& c,
                         const ValidationContext& ctx) {
  Violation v;
  v.id = r.id;
  v.severity = r.severity;
  v.message = std::move(msg);
  v.fix = r.fix ? r.fix(c, ctx) : std::string();
  v.source = r.source;
  v.versions = r.versions();
  return v;
}
}  // namespace

bool Rule::applies(const ValidationContext& ctx) const {
  const unsigned fe = ctx.frontend == Frontend::bridge ? 1u : 2u;
  return (version_mask & (1u << static_cast<unsigned>(ctx.megatron))) && (frontends & fe);
}

std::string Rule::versions() const {
  // Contiguous ranges read as "core_v0.16+", "up to core_v0.15", "core_v0.16..core_v0.17".
  int lo = -1, hi = -1;
  bool contiguous = true;
  for (int i = 0; i < kNumMegatronVersions; ++i) {
    if (!(version_mask & (1u << i))) continue;
    if (lo < 0) lo = i;
    else if (hi != i - 1) contiguous = false;
    hi = i;
  }
  std::string s;
  if (lo < 0) s = "none";
  else if (!contiguous) {
    for (int i = 0; i < kNumMegatronVersions; ++i)
      if (version_mask & (1u << i)) s += (s.empty() ? "" : ",") + std::string(kVersionNames[i]);
  } else if (lo == 0 && hi == kNumMegatronVersions - 1) s = "all";
  else if (hi == kNumMegatronVersions - 1) s = std::string(kVersionNames[lo]) + "+";
  else if (lo == 0) s = std::string("up to ") + kVersionNames[hi];
  else if (lo == hi) s = kVersionNames[lo];
  else s = std::string(kVersionNames[lo]) + ".." + kVersionNames[hi];
  if (frontends == 1u) s += " (bridge)";
  if (frontends == 2u) s += " (mlm)";
  return s;
}

const std::vector<Rule>& all_rules() {
  static const std::vector<Rule> rules = build_rules();
  return rules;
}

const Rule& find_rule(const std::string& id) {
  for (const auto& r : all_rules())
    if (r.id == id) return r;
  throw EPO_INPUT_ERROR("unknown rule id '", id, "'");
}

std::vector<Violation> validate(const model::Config& cfg, const ValidationContext& ctx) {
  std::vector<Violation> out;
  for (const auto& r : all_rules()) {
    if (!r.applies(ctx)) continue;
    std::string msg = r.check(cfg, ctx);
    if (!msg.empty()) out.push_back(make_violation(r, std::move(msg), cfg, ctx));
  }
  return out;
}

std::vector<Violation> validate_errors(const model::Config& cfg, const ValidationContext& ctx,
                                       bool first_only) {
  std::vector<Violation> out;
  for (const auto& r : all_rules()) {
    if (r.severity != Severity::error || !r.applies(ctx)) continue;
    std::string msg = r.check(cfg, ctx);
    if (msg.empty()) continue;
    out.push_back(make_violation(r, std::move(msg), cfg, ctx));
    if (first_only) break;
  }
  return out;
}

bool has_errors(const std::vector<Violation>& v) {
  for (const auto& x : v)
    if (x.severity == Severity::error) return true;
  return false;
}

const char* to_string(MegatronVersion v) { return kVersionNames[static_cast<int>(v)]; }
const char* to_string(Frontend f) { return f == Frontend::bridge ? "bridge" : "mlm"; }
const char* to_string(Severity s) { return s == Severity::error ? "error" : "warning"; }

MegatronVersion parse_megatron_version(const std::string& s, const std::string& where) {
  for (int i = 0; i < kNumMegatronVersions; ++i)
    if (s == kVersionNames[i]) return static_cast<MegatronVersion>(i);
  std::string allowed;
  for (int i = 0; i < kNumMegatronVersions; ++i)
    allowed += (i ? "|" : "") + std::string(kVersionNames[i]);
  throw EPO_INPUT_ERROR(where, ": '", s, "' is not allowed (allowed: ", allowed, ")");
}

Frontend parse_frontend(const std::string& s, const std::string& where) {
  if (s == "bridge") return Frontend::bridge;
  if (s == "mlm") return Frontend::mlm;
  throw EPO_INPUT_ERROR(where, ": '", s, "' is not allowed (allowed: bridge|mlm)");
}

Version parse_version(const std::string& s, const std::string& where) {
  Version v;
  const auto dot = s.find('.');
  char* end = nullptr;
  bool ok = dot != std::string::npos && dot > 0 && dot + 1 < s.size();
  if (ok) {
    v.major = static_cast<int>(std::strtol(s.c_str(), &end, 10));
    ok = end == s.c_str() + dot;
  }
  if (ok) {
    v.minor = static_cast<int>(std::strtol(s.c_str() + dot + 1, &end, 10));
    ok = *end == '\0' && v.major >= 0 && v.minor >= 0;
  }
  if (!ok) throw EPO_INPUT_ERROR(where, ": '", s, "' is not a version (allowed: X.Y, e.g. 2.12)");
  return v;
}

std::string to_string(const Version& v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor);
}

std::string format_violations(const std::vector<Violation>& v) {
  std::ostringstream os;
  for (const auto& x : v) {
    os << to_string(x.severity) << " " << x.id << ": " << x.message << "\n"
       << "  fix:      " << x.fix << "\n"
       << "  source:   " << x.source << "\n"
       << "  versions: " << x.versions << "\n";
  }
  return os.str();
}

}  // namespace epo::planner
