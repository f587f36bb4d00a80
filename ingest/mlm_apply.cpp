// Applying Megatron-LM arguments through the table: Megatron's defaults for what is not named, then
// the settings that depend on several arguments (query groups, FFN widths, vocabulary, layer
// pattern, dispatcher backend, CUDA-graph scope, GPUs).
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "ingest/layer_pattern.hpp"
#include "ingest/mlm_table_detail.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/pipeline_layout.hpp"

namespace epo::ingest {

namespace detail {
const std::set<std::string>& known_megatron_names();
}  // namespace detail

namespace {

using detail::TableState;

const std::map<std::string, const detail::Row*>& rows_by_dest() {
  static const auto m = [] {
    std::map<std::string, const detail::Row*> r;
    for (const auto& row : detail::table_rows()) r[row.dest] = &row;
    return r;
  }();
  return m;
}

/// Megatron-LM's defaults for every option and layout field the table sets.
void megatron_defaults(model::Config& c) {
  model::Options o;
  o.dispatcher = model::Dispatcher::allgather;
  o.fp8_recipe = model::Fp8Recipe::delayed;  // --fp8-recipe's default (TransformerConfig's too)
  o.cross_entropy_fusion = false;
  o.cross_entropy_te = false;  // --cross-entropy-fusion-impl native
  o.fused_weighted_squared_relu = false;
  o.moe_permute_fusion = false;
  o.moe_grouped_gemm = false;
  o.distributed_optimizer = false;
  o.overlap_grad_reduce = false;
  o.overlap_param_gather = false;
  o.attention_dropout = o.hidden_dropout = 0.1;
  o.cuda_device_max_connections = c.opt.cuda_device_max_connections;  // environment, not arguments
  o.routing = c.opt.routing;
  o.expert_gemm = c.opt.expert_gemm;
  c.opt = o;
  model::Parallel p;
  p.seq_length = c.par.seq_length;
  c.par = p;
}

/// A transformer as Megatron-LM builds it when only the named fields are given.
model::ModelSpec megatron_model() {
  model::ModelSpec m;
  m.name = "megatron-args";
  m.gated_linear_unit = false;
  m.router_topk = 2;
  m.mla = {0, 512, 128, 64, 128};
  return m;
}

/// A hybrid model (Megatron's hybrid_layer_pattern): '|' marks pipeline stage breaks, each '/'
/// part after the main layers one MTP depth; Mamba heads default to twice the hidden size over
/// the head width (MambaMixer's expand of 2).
void finish_hybrid(TableState& s, const std::map<std::string, Value>& given) {
  auto& m = s.c.model;
  const std::string where = given.count("hybrid_layer_pattern")
                                ? given.at("hybrid_layer_pattern").where()
                                : given.at("hybrid_override_pattern").where();
  // 0: not in the arguments (Megatron's default); any other value is checked as given.
  const int asked = m.num_layers;
  const int layers = model::apply_megatron_hybrid(m, s.hybrid_pattern, s.mamba_heads,
                                                  s.mamba_head_dim, s.mamba_state, s.mamba_groups,
                                                  where);
  // The pattern sets the layer count; Megatron-LM warns and ignores a --num-layers that differs.
  if (given.count("num_layers") && asked != layers && s.report)
    s.report->warnings.push_back(where + ": the hybrid pattern's " + std::to_string(layers) +
                                 " layers used, num_layers = " + std::to_string(asked) +
                                 " ignored (as Megatron-LM does)");
}

/// Sliding-window attention: Megatron's window_size "(left, right)" (a query sees left + right + 1
/// keys) and window_attn_skip_freq, an integer N (every N-th layer full) or a list expression of
/// 1 (windowed) and 0 (full), kept as the integer with the same share of full layers.
void finish_window(TableState& s, const std::map<std::string, Value>& given) {
  auto& m = s.c.model;
  if (given.count("window_size")) {
    const Value& v = given.at("window_size");
    std::string t;
    for (char ch : s.window)
      if (ch != '(' && ch != ')' && ch != '[' && ch != ']' && ch != ' ' && ch != '"' && ch != '\'')
        t += ch;
    m.window_size = 0;
    if (!t.empty() && t != "None") {
      long long keys = 1;
      std::size_t at = 0;
      for (int side = 0; side < 2; ++side) {
        const std::size_t end = t.find(',', at);
        const std::string part = t.substr(at, end == std::string::npos ? end : end - at);
        const long long n = Value(part, v.where()).integer(-1);
        // Each side at most 2^23: the window (their sum + 1) stays in the model file's range.
        EPO_REQUIRE_INPUT(
            n >= -1 && n < (1 << 23), v.where(), ": '", v.raw(),
            "' is not a window (allowed: two integers 'left,right', each -1..2^23-1)");
        // -1 (no limit on that side) leaves the causal side unbounded: full attention.
        if (n < 0 && side == 0) keys = -1;
        if (keys > 0) keys += std::max(0LL, n);
        if (end == std::string::npos) break;
        at = end + 1;
      }
      if (keys > 0) m.window_size = static_cast<int>(keys);
    }
  }
  m.window_attn_skip_freq = 0;
  if (!s.window_skip.empty() && m.window_size > 0) {
    const Value& v = given.at("window_attn_skip_freq");
    const std::string& t = s.window_skip;
    if (t.find_first_not_of("0123456789 ") == std::string::npos) {
      const long long n = v.integer(0);
      EPO_REQUIRE_INPUT(n >= 0 && n <= 1000, v.where(), ": '", v.raw(),
                        "' is not a layer frequency (allowed: 0..1000 or a list)");
      m.window_attn_skip_freq = static_cast<int>(n);
    } else {
      const std::vector<int> pat = moe_layer_pattern(t, m.num_layers, v.where());
      const int full = static_cast<int>(std::count(pat.begin(), pat.end(), 0));
      if (full > 0) {
        m.window_attn_skip_freq = std::max(1, static_cast<int>(std::lround(
                                                  static_cast<double>(m.num_layers) / full)));
        if (m.windowed_layers() != m.num_layers - full && s.report)
          s.report->warnings.push_back(
              v.where() + ": " + std::to_string(full) + " full-attention layers modelled as every " +
              std::to_string(m.window_attn_skip_freq) + "-th layer");
      }
    }
  }
}

void finish_model(TableState& s, bool from_args, const std::map<std::string, Value>& given) {
  auto& m = s.c.model;
  auto has = [&](const char* k) { return given.count(k) > 0; };
  if (from_args || has("group_query_attention") || has("num_query_groups"))
    m.num_query_groups = s.gqa ? std::max(1, s.query_groups) : m.num_attention_heads;
  if (s.kv_channels > 0) m.head_dim = s.kv_channels;
  else if (from_args && m.num_attention_heads > 0) m.head_dim = m.hidden_size / m.num_attention_heads;
  if (s.ffn > 0) m.ffn_hidden_size = s.ffn;
  else if (from_args)  // Megatron: 4h, or two thirds of it rounded down to 64 with SwiGLU
    m.ffn_hidden_size = m.gated_linear_unit ? 4 * m.hidden_size * 2 / 3 / 64 * 64 : 4 * m.hidden_size;
  if (s.moe_ffn > 0) m.moe_ffn_hidden_size = s.moe_ffn;
  else if (from_args) m.moe_ffn_hidden_size = m.ffn_hidden_size;
  if (s.vocab_divisible > 0) m.make_vocab_size_divisible_by = s.vocab_divisible;
  if (s.vocab > 0) {
    m.vocab_size = s.vocab;
  } else if (s.padded_vocab > 0) {
    m.vocab_size = s.padded_vocab;
  } else if (from_args || has("tokenizer_type")) {
    const std::string& t = s.tokenizer;
    int v = 0;
    if (s.vocab_file && (t.empty() || t == "GPT2BPETokenizer")) v = 50257;
    else if (t == "Llama2Tokenizer") v = 32000;
    else if (t == "TikTokenizer") v = 131072;
    if (v == 0 && from_args) {
      v = 32000;
      s.report->warnings.push_back("vocabulary not in the arguments (tokenizer '" + t +
                                   "'): 32000 assumed; give --vocab-size to set it");
    }
    if (v > 0) m.vocab_size = v;
  }
  if (m.num_experts > 0 && !s.layer_freq.empty()) {
    const std::vector<int> pat =
        moe_layer_pattern(s.layer_freq, m.num_layers, given.at("moe_layer_freq").where());
    const int lead = static_cast<int>(std::find(pat.begin(), pat.end(), 1) - pat.begin());
    const int dense = static_cast<int>(std::count(pat.begin(), pat.end(), 0));
    if (dense != lead)
      s.report->warnings.push_back("moe_layer_freq '" + s.layer_freq + "': " + std::to_string(dense) +
                                   " dense layers modelled as the first ones (EPO places dense layers first)");
    m.first_k_dense_layers = dense;
  } else if (from_args) {
    m.first_k_dense_layers = 0;
  }
  if (m.num_experts == 0) m.first_k_dense_layers = 0;
  if (!s.hybrid_pattern.empty()) finish_hybrid(s, given);
  if (has("window_size") || has("window_attn_skip_freq")) finish_window(s, given);
  else if (from_args) m.window_size = m.window_attn_skip_freq = 0;
  // Biases only where the arguments say so: Megatron-LM's default carries them, but MoE runs
  // disable them (TE's grouped MLP refuses them with the default bias-dropout fusion) and a log's
  // partial argument list may simply not show --disable-bias-linear.
  if (from_args && !has("add_bias_linear") && !has("disable_bias_linear")) m.linear_bias = false;
  // Megatron-LM's own default for the fusion when the arguments build the model (on).
  if (from_args && !has("bias_dropout_fusion")) s.c.opt.bias_dropout_fusion = 1;
  s.c.opt.bias_activation_fusion = m.gated_linear_unit ? s.swiglu_fusion : s.gelu_fusion;
  // Megatron-LM ties the output layer to the embedding unless told otherwise.
  if (from_args && !has("untie_embeddings_and_output_weights")) m.tied_embeddings = true;
}

void finish_layout(TableState& s, Unset unset, const std::map<std::string, Value>& given) {
  auto& p = s.c.par;
  auto& o = s.c.opt;
  if (s.etp > 0) p.etp = s.etp;
  else if (unset == Unset::megatron_defaults) p.etp = p.tp;  // expert TP defaults to TP
  if (s.layers_per_virtual_stage > 0 && p.pp > 1)
    p.vpp = std::max(1, s.c.model.num_layers / p.pp / s.layers_per_virtual_stage);
  if (!p.pipeline_layout.empty()) {
    const auto stages = model::parse_pipeline_layout(p.pipeline_layout);
    if (p.pp > 0 && static_cast<int>(stages.size()) % p.pp == 0)
      p.vpp = static_cast<int>(stages.size()) / p.pp;
  }
  if (s.enable_deepep) {
    o.dispatcher = model::Dispatcher::flex;
    o.flex_backend = model::FlexBackend::deepep;
  } else if (!s.flex_backend.empty()) {
    o.flex_backend = model::parse_flex_backend(s.flex_backend, given.at("moe_flex_dispatcher_backend").where());
  }
  const int backend_sms = o.flex_backend == model::FlexBackend::deepep ? s.deepep_sms : s.hybridep_sms;
  const int sms = s.flex_sms >= 0 ? s.flex_sms : backend_sms;
  if (o.dispatcher != model::Dispatcher::flex) o.comm_sms = 0;
  else if (sms >= 0) o.comm_sms = sms;
  if (!s.graph_scope.empty()) {
    const Value scope(s.graph_scope, "cuda_graph_scope");
    const auto w = scope.words();
    if (std::find(w.begin(), w.end(), "full_iteration") != w.end()) {
      o.cuda_graph_impl = model::CudaGraphImpl::full_iteration;
      o.cuda_graph_modules.clear();
    } else if (w.size() == 1 && w[0] == "full") {
      o.cuda_graph_modules.clear();  // whole layers (before the per-module scopes)
    } else {
      o.cuda_graph_modules = w;
    }
  }
  if (unset == Unset::megatron_defaults || s.precision_aware) o.adam_moments_bf16 = s.precision_aware && s.bf16_moments;
  if (s.manual_gc) o.manual_gc_interval = s.manual_gc_interval;
  else if (unset == Unset::megatron_defaults) o.manual_gc_interval = 0;
  // Megatron offloads the listed modules only with the feature on.
  if (s.offload == 1) o.offload_modules = s.offload_modules;
  else if (s.offload == 0 || unset == Unset::megatron_defaults) o.offload_modules.clear();
  if (s.first_last_bf16) {
    o.bf16_layers_start = s.bf16_at_start;
    o.bf16_layers_end = s.bf16_at_end;
  } else if (unset == Unset::megatron_defaults) {
    o.bf16_layers_start = o.bf16_layers_end = 0;
  }
  if (unset == Unset::megatron_defaults && !o.quantized() && !s.saw_bf16)
    s.report->warnings.push_back(s.saw_fp16 ? "fp16 training modelled as bf16"
                                            : "neither --bf16 nor --fp16: Megatron-LM trains in "
                                              "fp32, EPO models bf16");
  const long long model_parallel = static_cast<long long>(p.tp) * p.pp * p.cp;
  if (s.world_size > 0) s.c.num_gpus = s.world_size;
  else if (s.data_parallel > 0) s.c.num_gpus = static_cast<int>(s.data_parallel * model_parallel);
  else if (unset == Unset::megatron_defaults)
    s.report->warnings.push_back("the number of GPUs is not in the arguments: " +
                                 std::to_string(s.c.num_gpus) + " taken from --gpus");
  if (p.global_batch_size == 0 && model_parallel > 0)  // Megatron: one micro-batch per DP rank
    p.global_batch_size = static_cast<int>(p.micro_batch_size * (s.c.num_gpus / model_parallel));
}

}  // namespace

std::string dest_of_flag(const std::string& flag) {
  std::string d = flag.substr(flag.find_first_not_of('-') == std::string::npos ? flag.size()
                                                                               : flag.find_first_not_of('-'));
  std::replace(d.begin(), d.end(), '-', '_');
  return d;
}

bool is_table_argument(const std::string& dest) { return rows_by_dest().count(dest) > 0; }

bool is_known_megatron_argument(const std::string& dest) {
  const auto& names = detail::known_megatron_names();
  if (names.count(dest)) return true;
  return dest.rfind("no_", 0) == 0 && names.count(dest.substr(3)) > 0;
}

model::Config apply_megatron_args(const model::Config& base, const std::vector<ArgValue>& args,
                                  Unset unset, ReadReport& report) {
  std::map<std::string, Value> given;  // the last value of each argument wins, as in argparse
  std::set<std::string> listed;
  for (const auto& a : args) {
    const bool table = is_table_argument(a.name);
    if (table) given.insert_or_assign(a.name, Value(a.value, a.where));
    if (!listed.insert(a.name).second) continue;
    if (table) report.read.push_back(a.name);
    else if (is_known_megatron_argument(a.name)) report.ignored.push_back(a.name);
    else report.unknown.push_back(a.name);
  }
  // Arguments that change the real run in ways the model does not cost: said, not dropped.
  std::map<std::string, std::string> last;
  for (const auto& a : args) last[a.name] = a.value;
  for (const auto& [name, value] : last) {
    const std::string why = detail::not_modelled_reason(name, value);
    if (why.empty()) continue;
    report.not_modelled.push_back(name + " = " + value + ": " + why);
    auto& ig = report.ignored;
    ig.erase(std::remove(ig.begin(), ig.end(), name), ig.end());
  }
  auto non_none = [&](const char* k) { return given.count(k) && !given.at(k).is_none(); };
  const bool from_args = non_none("num_layers") && non_none("hidden_size") && non_none("num_attention_heads");
  TableState s;
  s.c = base;
  s.report = &report;
  if (unset == Unset::megatron_defaults) megatron_defaults(s.c);
  if (from_args) {
    s.c.model = megatron_model();
    s.c.model_name = s.c.model.name;
  }
  s.gqa = s.c.model.num_query_groups > 0 && s.c.model.num_query_groups != s.c.model.num_attention_heads;
  s.query_groups = s.c.model.num_query_groups;
  for (const auto& row : detail::table_rows()) {
    const auto it = given.find(row.dest);
    if (it != given.end()) row.apply(s, it->second);
  }
  finish_model(s, from_args, given);
  finish_layout(s, unset, given);
  if (unset == Unset::megatron_defaults) {
    std::set<std::string> named;
    for (const auto& g : given) named.insert(g.first);
    report.assumed = detail::assumed_settings(s.c, named, from_args);
  }
  return s.c;
}

}  // namespace epo::ingest
