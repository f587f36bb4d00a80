// `epo plan --emit bridge` against Megatron-Bridge's config tree as its own code applies it
// (tests/data/bridge/config_fields.json, recorded from the fetched sources by
// tools/bridge_fields_oracle.py --record): every key names a field of its section and its value
// has the field's type; the mixed-precision preset the plan names exists; and no override is
// silently replaced after it is applied: MixedPrecisionConfig.setup copies each of its fields into
// the model, optimizer and DDP configs (so an override of one must agree with the preset), and
// CommOverlapConfig.setup copies _CommOverlapConfig's fields the same way (so an override of one
// must agree with the comm_overlap value emitted beside it).
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "run_epo.hpp"

using epo::test::run_epo;

namespace {

using Overrides = std::map<std::string, std::string>;

Overrides parse(const std::string& text) {
  Overrides kv;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq);
    key.erase(0, key.find_first_not_of("+~"));
    kv[key] = line.substr(eq + 1);
  }
  return kv;
}

bool is_int(const std::string& v) {
  size_t i = (!v.empty() && v[0] == '-') ? 1 : 0;
  if (i >= v.size()) return false;
  for (; i < v.size(); ++i)
    if (v[i] < '0' || v[i] > '9') return false;
  return true;
}

bool is_number(const std::string& v) {
  if (v.empty()) return false;
  char* end = nullptr;
  std::strtod(v.c_str(), &end);
  return end == v.c_str() + v.size();
}

/// Does the Hydra value fit the dataclass annotation? Only the scalar annotations are checked;
/// `Optional[...]` and `X | None` also take null.
bool fits(const std::string& annotation, const std::string& v) {
  const bool optional =
      annotation.find("Optional[") == 0 || annotation.find("| None") != std::string::npos;
  if (v == "null") return optional;
  std::string base = annotation;
  if (base.find("Optional[") == 0) base = base.substr(9, base.size() - 10);
  if (base.size() > 7 && base.compare(base.size() - 7, 7, " | None") == 0)
    base = base.substr(0, base.size() - 7);
  if (base == "bool") return v == "true" || v == "false";
  if (base == "int") return is_int(v);
  if (base == "float") return is_number(v);
  return true;
}

/// The emitted text of a recorded Python value.
std::string hydra(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

bool same(const std::string& emitted, const nlohmann::json& recorded) {
  if (recorded.is_number() && is_number(emitted))
    return std::strtod(emitted.c_str(), nullptr) == recorded.get<double>();
  return emitted == hydra(recorded);
}

/// Every problem Bridge's own config code would have with these overrides, one line each.
std::vector<std::string> problems(const nlohmann::json& tree, const Overrides& kv) {
  std::vector<std::string> out;
  const auto& sections = tree.at("sections");
  const std::set<std::string> mp = tree.at("mixed_precision_fields").get<std::set<std::string>>();
  const std::set<std::string> co =
      tree.at("comm_overlap_copied_fields").get<std::set<std::string>>();
  const auto preset = kv.find("mixed_precision");
  const nlohmann::json* values = nullptr;
  if (preset != kv.end()) {
    if (!tree.at("mixed_precision_presets").contains(preset->second))
      out.push_back("mixed_precision=" + preset->second + ": no such preset");
    else
      values = &tree.at("mixed_precision_presets").at(preset->second);
  }
  const bool comm_overlap = kv.count("comm_overlap._target_") > 0;
  for (const auto& [key, value] : kv) {
    if (key == "mixed_precision") continue;
    if (key == "comm_overlap._target_") {
      if (value.size() < 18 || value.substr(value.size() - 18) != ".CommOverlapConfig")
        out.push_back(key + "=" + value + ": not CommOverlapConfig");
      continue;
    }
    const size_t dot = key.find('.');
    const std::string section = key.substr(0, dot), field = key.substr(dot + 1);
    if (dot == std::string::npos || !sections.contains(section) ||
        !sections.at(section).contains(field)) {
      out.push_back(key + ": not a field of Bridge's config");
      continue;
    }
    const std::string annotation = sections.at(section).at(field).get<std::string>();
    if (!fits(annotation, value)) out.push_back(key + "=" + value + ": not a " + annotation);
    const bool copied_into = section == "model" || section == "optimizer" || section == "ddp";
    if (copied_into && values != nullptr && mp.count(field) && values->contains(field) &&
        !same(value, values->at(field)))
      out.push_back(key + "=" + value + ": replaced by mixed_precision's " +
                    hydra(values->at(field)));
    if (copied_into && comm_overlap && co.count(field)) {
      const auto c = kv.find("comm_overlap." + field);
      if (c == kv.end() || c->second != value)
        out.push_back(key + "=" + value + ": replaced by comm_overlap." + field);
    }
  }
  return out;
}

const std::vector<std::pair<const char*, const char*>> kPlans = {
    {"default plan", ""},
    {"DeepSeek-V3 on 1,024 H100",
     "--model deepseek-v3 --hardware dgx-h100 --gpus 1024 --gbs 16384"},
    {"FP8 (Qwen3-30B-A3B, H100)", "--precision fp8"},
    {"MXFP8 (DeepSeek-V3, 256 GB200)",
     "--model deepseek-v3 --hardware gb200-nvl72 --gpus 256 --gbs 4096 --precision fp8"},
    {"NVFP4 (Nemotron-3-Super, 64 GB300)",
     "--model nemotron-3-super --hardware gb300-nvl72 --gpus 64 --gbs 512 --precision nvfp4"},
    {"CUDA graphs, flex / DeepEP",
     "--layout tp=1,pp=1,ep=16 --dispatcher flex --flex-backend deepep "
     "--cuda-graph-impl transformer_engine"},
    {"flex / HybridEP", "--layout tp=1,pp=1,ep=16 --dispatcher flex --flex-backend hybridep"},
    {"alltoall, TP 2 PP 2, offloading",
     "--layout tp=2,pp=2,ep=8 --dispatcher alltoall --offload-modules core_attn,attn_proj"},
    {"Megatron-FSDP, HSDP over two instances",
     "--megatron-fsdp --dist-opt-instances 2 --fsdp-outer-optim"},
};

}  // namespace

