#include "ingest_test_util.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config_checks.hpp"
#include "model/config_io.hpp"

namespace epo::ingest::test {

std::vector<std::string> preset_model_names() {
  const char* dir = std::getenv("EPO_PRESETS");
  REQUIRE(dir != nullptr);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(std::string(dir) + "/models"))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() >= 5);
  return names;
}

model::Config sample_config(const std::string& name, int variant) {
  model::Config c;
  c.model_name = name;
  c.model = model::load_model_preset(name);
  c.hardware_name = "h100-sxm";
  c.hw = model::load_hardware_preset("h100-sxm");
  c.num_gpus = 8;
  auto& p = c.par;
  auto& o = c.opt;
  p.ep = 1;
  while (p.ep < 8 && c.model.num_experts % (2 * p.ep) == 0) p.ep *= 2;
  p.global_batch_size = 64;
  p.seq_length = 4096 >> variant;
  if (variant == 0) {
    o.dispatcher = model::Dispatcher::alltoall;
    o.overlap_moe_expert_parallel_comm = true;
    o.delay_wgrad_compute = true;
    o.recompute_granularity = model::RecomputeGranularity::selective;
    o.recompute_modules = {"core_attn", "moe_act"};
    o.cuda_graph_impl = model::CudaGraphImpl::transformer_engine;
    o.cuda_graph_modules = {"attn", "moe_router"};
    o.precision = model::Precision::fp8;
    o.fp8_param_gather = true;  // what Bridge's FP8 presets set
    o.bf16_layers_start = o.bf16_layers_end = 1;  // and its Hopper (current-scaling) preset
  } else if (variant == 1) {
    p.tp = 2;
    p.etp = 1;
    p.sequence_parallel = true;
    p.micro_batch_size = 2;
    o.dispatcher = model::Dispatcher::flex;
    o.flex_backend = model::FlexBackend::hybridep;
    o.comm_sms = 16;
    o.moe_permute_fusion = false;
    o.recompute_granularity = model::RecomputeGranularity::full;
    o.recompute_method = "uniform";
    o.recompute_num_layers = 1;
    o.capacity_factor = 1.5;
    o.rank_capacity_factor = 1.25;
    o.paged_stash = true;
    o.distributed_optimizer = false;
    o.overlap_grad_reduce = false;
    o.gradient_accumulation_fusion = false;
  } else {
    o.dispatcher = model::Dispatcher::flex;
    o.flex_backend = model::FlexBackend::deepep;
    o.moe_shared_expert_overlap = false;
    o.high_priority_a2a_comm_stream = true;
    o.ep_overlap_early_attn_memory_release = true;
    o.overlap_moe_expert_parallel_comm = true;
  }
  c.derive_and_check();
  return c;
}

model::Config blank_base(const model::Config& c) {
  model::Config b;
  b.hardware_name = c.hardware_name;
  b.hw = c.hw;
  b.num_gpus = c.num_gpus;
  return b;
}

void check_same_model(const model::ModelSpec& a, const model::ModelSpec& b) {
  CHECK(a.num_layers == b.num_layers);
  CHECK(a.hidden_size == b.hidden_size);
  CHECK(a.num_attention_heads == b.num_attention_heads);
  CHECK(a.num_query_groups == b.num_query_groups);
  CHECK(a.head_dim == b.head_dim);
  CHECK(a.attention == b.attention);
  if (a.attention == model::AttentionKind::mla) {
    CHECK(a.mla.q_lora_rank == b.mla.q_lora_rank);
    CHECK(a.mla.kv_lora_rank == b.mla.kv_lora_rank);
    CHECK(a.mla.qk_nope_head_dim == b.mla.qk_nope_head_dim);
    CHECK(a.mla.qk_rope_head_dim == b.mla.qk_rope_head_dim);
    CHECK(a.mla.v_head_dim == b.mla.v_head_dim);
  }
  CHECK(a.vocab_size == b.vocab_size);
  CHECK(a.make_vocab_size_divisible_by == b.make_vocab_size_divisible_by);
  CHECK(a.ffn_hidden_size == b.ffn_hidden_size);
  CHECK(a.num_experts == b.num_experts);
  CHECK(a.router_topk == b.router_topk);
  CHECK(a.moe_ffn_hidden_size == b.moe_ffn_hidden_size);
  CHECK(a.shared_expert_ffn_hidden_size == b.shared_expert_ffn_hidden_size);
  CHECK(a.router_num_groups == b.router_num_groups);
  CHECK(a.router_group_topk == b.router_group_topk);
  CHECK(a.first_k_dense_layers == b.first_k_dense_layers);
  CHECK(a.mtp_num_layers == b.mtp_num_layers);
  CHECK(a.score_function == b.score_function);
  CHECK(a.window_size == b.window_size);
  CHECK(a.window_attn_skip_freq == b.window_attn_skip_freq);
  CHECK(a.gated_linear_unit == b.gated_linear_unit);
  CHECK(a.moe_latent_size == b.moe_latent_size);
  CHECK(a.hybrid.pattern == b.hybrid.pattern);
  CHECK(a.hybrid.mamba_num_heads == b.hybrid.mamba_num_heads);
  CHECK(a.hybrid.mamba_head_dim == b.hybrid.mamba_head_dim);
  CHECK(a.hybrid.mamba_state_dim == b.hybrid.mamba_state_dim);
  CHECK(a.hybrid.mamba_num_groups == b.hybrid.mamba_num_groups);
}

void check_same_settings(const model::Config& a, const model::Config& b) {
  CHECK(a.num_gpus == b.num_gpus);
  epo::config_checks::check_same_layout_and_options(a, b);
}

std::string read_fixture(const std::string& relative) {
  const char* dir = std::getenv("EPO_TEST_DATA");
  REQUIRE(dir != nullptr);
  std::ifstream in(std::string(dir) + "/" + relative, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

}  // namespace epo::ingest::test
