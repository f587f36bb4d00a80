// Strict JSON: presets load, configurations round-trip, and bad input names the key and file.
#include <cstdio>
#include <fstream>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {
std::string error_of(const std::function<void()>& f, int* exit_code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (exit_code) *exit_code = e.exit_code();
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("every preset loads and carries sources", "[config]") {
  for (const auto& name : list_model_presets()) {
    const ModelSpec m = load_model_preset(name);
    CHECK(m.name == name);
    if (name != "tiny") CHECK(m.sources.count("hidden_size") == 1);
  }
  CHECK(list_model_presets().size() >= 6);
  for (const auto& name : list_hardware_presets()) {
    const HardwareProfile h = load_hardware_preset(name);
    CHECK(h.name == name);
    CHECK(h.sources.count("bf16_tflops") == 1);
  }
  const ModelSpec ds = load_model_preset("deepseek-v3");
  CHECK(ds.num_experts == 256);
  CHECK(ds.router_num_groups == 8);
  CHECK(ds.router_group_topk == 4);
  CHECK(ds.first_k_dense_layers == 3);
  CHECK(ds.mtp_num_layers == 1);
  CHECK(ds.attention == AttentionKind::mla);
}

TEST_CASE("configuration JSON round trip", "[config]") {
  Config c = test::tiny_config(4);
  c.opt.dispatcher = Dispatcher::flex;
  c.opt.flex_backend = FlexBackend::hybridep;
  c.opt.overlap_moe_expert_parallel_comm = true;
  c.opt.delay_wgrad_compute = true;
  c.opt.comm_sms = 16;
  c.opt.recompute_modules = {"moe_act", "layernorm"};
  c.opt.routing.kind = RoutingKind::skewed;
  c.opt.routing.skew = 0.8;
  c.opt.megatron_fsdp = true;
  c.opt.fsdp_sharding = FsdpSharding::optim_grads;
  c.opt.fsdp_outer_optim = true;
  const auto j = to_json(c);
  Config back = config_from_json(j, "mem");
  back.derive_and_check();
  CHECK(to_json(back) == j);
  // a plan file wraps the configuration
  nlohmann::json plan = {{"schema_version", 1}, {"kind", "plan"}, {"config", j}};
  Config from_plan = config_from_json(plan, "plan");
  from_plan.derive_and_check();
  CHECK(to_json(from_plan) == to_json(back));
  // so does a prediction (epo predict --json)
  nlohmann::json prediction = {{"schema_version", 1}, {"kind", "prediction"}, {"config", j}};
  Config from_prediction = config_from_json(prediction, "prediction");
  from_prediction.derive_and_check();
  CHECK(to_json(from_prediction) == to_json(back));
}

TEST_CASE("bad JSON input names the file, the key path and what is allowed", "[config]") {
  const auto good = to_json(test::tiny_config(4));
  int code = 0;
  auto j = good;
  j["parallel"]["tpp"] = 2;
  auto msg = error_of([&] { config_from_json(j, "cfg.json"); }, &code);
  CHECK(msg.find("cfg.json") != std::string::npos);
  CHECK(msg.find("parallel.tpp") != std::string::npos);
  CHECK(code == 2);

  j = good;
  j["options"]["overlap_moe_expert_parallel_comm"] = "yes";
  msg = error_of([&] { config_from_json(j, "cfg.json"); });
  CHECK(msg.find("options.overlap_moe_expert_parallel_comm") != std::string::npos);
  CHECK(msg.find("true or false") != std::string::npos);

  j = good;
  j["options"]["cuda_device_max_connections"] = 64;
  msg = error_of([&] { config_from_json(j, "cfg.json"); });
  CHECK(msg.find("out of range") != std::string::npos);
  CHECK(msg.find("1..32") != std::string::npos);

  j = good;
  j["options"]["dispatcher"] = "deepep";
  msg = error_of([&] { config_from_json(j, "cfg.json"); });
  CHECK(msg.find("allgather|alltoall|flex") != std::string::npos);

  j = good;
  j["schema_version"] = 7;
  CHECK(error_of([&] { config_from_json(j, "cfg.json"); }).find("schema_version") != std::string::npos);
}

TEST_CASE("layouts that do not divide are rejected with the field and the value", "[config]") {
  Config c = test::tiny_config(4);
  int code = 0;
  c.par.ep = 3;
  c.num_gpus = 6;
  auto msg = error_of([&] { c.derive_and_check(); }, &code);
  CHECK(msg.find("ep = 3") != std::string::npos);
  CHECK(code == 2);
  c = test::tiny_config(4);
  c.par.pp = 4;  // 4 stages x 2 virtual stages = 8 chunks for 4 layers
  c.par.vpp = 2;
  c.num_gpus = 16;
  c.par.global_batch_size = 0;
  msg = error_of([&] { c.derive_and_check(); });
  CHECK(msg.find("layers") != std::string::npos);
  c = test::tiny_config(4);
  c.par.tp = 3;
  msg = error_of([&] { c.derive_and_check(); });
  CHECK(msg.find("does not divide gpus") != std::string::npos);
  CHECK(error_of([&] { load_model_preset("gpt-5"); }).find("known: ") != std::string::npos);
}

TEST_CASE("output files are written whole or not at all", "[config]") {
  const std::string dir = "/nonexistent-dir-epo";
  CHECK_THROWS_AS(write_json_file(dir + "/x.json", nlohmann::json::object()), Error);
  const std::string path = "epo_test_out.json";
  write_json_file(path, {{"a", 1}});
  CHECK(read_json_file(path)["a"] == 1);
  std::ifstream tmp(path + ".tmp");
  CHECK(!tmp.good());
  std::remove(path.c_str());
}
