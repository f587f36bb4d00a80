#include "ingest/mlm_args.hpp"

#include <sstream>

#include "ingest/arg_value.hpp"
#include "ingest/shell_words.hpp"
#include "model/error.hpp"

namespace epo::ingest {

namespace {

bool is_flag(const std::string& w) { return w.size() > 2 && w[0] == '-' && w[1] == '-' && w[2] != '-'; }
bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

bool is_launcher_flag(const std::string& d) {
  static const char* const kLauncher[] = {"nproc_per_node", "nnodes", "node_rank", "master_addr",
                                          "master_port", "rdzv_id", "rdzv_backend", "rdzv_endpoint",
                                          "rdzv_conf", "max_restarts", "standalone", "tee",
                                          "redirects", "log_dir", "role", "monitor_interval"};
  for (const char* k : kLauncher)
    if (d == k) return true;
  return false;
}

}  // namespace

std::vector<ArgValue> read_mlm_command_line(const std::string& text, const std::string& source,
                                            ReadReport& report) {
  std::vector<ArgValue> out;
  long long nproc = 0, nnodes = 0;
  for (const auto& [line_no, line] : logical_lines(text)) {
    std::vector<Word> w = shell_words(line);
    size_t start = 0;
    for (size_t i = 0; i < w.size(); ++i)
      if (!w[i].quoted && ends_with(w[i].text, ".py")) start = i + 1;
    const std::string where_line = source + " line " + std::to_string(line_no);
    for (size_t i = 0; i < w.size(); ++i) {
      const std::string& word = w[i].text;
      if (!is_flag(word)) continue;  // commands, assignments, launcher words, stray text
      std::string flag = word, value;
      bool has_value = false;
      const auto eq = flag.find('=');
      if (eq != std::string::npos) {
        value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
        has_value = true;
      } else {
        while (i + 1 < w.size() && !is_flag(w[i + 1].text) &&
               !(!w[i + 1].quoted && ends_with(w[i + 1].text, ".py"))) {
          value += (has_value ? " " : "") + w[++i].text;
          has_value = true;
        }
      }
      std::string dest = dest_of_flag(flag);
      const std::string where = where_line + " " + flag;
      if (is_launcher_flag(dest)) {
        const Value v(value, where);
        if (dest == "nproc_per_node" && v.raw() != "gpu") nproc = v.integer(0);
        if (dest == "nnodes" && value.find(':') == std::string::npos) nnodes = v.integer(0);
        continue;
      }
      if (i < start && start > 0 && !is_table_argument(dest)) continue;  // the launcher's own flags
      if (value.find('$') != std::string::npos) {
        report.warnings.push_back(where + ": value '" + value + "' is a shell variable; not read");
        continue;
      }
      if (!has_value) {
        if (dest.rfind("no_", 0) == 0 && (is_table_argument(dest.substr(3)) ||
                                          !is_known_megatron_argument(dest))) {
          dest = dest.substr(3);
          value = "False";
        } else {
          value = "True";
        }
      }
      out.push_back({dest, value, where});
    }
  }
  if (nproc > 0) {
    const long long world = nproc * (nnodes > 0 ? nnodes : 1);
    out.insert(out.begin(), {"world_size", std::to_string(world), source + " (launcher)"});
  }
  return out;
}

model::Config config_from_mlm_args(const model::Config& base, const std::string& text,
                                   const std::string& source, ReadReport& report) {
  const auto args = read_mlm_command_line(text, source, report);
  EPO_REQUIRE_INPUT(!args.empty(), source, ": no Megatron-LM arguments (--flag value) found");
  model::Config c = apply_megatron_args(base, args, Unset::megatron_defaults, report);
  const auto env = text.find("CUDA_DEVICE_MAX_CONNECTIONS=");
  if (env != std::string::npos) {
    const std::string rest = text.substr(env + 28, text.find_first_of(" \t\r\n;", env + 28) - env - 28);
    c.opt.cuda_device_max_connections = static_cast<int>(
        Value(rest, source + " CUDA_DEVICE_MAX_CONNECTIONS").integer(c.opt.cuda_device_max_connections));
  }
  return c;
}

std::string emit_mlm_model_args(const model::ModelSpec& m) {
  std::vector<std::string> a;
  auto num = [&](const char* k, long long v) { a.push_back(std::string(k) + " " + std::to_string(v)); };
  num("--num-layers", m.published_layers());
  num("--hidden-size", m.hidden_size);
  num("--num-attention-heads", m.num_attention_heads);
  if (m.num_query_groups > 0 && m.num_query_groups != m.num_attention_heads) {
    a.push_back("--group-query-attention");
    num("--num-query-groups", m.num_query_groups);
  }
  if (m.head_dim > 0) num("--kv-channels", m.head_dim);
  num("--ffn-hidden-size", m.ffn_hidden_size);
  if (m.attention == model::AttentionKind::mla) {
    a.push_back("--multi-latent-attention");
    if (m.mla.q_lora_rank > 0) num("--q-lora-rank", m.mla.q_lora_rank);
    num("--kv-lora-rank", m.mla.kv_lora_rank);
    num("--qk-head-dim", m.mla.qk_nope_head_dim);
    num("--qk-pos-emb-head-dim", m.mla.qk_rope_head_dim);
    num("--v-head-dim", m.mla.v_head_dim);
  }
  if (m.num_experts > 0) {
    num("--num-experts", m.num_experts);
    num("--moe-router-topk", m.router_topk);
    num("--moe-ffn-hidden-size", m.moe_ffn_hidden_size);
    if (m.shared_expert_ffn_hidden_size > 0)
      num("--moe-shared-expert-intermediate-size", m.shared_expert_ffn_hidden_size);
    if (m.router_num_groups > 0) num("--moe-router-num-groups", m.router_num_groups);
    if (m.router_group_topk > 0) num("--moe-router-group-topk", m.router_group_topk);
    if (m.first_k_dense_layers > 0)
      a.push_back("--moe-layer-freq \"([0]*" + std::to_string(m.first_k_dense_layers) + "+[1]*" +
                  std::to_string(m.num_moe_layers()) + ")\"");
    a.push_back(std::string("--moe-router-score-function ") +
                (m.score_function == model::ScoreFunction::sigmoid ? "sigmoid" : "softmax"));
  }
  if (m.mtp_num_layers > 0) num("--mtp-num-layers", m.mtp_num_layers);
  if (m.moe_latent_size > 0) num("--moe-latent-size", m.moe_latent_size);
  if (m.window_size > 0) {
    a.push_back("--window-size " + std::to_string(m.window_size - 1) + ",0");
    if (m.window_attn_skip_freq > 0) num("--window-attn-skip-freq", m.window_attn_skip_freq);
  }
  if (m.hybrid.enabled()) {
    const model::HybridSpec& y = m.hybrid;
    a.push_back("--is-hybrid-model");
    a.push_back("--hybrid-layer-pattern " + y.pattern);
    num("--mamba-num-heads", y.mamba_num_heads);
    num("--mamba-head-dim", y.mamba_head_dim);
    num("--mamba-state-dim", y.mamba_state_dim);
    num("--mamba-num-groups", y.mamba_num_groups);
  }
  if (m.gated_linear_unit) a.push_back(m.quick_geglu ? "--quick-geglu" : "--swiglu");
  else if (m.hybrid.enabled()) a.push_back("--squared-relu");
  if (m.activation_clamp > 0) {
    std::ostringstream v;
    v << m.activation_clamp;
    a.push_back("--activation-func-clamp-value " + v.str());
  }
  num("--vocab-size", m.vocab_size);
  num("--make-vocab-size-divisible-by", m.make_vocab_size_divisible_by);
  // What every preset shares and Megatron-LM's defaults do not (LayerNorm, learned absolute
  // positions, an output layer tied to the embedding).
  a.push_back("--normalization RMSNorm");
  a.push_back(m.hybrid.enabled() ? "--position-embedding-type none"  // Nemotron-H: no positions
               : m.yarn_rope     ? "--position-embedding-type yarn"
                                 : "--position-embedding-type rope");
  if (!m.tied_embeddings) a.push_back("--untie-embeddings-and-output-weights");
  std::ostringstream os;
  os << "# Megatron-LM model arguments: " << m.name << "\n";
  for (const auto& x : a) os << x << " \\\n";
  return os.str();
}

}  // namespace epo::ingest