TEST_CASE("every emitted Bridge override takes effect in Bridge's config tree") {
  const nlohmann::json tree = epo::model::read_json_file(
      epo::test::env_path("EPO_TEST_DATA", "bridge/config_fields.json"));
  for (const auto& [title, args] : kPlans) {
    INFO(title);
    const auto r = run_epo(std::string("plan --emit bridge ") + args);
    REQUIRE(r.exit_code == 0);
    const Overrides kv = parse(r.output);
    CHECK(kv.size() > 20);
    CHECK(kv.count("mixed_precision") == 1);
    if (std::string(args).find("--megatron-fsdp") != std::string::npos)
      CHECK(kv.count("ddp.use_megatron_fsdp") == 1);
    const auto bad = problems(tree, kv);
    std::string all;
    for (const auto& b : bad) all += b + "\n";
    INFO(all);
    CHECK(bad.empty());
  }
}

TEST_CASE("the Bridge tree check finds overrides Bridge would reject or replace") {
  const nlohmann::json tree = epo::model::read_json_file(
      epo::test::env_path("EPO_TEST_DATA", "bridge/config_fields.json"));
  const Overrides bad = parse(
      "model.fp8=hybrid\nmixed_precision=bf16_mixed\nmodel.no_such_field=1\n"
      "model.moe_permute_fusion=yes\n++comm_overlap._target_=x.CommOverlapConfig\n"
      "ddp.overlap_grad_reduce=true\n++comm_overlap.overlap_grad_reduce=false\n"
      "model.tensor_model_parallel_size=2\n");
  const auto found = problems(tree, bad);
  std::string all;
  for (const auto& b : found) all += b + "\n";
  INFO(all);
  CHECK(found.size() == 4);
  CHECK(all.find("model.fp8=hybrid: replaced by mixed_precision's null") != std::string::npos);
  CHECK(all.find("model.no_such_field: not a field") != std::string::npos);
  CHECK(all.find("model.moe_permute_fusion=yes: not a bool") != std::string::npos);
  CHECK(all.find("ddp.overlap_grad_reduce=true: replaced by comm_overlap") != std::string::npos);
  CHECK(problems(tree, parse("mixed_precision=no_such_mixed\n")).size() == 1);
}
