#include "calibration/published_detail.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "model/config.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"

namespace epo::calib::detail {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double number_of(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str()) return v;
  }
  return kNaN;
}

double num_field(const nlohmann::json& j, const char* key) {
  return j.contains(key) && !j[key].is_null() ? number_of(j[key]) : kNaN;
}

int int_field(const nlohmann::json& j, const char* key, int fallback) {
  const double v = num_field(j, key);
  return v == v && v > -2147483648.0 && v < 2147483648.0 ? static_cast<int>(v) : fallback;
}

std::string str_field(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

bool is_true(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

void for_each_json_line(const std::string& path,
                        const std::function<void(const nlohmann::json&, int)>& each) {
  std::istringstream in(model::read_input_file(path));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    const nlohmann::json j = model::parse_json_text(line, where);
    EPO_REQUIRE_INPUT(j.is_object(), where, ": not a JSON object");
    each(j, n);
  }
}

std::string set_megatron_fsdp(const nlohmann::json& row, const nlohmann::json* recipe, int gpus,
                              model::Options& o) {
  o.megatron_fsdp = o.distributed_optimizer = true;
  const std::string strategy =
      recipe ? str_field(*recipe, "ddp.data_parallel_sharding_strategy") : std::string();
  const std::string id = str_field(row, "id");
  // optim_grads_params unless named: what Bridge's recipes and performance scripts set with it.
  if (!strategy.empty()) o.fsdp_sharding = model::parse_fsdp_sharding(strategy, id);
  double inst = recipe ? num_field(*recipe, "ddp.num_distributed_optimizer_instances") : kNaN;
  std::string how = std::isfinite(inst) ? "" : ", one optimizer instance (not recorded)";
  // Bridge's Nemotron-3-Ultra recipes (perf_recipes/nemotronh, _apply_nemotron_3_ultra_fsdp_hsdp)
  // shard inside 64-GPU NVLink domains, one instance each, the optimizer sharded across them.
  const std::string fn = row.contains("recipe_source") && row["recipe_source"].is_object()
                             ? str_field(row["recipe_source"], "function")
                             : std::string();
  if (!std::isfinite(inst) && fn.rfind("nemotron_3_ultra", 0) == 0 && gpus >= 64) {
    inst = gpus / 64;
    o.fsdp_outer_optim = inst > 1;
    how = ", HSDP over " + std::to_string(static_cast<int>(inst)) +
          " NVLink domains of 64 GPUs as the cited recipe sets it";
  }
  if (std::isfinite(inst) && inst >= 1) o.distributed_optimizer_instances = static_cast<int>(inst);
  return std::string("Megatron-FSDP, ") + model::to_string(o.fsdp_sharding) + how;
}

void set_offload_modules(const nlohmann::json& os, const nlohmann::json* recipe,
                         model::Options& o) {
  std::string offload = str_field(os, "activation_offloading");
  std::replace(offload.begin(), offload.end(), ',', ' ');
  std::istringstream offloaded(offload);
  for (std::string m; offloaded >> m;) o.offload_modules.push_back(m);
  if (!o.offload_modules.empty() || !recipe) return;
  const nlohmann::json& ra = *recipe;
  const char* kModules = "model.offload_modules";
  if (!is_true(ra, "model.fine_grained_activation_offloading") || !ra.contains(kModules) ||
      !ra[kModules].is_array())
    return;
  for (const auto& m : ra[kModules])
    if (m.is_string()) o.offload_modules.push_back(m.get<std::string>());
}

}  // namespace epo::calib::detail
