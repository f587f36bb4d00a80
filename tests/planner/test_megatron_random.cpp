// A differential oracle on random configurations: a seeded generator draws settings across every
// overlap-related field, recompute, CUDA graphs, precision, dispatchers, MTP and layouts; Megatron's
// own verdict on each (Megatron-LM's parse_args, validate_args and TransformerConfig, run by
// tools/megatron_rules_oracle.py on the arguments epo emits) is recorded in
// tests/data/megatron_random_verdicts.jsonl, and epo's validate must give the same verdict.
//
// The same for older Megatron-Core releases: tests/data/megatron_random_verdicts_<version>.jsonl,
// the arguments emitted for that version, its checkout's checks.
//
// To record it again: EPO_MEGATRON_RANDOM_CASES=cases.jsonl [EPO_MEGATRON_RANDOM_VERSION=core_v0.18]
// build/tests/planner/test_planner_rules "*random*", then on a machine with PyTorch
// `MEGATRON_PATH=<checkout of that version> python3 tools/megatron_rules_oracle.py cases.jsonl
// --record tests/data/megatron_random_verdicts[_<version>].jsonl` (one line per case: "what" and
// "megatron", its message or "accepted").
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "ingest/mlm_args.hpp"
#include "planner/emit.hpp"
#include "planner/examples.hpp"
#include "rule_cases_detail.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;

namespace {

/// A 64-bit LCG: the same draws with every standard library (no std distributions).
struct Draw {
  std::uint64_t s;
  int pick(int n) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((s >> 33) % static_cast<std::uint64_t>(n));
  }
  bool coin() { return pick(2) == 1; }
};

struct RandomCase {
  std::string what;
  Config cfg;
  ValidationContext ctx;
};

