// The same configuration, two versions or front ends, two verdicts — where the reference (§2.2,
// §2.5) says the checks changed.
#include "catch.hpp"
#include "planner_test_util.hpp"

using namespace epo::planner;
using epo::model::Config;
using V = MegatronVersion;

namespace {
bool fires(const Config& c, ValidationContext x, const char* id) {
  return test::has_id(validate(c, x), id);
}
ValidationContext at(V v, Frontend f = Frontend::bridge) {
  ValidationContext x;
  x.megatron = v;
  x.frontend = f;
  return x;
}
}  // namespace

TEST_CASE("\"moe\" in recompute_modules is rejected from core_v0.17 on") {
  // core_v0.16.1's transformer_config.py has no such assert, core_v0.17.1's has (l.2124).
  Config c = example_config("alltoall");
  c.opt.recompute_granularity = epo::model::RecomputeGranularity::selective;
  c.opt.recompute_modules = {"moe"};
  CHECK_FALSE(fires(c, at(V::core_v0_16), "MCORE-OVL-RECOMPUTE-MOE"));
  CHECK(fires(c, at(V::core_v0_17), "MCORE-OVL-RECOMPUTE-MOE"));
  CHECK(fires(c, at(V::main), "MCORE-OVL-RECOMPUTE-MOE"));
}

TEST_CASE("MTP with overlap needs pp > 1 only in core_v0.16 and v0.17") {
  Config c = example_config("alltoall");
  c.model.mtp_num_layers = 1;
  CHECK_FALSE(fires(c, at(V::core_v0_15), "MCORE-OVL-MTP-PP"));
  CHECK(fires(c, at(V::core_v0_16), "MCORE-OVL-MTP-PP"));
  CHECK(fires(c, at(V::core_v0_17), "MCORE-OVL-MTP-PP"));
  CHECK_FALSE(fires(c, at(V::core_v0_18), "MCORE-OVL-MTP-PP"));
}

TEST_CASE("CUDA-graph checks with overlap: none before v0.16, local rejected in v0.16/v0.17") {
  Config c = example_config("alltoall");
  c.opt.cuda_graph_impl = epo::model::CudaGraphImpl::transformer_engine;
  c.opt.cuda_graph_modules = {"attn", "moe"};
  CHECK_FALSE(fires(c, at(V::core_v0_15), "MCORE-OVL-CUDA-GRAPH-SCOPE"));
  CHECK(fires(c, at(V::core_v0_16), "MCORE-OVL-CUDA-GRAPH-SCOPE"));
  c.opt.cuda_graph_impl = epo::model::CudaGraphImpl::local;
  c.opt.cuda_graph_modules = {"attn"};
  CHECK(fires(c, at(V::core_v0_16), "MCORE-OVL-CUDA-GRAPH-IMPL"));
  CHECK_FALSE(fires(c, at(V::core_v0_18), "MCORE-OVL-CUDA-GRAPH-IMPL"));
}

TEST_CASE("legacy grouped GEMM blocks delayed wgrad up to core_v0.16") {
  Config c = example_config("alltoall");
  ValidationContext x = at(V::core_v0_16);
  x.moe_use_legacy_grouped_gemm = true;
  CHECK(fires(c, x, "MCORE-DELAY-WGRAD-LEGACY-GG"));
  x.megatron = V::core_v0_17;
  CHECK_FALSE(fires(c, x, "MCORE-DELAY-WGRAD-LEGACY-GG"));
}

TEST_CASE("HybridEP and early release exist from core_v0.16 on") {
  Config c = example_config("flex-hybridep");
  CHECK(has_errors(validate(c, at(V::core_v0_14))));
  CHECK(fires(c, at(V::core_v0_15), "MCORE-FLEX-HYBRIDEP-VERSION"));
  CHECK_FALSE(has_errors(validate(c, at(V::core_v0_16))));
  Config e = example_config("alltoall");
  e.opt.ep_overlap_early_attn_memory_release = true;
  CHECK(fires(e, at(V::core_v0_15), "MCORE-EARLY-RELEASE-VERSION"));
  CHECK_FALSE(has_errors(validate(e, at(V::core_v0_16))));
}

TEST_CASE("TE 2.7 with delay_wgrad and overlap_grad_reduce: Bridge accepts, Megatron-LM args reject") {
  Config c = example_config("alltoall");
  ValidationContext bridge = at(V::main, Frontend::bridge), mlm = at(V::main, Frontend::mlm);
  bridge.te = mlm.te = {2, 7};
  CHECK_FALSE(has_errors(validate(c, bridge)));
  CHECK(fires(c, mlm, "MLM-DELAY-WGRAD-OGR-TE"));
}

TEST_CASE("graph-scope checks: Bridge always, Megatron-LM only with overlap_grad_reduce") {
  Config c = example_config("alltoall");
  c.opt.cuda_graph_impl = epo::model::CudaGraphImpl::transformer_engine;
  c.opt.cuda_graph_modules = {"attn"};
  c.opt.overlap_grad_reduce = false;
  ValidationContext bridge = at(V::main, Frontend::bridge), mlm = at(V::main, Frontend::mlm);
  bridge.te = mlm.te = {2, 11};
  CHECK(fires(c, bridge, "BRIDGE-DELAY-WGRAD-GRAPH-TE"));
  CHECK_FALSE(fires(c, mlm, "MLM-DELAY-WGRAD-GRAPH-TE"));
}

TEST_CASE("TP > 1 without overlap on Hopper: Megatron-LM needs CDMC=1, Bridge does not check") {
  Config c = test::make_config("qwen3-30b-a3b", "h100-sxm", 16, 2, 1, 1, 16, 512);
  c.opt.cuda_device_max_connections = 32;
  CHECK(fires(c, at(V::main, Frontend::mlm), "MLM-CDMC-TP-CP"));
  CHECK_FALSE(fires(c, at(V::main, Frontend::bridge), "MLM-CDMC-TP-CP"));
}

TEST_CASE("the examples validate in every version that has their backend") {
  for (const auto& name : example_names()) {
    const Config c = example_config(name);
    for (int v = 0; v < kNumMegatronVersions; ++v) {
      for (auto fe : {Frontend::bridge, Frontend::mlm}) {
        const auto ver = static_cast<V>(v);
        if (name == "flex-hybridep" && v < static_cast<int>(V::core_v0_16)) continue;
        INFO(name << " " << to_string(ver) << " " << to_string(fe));
        const auto vs = validate(c, at(ver, fe));
        CHECK_FALSE(has_errors(vs));
        CHECK(vs.empty());  // not even a warning
      }
    }
  }
}
