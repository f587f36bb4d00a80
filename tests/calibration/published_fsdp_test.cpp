// epo calibrate published: a Megatron-FSDP row mapped with the sharding its recipe runs.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calibration/published.hpp"
#include "catch.hpp"

using namespace epo;
using namespace epo::calib;

TEST_CASE("a Megatron-FSDP row runs its recipe's sharding, HSDP where the cited recipe sets it",
          "[published][fsdp]") {
  ClusterMap clusters;
  clusters.datasheet_only = true;
  nlohmann::json row = {{"id", "u"},
                        {"model", "Nemotron-3-Ultra"},
                        {"system", "DGX-GB300"},
                        {"gpus", 256},
                        {"precision", "MXFP8"},
                        {"seq", 8192},
                        {"gbs", 256},
                        {"mbs", 1},
                        {"tp", 1},
                        {"pp", 1},
                        {"ep", 64},
                        {"dispatcher", "flex"},
                        {"flex_backend", "hybridep"},
                        {"tflops_per_gpu", 1281},
                        {"source_type", "megatron-bridge-performance-summary"},
                        {"phase", "pretrain"},
                        {"status", "current"}};
  row["other_settings"] = {
      {"recipe_assignments",
       {{"ddp.use_megatron_fsdp", true},
        {"model.fine_grained_activation_offloading", true},
        {"model.offload_modules", {"fused_group_mlp"}}}}};
  // Without the recipe it came from: one instance, said as an assumption.
  const PublishedRow plain = map_published_row(row, clusters);
  REQUIRE(plain.config);
  CHECK(plain.config->opt.megatron_fsdp);
  CHECK(plain.config->opt.distributed_optimizer);
  CHECK(plain.config->opt.fsdp_sharding == model::FsdpSharding::optim_grads_params);
  CHECK(plain.config->opt.distributed_optimizer_instances == 1);
  CHECK(plain.config->opt.offload_modules == std::vector<std::string>{"fused_group_mlp"});
  REQUIRE_FALSE(plain.assumptions.empty());
  CHECK(plain.assumptions.back().find("not recorded") != std::string::npos);
  // Bridge's Nemotron-3-Ultra recipe shards inside 64-GPU NVLink domains.
  row["recipe_source"] = {{"function", "nemotron_3_ultra_pretrain_256gpu_gb300_fp8mx_config"}};
  const PublishedRow hsdp = map_published_row(row, clusters);
  REQUIRE(hsdp.config);
  CHECK(hsdp.config->opt.distributed_optimizer_instances == 4);
  CHECK(hsdp.config->opt.fsdp_outer_optim);
  // A strategy or an instance count the recipe names wins; a strategy Megatron lacks is refused.
  row["other_settings"]["recipe_assignments"]["ddp.data_parallel_sharding_strategy"] = "optim_grads";
  row["other_settings"]["recipe_assignments"]["ddp.num_distributed_optimizer_instances"] = 2;
  const PublishedRow named = map_published_row(row, clusters);
  REQUIRE(named.config);
  CHECK(named.config->opt.fsdp_sharding == model::FsdpSharding::optim_grads);
  CHECK(named.config->opt.distributed_optimizer_instances == 2);
  row["other_settings"]["recipe_assignments"]["ddp.data_parallel_sharding_strategy"] = "zero3";
  const PublishedRow bad = map_published_row(row, clusters);
  CHECK_FALSE(bad.config);
  CHECK(bad.unsupported.find("zero3") != std::string::npos);
}