/// Case i of the generator; false when the drawn layout does not divide (skipped both times).
bool random_case(int i, MegatronVersion version, RandomCase& out) {
  Draw d{0x9e3779b97f4a7c15ULL ^ (static_cast<std::uint64_t>(i) * 0x100000001b3ULL)};
  Config c = planner::example_config("alltoall");
  ValidationContext x;
  x.frontend = Frontend::mlm;
  x.megatron = version;
  std::string what = "random " + std::to_string(i) + ":";
  const int tp = 1 << d.pick(2), pp = 1 << d.pick(2), vpp = pp > 1 ? 1 << d.pick(2) : 1;
  const int ep = 1 << d.pick(4);
  try {
    test::relayout(c, 16, tp, pp, vpp, ep, 512);
  } catch (const std::exception&) {
    return false;
  }
  what += " tp" + std::to_string(tp) + " pp" + std::to_string(pp) + " vpp" + std::to_string(vpp) +
          " ep" + std::to_string(ep);
  switch (d.pick(4)) {
    case 0: c.opt.dispatcher = model::Dispatcher::alltoall; what += " alltoall"; break;
    case 1: c.opt.dispatcher = model::Dispatcher::allgather; what += " allgather"; break;
    case 2: test::flex(c, model::FlexBackend::deepep); what += " deepep"; break;
    default: test::flex(c, model::FlexBackend::hybridep); what += " hybridep"; break;
  }
  c.opt.overlap_moe_expert_parallel_comm = d.coin();
  c.opt.delay_wgrad_compute = d.coin();
  c.opt.ep_overlap_early_attn_memory_release = d.pick(4) == 0;
  if (c.opt.overlap_moe_expert_parallel_comm) what += " overlap";
  if (c.opt.delay_wgrad_compute) what += " delay-wgrad";
  if (c.opt.ep_overlap_early_attn_memory_release) what += " early-release";
  static const char* kModules[] = {"core_attn", "moe_act", "layernorm", "mlp", "moe", "shared_experts"};
  switch (d.pick(3)) {
    case 1: {
      c.opt.recompute_granularity = model::RecomputeGranularity::selective;
      c.opt.recompute_modules = {kModules[d.pick(6)]};
      if (d.coin()) c.opt.recompute_modules.push_back(kModules[d.pick(6)]);
      if (c.opt.recompute_modules.size() == 2 && c.opt.recompute_modules[0] == c.opt.recompute_modules[1])
        c.opt.recompute_modules.pop_back();
      what += " rc-selective";
      for (const auto& m : c.opt.recompute_modules) what += "," + m;
      break;
    }
    case 2:
      c.opt.recompute_granularity = model::RecomputeGranularity::full;
      c.opt.recompute_method = d.coin() ? "uniform" : "block";
      c.opt.recompute_num_layers = 1;
      what += " rc-full-" + c.opt.recompute_method;
      break;
    default: break;
  }
  static const char* kGraphs[] = {"attn", "mlp", "moe", "moe_router", "moe_preprocess"};
  switch (d.pick(4)) {
    case 1: {
      std::vector<std::string> m{kGraphs[d.pick(5)]};
      if (d.coin() && m[0] != "moe_router") m.push_back("moe_router");
      test::graphs(c, m);
      what += " te-graphs";
      for (const auto& s : m) what += "," + s;
      break;
    }
    case 2:
      c.opt.cuda_graph_impl = model::CudaGraphImpl::full_iteration;
      c.opt.cuda_graph_modules.clear();
      what += " full-iteration-graph";
      break;
    default: break;
  }
  if (d.coin()) {
    c.opt.precision = model::Precision::fp8;
    what += " fp8";
  }
  if (d.pick(4) == 0) {
    c.opt.params_dtype = d.coin() ? model::ParamsDtype::fp16 : model::ParamsDtype::fp32;
    what += std::string(" params-") + model::to_string(c.opt.params_dtype);
  }
  if (d.pick(4) == 0) {
    c.opt.capacity_factor = 1.0;
    x.moe_pad_expert_input_to_capacity = d.coin();
    what += x.moe_pad_expert_input_to_capacity ? " capacity-pad" : " capacity";
  }
  c.model.mtp_num_layers = d.pick(4) == 0 ? 1 + d.pick(2) : 0;
  if (c.model.mtp_num_layers) what += " mtp" + std::to_string(c.model.mtp_num_layers);
  static const int kCdmc[] = {1, 8, 32};
  c.opt.cuda_device_max_connections = kCdmc[d.pick(3)];
  what += " cdmc" + std::to_string(c.opt.cuda_device_max_connections);
  out = {what, c, x};
  return true;
}

const int kCases = 300;

/// epo's first error among the checks Megatron runs at start-up (its argument validation and
/// TransformerConfig): the runtime rules (DeepEP, HybridEP, TE, the dispatchers' own asserts at
/// first use) are not what this oracle records.
const Violation* first_startup_error(const std::vector<Violation>& errors) {
  for (const auto& v : errors)
    if (v.id.rfind("MCORE-", 0) == 0 || v.id.rfind("MLM-", 0) == 0) return &v;
  return nullptr;
}

/// Whether the rule's cited source ("... path/file.py:a-b") covers Megatron's raising line
/// ("file.py:n ..." at the start of the recorded message).
bool cites(const std::string& source, const std::string& megatron) {
  const auto colon = megatron.find(':'), space = megatron.find(' ');
  if (colon == std::string::npos || space == std::string::npos || space < colon) return false;
  const std::string file = megatron.substr(0, colon);
  const int line = std::atoi(megatron.substr(colon + 1, space - colon - 1).c_str());
  const auto at = source.find(file + ":");
  if (at == std::string::npos) return false;
  const char* range = source.c_str() + at + file.size() + 1;
  char* end = nullptr;
  const long a = std::strtol(range, &end, 10);
  const long b = *end == '-' ? std::strtol(end + 1, nullptr, 10) : a;
  return a <= line && line <= b;
}

