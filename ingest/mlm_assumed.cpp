// The settings a Megatron-LM argument list did not name, and the value EPO took for each. A full
// command line leaves them to argparse's defaults, which is what Megatron runs; a log excerpt
// whose arguments block lost a line (expert_model_parallel_size, say) leaves EPO to guess, and
// every guess is listed so that a prediction built on one is never silent.
#include <set>
#include <string>
#include <vector>

#include "ingest/mlm_table_detail.hpp"
#include "model/config_io.hpp"

namespace epo::ingest::detail {

namespace {

enum class When { always, moe, from_args, moe_from_args, fp8 };

/// One setting: the Megatron-LM dests that name it (any of them counts), the EPO key it sets
/// (a path into model::to_json(Config)), when it matters, and where the value comes from.
struct Setting {
  std::vector<const char*> dests;
  const char* key;
  When when;
  const char* origin;
};

constexpr const char* kMegatron = "Megatron-LM's default";

const std::vector<Setting>& settings() {
  // One setting a row or two.
  // clang-format off
  static const std::vector<Setting> s = {
      // Layout and batch.
      {{"tensor_model_parallel_size"}, "parallel.tp", When::always, kMegatron},
      {{"pipeline_model_parallel_size"}, "parallel.pp", When::always, kMegatron},
      {{"virtual_pipeline_model_parallel_size", "num_virtual_stages_per_pipeline_rank",
        "num_layers_per_virtual_pipeline_stage", "pipeline_model_parallel_layout"},
       "parallel.vpp", When::always, kMegatron},
      {{"context_parallel_size"}, "parallel.cp", When::always, kMegatron},
      {{"expert_model_parallel_size"}, "parallel.ep", When::moe, kMegatron},
      {{"expert_tensor_parallel_size"}, "parallel.etp", When::moe,
       "Megatron-LM's default (expert TP = TP)"},
      {{"sequence_parallel"}, "parallel.sequence_parallel", When::always, kMegatron},
      {{"micro_batch_size"}, "parallel.micro_batch_size", When::always, kMegatron},
      {{"global_batch_size"}, "parallel.global_batch_size", When::always,
       "Megatron-LM's default (micro_batch_size x data-parallel size)"},
      {{"seq_length"}, "parallel.seq_length", When::always,
       "EPO's --seq (Megatron-LM has no default)"},
      // MoE dispatch and overlap.
      {{"moe_token_dispatcher_type", "moe_enable_deepep"}, "options.dispatcher", When::moe,
       kMegatron},
      {{"overlap_moe_expert_parallel_comm"}, "options.overlap_moe_expert_parallel_comm",
       When::moe, kMegatron},
      {{"delay_wgrad_compute"}, "options.delay_wgrad_compute", When::moe, kMegatron},
      {{"moe_grouped_gemm"}, "options.moe_grouped_gemm", When::moe, kMegatron},
      {{"moe_permute_fusion"}, "options.moe_permute_fusion", When::moe, kMegatron},
      {{"moe_expert_capacity_factor"}, "options.capacity_factor", When::moe,
       "Megatron-LM's default (dropless)"},
      {{"moe_router_force_load_balancing"}, "options.routing.kind", When::moe,
       "EPO's --routing (Megatron-LM routes by the learned router)"},
      // Recomputation, CUDA graphs, precision, optimizer and gradients.
      {{"recompute_granularity", "recompute_activations", "checkpoint_activations"},
       "options.recompute_granularity", When::always, kMegatron},
      {{"cuda_graph_impl", "enable_cuda_graph", "external_cuda_graph"}, "options.cuda_graph_impl",
       When::always, kMegatron},
      {{"fp8", "fp8_format"}, "options.precision", When::always, kMegatron},
      {{"fp8_recipe"}, "options.fp8_recipe", When::fp8, kMegatron},
      {{"use_distributed_optimizer"}, "options.distributed_optimizer", When::always, kMegatron},
      {{"overlap_grad_reduce"}, "options.overlap_grad_reduce", When::always, kMegatron},
      {{"overlap_param_gather"}, "options.overlap_param_gather", When::always, kMegatron},
      {{"gradient_accumulation_fusion"}, "options.gradient_accumulation_fusion", When::always,
       kMegatron},
      {{"accumulate_allreduce_grads_in_fp32", "grad_reduce_in_fp32"},
       "options.grad_reduce_in_fp32", When::always, "Megatron-LM's default (fp32 with bf16)"},
      // Architecture, when the arguments define the model.
      {{"num_experts"}, "model.num_experts", When::from_args, "Megatron-LM's default (dense)"},
      {{"ffn_hidden_size"}, "model.ffn_hidden_size", When::from_args,
       "Megatron-LM's default (4 x hidden, 8/3 x hidden with SwiGLU)"},
      {{"group_query_attention", "num_query_groups"}, "model.num_query_groups", When::from_args,
       kMegatron},
      {{"kv_channels"}, "model.head_dim", When::from_args,
       "Megatron-LM's default (hidden / heads)"},
      {{"swiglu"}, "model.gated_linear_unit", When::from_args, kMegatron},
      {{"multi_latent_attention"}, "model.attention", When::from_args, kMegatron},
      {{"mtp_num_layers"}, "model.mtp_num_layers", When::from_args, kMegatron},
      {{"moe_router_topk"}, "model.router_topk", When::moe_from_args, kMegatron},
      {{"moe_ffn_hidden_size"}, "model.moe_ffn_hidden_size", When::moe_from_args,
       "Megatron-LM's default (ffn_hidden_size)"},
      {{"moe_layer_freq"}, "model.first_k_dense_layers", When::moe_from_args,
       "Megatron-LM's default (every layer MoE)"},
      {{"moe_shared_expert_intermediate_size"}, "model.shared_expert_ffn_hidden_size",
       When::moe_from_args, kMegatron},
      {{"moe_router_score_function"}, "model.score_function", When::moe_from_args, kMegatron},
  };
  // clang-format on
  return s;
}

const nlohmann::json* at_path(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json* at = &j;
  std::size_t from = 0;
  while (true) {
    const std::size_t dot = path.find('.', from);
    const std::string key = path.substr(from, dot == std::string::npos ? dot : dot - from);
    if (!at->is_object() || !at->contains(key)) return nullptr;
    at = &(*at)[key];
    if (dot == std::string::npos) return at;
    from = dot + 1;
  }
}

}  // namespace

std::vector<AssumedSetting> assumed_settings(const model::Config& c,
                                             const std::set<std::string>& given, bool from_args) {
  const bool moe = c.model.num_experts > 0;
  const nlohmann::json j = model::to_json(c);
  std::vector<AssumedSetting> out;
  for (const Setting& s : settings()) {
    if ((s.when == When::moe || s.when == When::moe_from_args) && !moe) continue;
    if ((s.when == When::from_args || s.when == When::moe_from_args) && !from_args) continue;
    if (s.when == When::fp8 && c.opt.precision != model::Precision::fp8) continue;
    bool named = false;
    for (const char* d : s.dests) named = named || given.count(d) > 0;
    if (named) continue;
    const nlohmann::json* v = at_path(j, s.key);
    std::string shown = v ? (v->is_string() ? v->get<std::string>() : v->dump()) : "?";
    out.push_back({s.dests.front(), s.key, shown, s.origin});
  }
  return out;
}

}  // namespace epo::ingest::detail

namespace epo::ingest {

std::string AssumedSetting::to_string() const {
  return argument + " not in the arguments: " + key + " = " + value + " (" + origin + ")";
}

}  // namespace epo::ingest
