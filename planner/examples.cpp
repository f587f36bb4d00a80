// Each example is the smallest change from Megatron's defaults that runs overlap with one
// dispatcher: EP > 1, bf16, no full recompute, no shared-expert overlap, TE grouped GEMM, permute
// fusion, and CUDA_DEVICE_MAX_CONNECTIONS=32 so the comm stream has its own hardware queue.
// alltoall uses two nodes (overlap pays off once the all-to-all crosses the network); the flex
// backends one NVL8 node (DeepEP is reported to time out across nodes, HybridEP is slow past EP 8
// on NVL8).
#include "planner/examples.hpp"

#include "model/config_io.hpp"
#include "model/error.hpp"

namespace epo::planner {

std::vector<std::string> example_names() { return {"alltoall", "flex-deepep", "flex-hybridep"}; }

model::Config example_config(const std::string& name) {
  using namespace model;
  Config c;
  c.model_name = "qwen3-30b-a3b";
  c.model = load_model_preset(c.model_name);
  c.hardware_name = "h100-sxm";
  c.hw = load_hardware_preset(c.hardware_name);
  c.par.seq_length = 4096;
  c.par.micro_batch_size = 1;
  c.opt.overlap_moe_expert_parallel_comm = true;
  c.opt.delay_wgrad_compute = true;
  c.opt.cuda_device_max_connections = 32;
  if (name == "alltoall") {
    c.num_gpus = 16;
    c.par.ep = 16;
    c.opt.dispatcher = Dispatcher::alltoall;
  } else if (name == "flex-deepep") {
    c.num_gpus = 8;
    c.par.ep = 8;
    c.opt.dispatcher = Dispatcher::flex;
    c.opt.flex_backend = FlexBackend::deepep;
    c.opt.comm_sms = 20;
  } else if (name == "flex-hybridep") {
    c.num_gpus = 8;
    c.par.ep = 8;
    c.opt.dispatcher = Dispatcher::flex;
    c.opt.flex_backend = FlexBackend::hybridep;
    c.opt.comm_sms = 24;
  } else {
    throw EPO_INPUT_ERROR("--example: '", name,
                          "' is not allowed (allowed: alltoall|flex-deepep|flex-hybridep)");
  }
  c.par.global_batch_size = 32 * c.num_gpus;  // 32 micro-batches per rank
  c.derive_and_check();
  return c;
}

}  // namespace epo::planner