/// Before core_v0.16 Megatron-LM's arguments cannot name HybridEP nor a CUDA-graph module list
/// other than attention (one --cuda-graph-scope value): epo refuses those configurations there
/// (MCORE-FLEX-HYBRIDEP-VERSION, MCORE-CUDA-GRAPH-SCOPE-VALUES) and what Megatron was given is
/// another configuration, not compared.
bool expressible(const Config& c, MegatronVersion version) {
  if (static_cast<int>(version) >= static_cast<int>(MegatronVersion::core_v0_16)) return true;
  const auto& o = c.opt;
  if (o.dispatcher == model::Dispatcher::flex && o.flex_backend == model::FlexBackend::hybridep)
    return false;
  return o.cuda_graph_impl != model::CudaGraphImpl::transformer_engine ||
         o.cuda_graph_modules.empty() || o.cuda_graph_modules == std::vector<std::string>{"attn"};
}

/// Compares epo with the recorded verdicts of `file` (Megatron `version`), or writes the cases
/// when EPO_MEGATRON_RANDOM_CASES is set and names this version.
void compare_with_recording(MegatronVersion version, const std::string& file) {
  const char* out_path = std::getenv("EPO_MEGATRON_RANDOM_CASES");
  const char* out_version = std::getenv("EPO_MEGATRON_RANDOM_VERSION");
  std::ofstream out;
  if (out_path && (out_version ? std::string(out_version) : "main") == to_string(version))
    out.open(out_path);
  std::map<std::string, std::string> megatron;  // what -> Megatron's message, or "accepted"
  std::ifstream in(std::string(EPO_TEST_DATA_DIR) + "/" + file);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    megatron[j.at("what").get<std::string>()] = j.at("megatron").get<std::string>();
  }
  int drawn = 0, compared = 0, unexpressible = 0, agree = 0, refused = 0, located = 0;
  for (int i = 0; i < kCases; ++i) {
    RandomCase k;
    if (!random_case(i, version, k)) continue;
    ++drawn;
    const auto errors = validate_errors(k.cfg, k.ctx);
    const std::string first = errors.empty() ? "" : errors.front().id;
    const Violation* startup = first_startup_error(errors);
    if (out.is_open()) {
      nlohmann::json j;
      j["what"] = k.what;
      j["epo_first_error"] = first;
      j["world_size"] = k.cfg.num_gpus;
      j["args"] = emit_mlm(k.cfg, k.ctx) + "\n" + ingest::emit_mlm_model_args(k.cfg.model);
      j["env"] = emit_env(k.cfg, k.ctx);
      out << j.dump() << "\n";
    }
    const auto m = megatron.find(k.what);
    if (m == megatron.end()) continue;
    if (!expressible(k.cfg, version)) {
      ++unexpressible;
      continue;
    }
    ++compared;
    const bool accepted = m->second == "accepted";
    INFO(k.what << "\n  epo: " << (startup ? startup->id + " (" + startup->source + ")" : "accepted")
                << "\n  megatron: " << m->second);
    CHECK((startup == nullptr) == accepted);
    agree += (startup == nullptr) == accepted;
    // A refusal: epo's first start-up error cites the line Megatron raised at (the rules cite
    // main's lines; older releases are compared by verdict).
    if (startup && !accepted && version == MegatronVersion::main) {
      CHECK(cites(startup->source, m->second));
      located += cites(startup->source, m->second);
      ++refused;
    }
  }
  REQUIRE(megatron.size() >= 200);
  // Every recorded case is still drawn (the generator has not drifted from the recording).
  CHECK(compared + unexpressible == static_cast<int>(megatron.size()));
  CHECK(agree == compared);
  CHECK(located == refused);
  CHECK(drawn >= 200);
}

}  // namespace

TEST_CASE("validate agrees with Megatron on random configurations (recorded oracle)") {
  compare_with_recording(MegatronVersion::main, "megatron_random_verdicts.jsonl");
}

TEST_CASE("validate agrees with Megatron-Core core_v0.18 on random configurations") {
  compare_with_recording(MegatronVersion::core_v0_18, "megatron_random_verdicts_core_v0.18.jsonl");
}

TEST_CASE("validate agrees with Megatron-Core core_v0.15 on random configurations") {
  compare_with_recording(MegatronVersion::core_v0_15, "megatron_random_verdicts_core_v0.15.jsonl");
}
