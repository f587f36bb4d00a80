// Published per-op benchmarks: reading op_benchmarks.jsonl and mapping each row to the
// configuration of its op.
#include "calibration/op_bench.hpp"

#include <algorithm>
#include <cmath>
#include <regex>

#include "calibration/published_detail.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"

namespace epo::calib {

namespace {

using namespace detail;

/// Bytes per hidden element of an FP8 row: the e4m3 payload and one FP32 scale per 128
/// elements, as DeepEP's and HybridEP's tests count it ((1 + 4 / 128) / 2 of BF16).
constexpr double kFp8RowBytes = 1.0 + 4.0 / 128.0;

struct SystemOf {
  std::string label, cluster;
  double nvlink_gbps = 0;  ///< > 0: NVLink per direction differs from the preset's
  std::string note;
};

SystemOf system_of(const std::string& published) {
  const std::string s = lower(published);
  if (contains(s, "gb200")) return {"GB200", "gb200-nvl72", 0, ""};
  if (contains(s, "b200")) return {"B200", "dgx-b200", 0, ""};
  if (contains(s, "h100")) return {"H100", "dgx-h100", 0, ""};
  if (contains(s, "h800"))
    return {"H800", "dgx-h100", 200,
            "H800 as dgx-h100 with NVLink 200 GB/s per direction (H800 SXM: 400 GB/s "
            "bidirectional; one 400 Gb/s ConnectX-7 per GPU as on DGX H100)"};
  if (contains(s, "sm100")) return {"SM100", "dgx-b200", 0, "SM100 (GPU not named) as dgx-b200"};
  if (contains(s, "sm90"))
    return {"SM90", "dgx-h100", 0, "SM90 (GPU not named) as dgx-h100 (with CX7 400 Gb/s)"};
  return {"", "", 0, ""};
}

/// All integers in `s`, in order ("EP 8 x 2" -> 8, 2).
std::vector<int> integers_in(const std::string& s) {
  std::vector<int> v;
  static const std::regex kInt("[0-9]+");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kInt); it != std::sregex_iterator(); ++it)
    v.push_back(std::stoi(it->str()));
  return v;
}

/// A "name N" figure of the notes ("moe_ffn 2048"); `fallback` when absent.
int note_int(const std::string& notes, const char* pattern, int fallback) {
  std::smatch m;
  if (std::regex_search(notes, m, std::regex(pattern))) return std::stoi(m[1].str());
  return fallback;
}

model::ModelSpec op_model(int hidden, int experts, int topk, int moe_ffn) {
  model::ModelSpec m;
  m.name = "op-benchmark";
  m.num_layers = 1;
  m.hidden_size = hidden;
  m.head_dim = 128;  // attention is not part of these ops; any valid shape
  m.num_attention_heads = std::max(1, hidden / 128);
  m.num_query_groups = m.num_attention_heads;
  m.vocab_size = 32768;
  m.num_experts = experts;
  m.router_topk = topk;
  m.moe_ffn_hidden_size = moe_ffn;
  return m;
}

}  // namespace

OpBenchRow::OpBenchRow() : published(kNaN) {}

std::string OpBenchRow::group() const {
  return (library_label.empty() ? library : library_label) + "|" +
         (system_label.empty() ? system : system_label) + "|" + kind;
}

void set_row_profile(OpBenchRow& row, const model::HardwareProfile& hw) {
  if (!row.config) return;
  row.config->hw = hw;
  row.profile_nvlink_gbps = hw.nvlink_gbps;
  if (row.nvlink_gbps_override > 0) row.config->hw.nvlink_gbps = row.nvlink_gbps_override;
}

OpBenchRow map_op_benchmark_row(const nlohmann::json& j, const ClusterMap& clusters) {
  OpBenchRow r;
  r.id = str_field(j, "id");
  r.library = str_field(j, "library");
  r.system = str_field(j, "system");
  r.kind = str_field(j, "kind");
  r.measurement = str_field(j, "measurement");
  r.metric = str_field(j, "metric");
  r.unit = str_field(j, "unit");
  r.dtype = str_field(j, "dtype");
  r.published = num_field(j, "value");
  const std::string lib = lower(r.library), notes = str_field(j, "notes");
  auto reject = [&](std::string why) {
    r.unsupported = std::move(why);
    return r;
  };
  const SystemOf sys = system_of(r.system);
  r.system_label = sys.label;
  r.cluster = sys.cluster;
  r.nvlink_gbps_override = sys.nvlink_gbps;
  const bool layer = r.kind == "moe_layer_forward" || r.kind == "moe_layer_backward";
  std::string backend;
  if (lib == "hybridep" || lib == "flex+hybridep")
    backend = "hybridep";
  else if (lib == "deepep" || lib == "flex+deepep" || contains(lib, "deepep v1 normal") ||
           contains(lib, "deepep v2") || contains(lib, "mnnvl"))
    backend = "deepep";
  else if (lib == "alltoall")
    backend = "alltoall";
  r.library_label = lib == "deepep"                     ? "DeepEP"
                    : contains(lib, "deepep v1 normal") ? "DeepEP V1"
                    : contains(lib, "deepep v2")        ? "DeepEP V2"
                    : contains(lib, "low-latency")      ? "DeepEP V1 low-latency"
                    : contains(lib, "mnnvl")            ? "DeepEP MNNVL"
                    : contains(lib, "grouped gemm")     ? "grouped GEMM"
                    : lib == "hybridep"                 ? "HybridEP"
                                                        : r.library;
  if (!std::isfinite(r.published)) return reject("value not published as a number");
  if (contains(lib, "low-latency"))
    return reject(
        "low-latency (inference decoding) kernels are not modelled: EPO costs the "
        "normal kernels Megatron trains with");
  if (r.kind == "moe_layer_max")
    return reject(
        "peak memory of the single-layer test harness: EPO's memory model is that of a "
        "training step (all layers, optimizer state), not of one layer under a harness");
  if (r.kind == "grouped_gemm")
    return reject(
        "grouped GEMM throughput: the rows per expert (M) and the expert count are "
        "not published");
  if (r.kind != "dispatch" && r.kind != "combine" && !layer)
    return reject("kind '" + r.kind + "' is not an op EPO costs");
  if (backend.empty()) return reject("library '" + r.library + "' is not modelled");
  if (sys.cluster.empty()) return reject("system '" + r.system + "' not known");
  if (!sys.note.empty()) r.assumptions.push_back(sys.note);
  for (const char* key : {"tokens", "hidden", "topk", "ranks"})
    if (!j.contains(key) || j[key].is_null())
      return reject(std::string("shape not published (") + key + " missing)");

  // Ranks: a number, or "EP 8 x 2" (8 ranks in each of 2 nodes).
  std::vector<int> rank_parts = j["ranks"].is_number() ? std::vector<int>{int_field(j, "ranks", 0)}
                                                       : integers_in(str_field(j, "ranks"));
  int ranks = 1;
  for (int x : rank_parts) ranks *= x;
  if (rank_parts.empty() || ranks < 1 || ranks > 4096)
    return reject("ranks not understood: " + j["ranks"].dump());
  r.ranks = ranks;
  const int tokens = int_field(j, "tokens", 0), hidden = int_field(j, "hidden", 0),
            topk = int_field(j, "topk", 0);
  if (tokens < 1 || hidden < 128 || hidden % 128 != 0 || topk < 1)
    return reject("shape out of range (tokens, hidden a multiple of 128, top-k)");

  // Experts: "8 local experts" per rank, a total, or the test's default.
  int experts = 0;
  const nlohmann::json ex =
      j.contains("experts_or_local_experts") ? j["experts_or_local_experts"] : nlohmann::json();
  const double ex_n = number_of(ex);
  if (std::isfinite(ex_n) && ex_n >= 1)
    experts = static_cast<int>(ex_n) *
              (ex.is_string() && contains(lower(ex.get<std::string>()), "local") ? ranks : 1);
  if (experts == 0 && backend == "deepep") {
    experts = 256;
    r.assumptions.push_back("256 experts (not published; DeepEP's tests' default)");
  }
  if (experts < topk || experts % ranks != 0)
    return reject("expert count not published or not divisible by the ranks");

  model::Config c;
  c.model_name = "op-benchmark";
  try {
    c.hardware_name = sys.cluster;
    c.hw = clusters.profile(sys.cluster);
  } catch (const Error& e) {
    return reject(e.what());
  }
  c.num_gpus = ranks;
  c.par.ep = ranks;
  c.par.seq_length = tokens;
  c.par.micro_batch_size = 1;
  auto& o = c.opt;
  o.routing.kind = model::RoutingKind::uniform;
  if (backend == "alltoall") {
    o.dispatcher = model::Dispatcher::alltoall;
  } else {
    o.dispatcher = model::Dispatcher::flex;
    o.flex_backend =
        backend == "hybridep" ? model::FlexBackend::hybridep : model::FlexBackend::deepep;
  }

  if (layer) {
    // Megatron-LM's moe_perf cases: one MoE layer, TP1 EP8, force-balanced routing; the
    // expert width is in the notes. The notes name the DeepSeek proxy's shared expert too, but
    // the benchmark's TransformerConfig is built without it (moe_perf/__main__.py,
    // _build_transformer_config passes no moe_shared_expert_intermediate_size): op_model's
    // layer has none either.
    const int moe_ffn = note_int(notes, "moe_ffn ([0-9]+)", 0);
    if (moe_ffn <= 0) return reject("expert width (moe_ffn) not published in the notes");
    c.model = op_model(hidden, experts, topk, moe_ffn);
    c.model.router_num_groups = note_int(notes, "groups ([0-9]+)/top-[0-9]+", 0);
    c.model.router_group_topk = note_int(notes, "groups [0-9]+/top-([0-9]+)", 0);
    if (contains(lower(notes), "sigmoid")) c.model.score_function = model::ScoreFunction::sigmoid;
    o.routing.kind = model::RoutingKind::balanced;  // force_load_balancing
    o.moe_permute_fusion = true;
    const std::string d = lower(r.dtype);
    if (contains(d, "fp8")) {
      o.precision = model::Precision::fp8;
      o.fp8_recipe =
          contains(d, "block") ? model::Fp8Recipe::blockwise : model::Fp8Recipe::automatic;
    }
    r.quantity = r.kind == "moe_layer_forward" ? OpQuantity::layer_forward_ms
                                               : OpQuantity::layer_backward_ms;
    r.assumptions.push_back(
        "the MoE layer's device time (router, dispatch, experts, combine); "
        "the framework's host time is not added");
    if (o.dispatcher == model::Dispatcher::flex)
      r.assumptions.push_back("flex SMs at Megatron's default");
  } else {
    c.model = op_model(hidden, experts, topk, 2048);
    const double sms = num_field(j, "num_sms");
    if (std::isfinite(sms) && sms >= 1) {
      r.num_sms = static_cast<int>(sms);
    } else if (r.library_label == "DeepEP V1") {
      r.num_sms = 24;
      r.assumptions.push_back("24 SMs (not published; DeepEP's example sets 24)");
    } else {
      return reject("SM count not published");
    }
    if (r.num_sms > c.hw.num_sms) return reject("more SMs than the GPU has");
    o.comm_sms = r.num_sms;
    const int per_domain =
        rank_parts.size() == 2 ? rank_parts[0] : std::min(ranks, c.hw.nvlink_domain_size);
    const int nodes = (ranks + per_domain - 1) / per_domain;
    if (r.library_label == "DeepEP V1" && nodes > 1) {
      // DeepEP's internode test: node-limited routing, at most 4 nodes per token.
      c.model.router_num_groups = nodes;
      c.model.router_group_topk = std::min(nodes, 4);
      r.assumptions.push_back("node-limited routing: top-" + std::to_string(std::min(nodes, 4)) +
                              " of " + std::to_string(nodes) + " node groups (DeepEP's test)");
    }
    const std::string metric = lower(r.metric), meas = lower(r.measurement);
    r.quantity = contains(metric, "ib ") || contains(meas, "rdma") ? OpQuantity::net_bandwidth
                                                                   : OpQuantity::nvl_bandwidth;
    if (r.unit.rfind("GB/s", 0) != 0) return reject("unit '" + r.unit + "' (GB/s expected)");
    if (meas == "kernel_only" || meas == "torch_api") {
      r.timing = meas;
    } else {
      r.timing = "kernel_only";
      r.assumptions.push_back("kernel time (DeepEP's tests time the kernels)");
    }
    const std::string d = lower(r.dtype);
    if (r.kind == "combine") {
      r.elem_bytes = 2;
      if (d != "bf16" && !contains(d, "bf16 combine"))
        r.assumptions.push_back("combine in BF16 (dtype not stated; both libraries combine BF16)");
    } else if (contains(d, "fp8")) {
      r.elem_bytes = kFp8RowBytes;
    } else if (d == "bf16") {
      r.elem_bytes = 2;
    } else {
      return reject("dispatch dtype not published");
    }
    if (r.library_label == "DeepEP V2")
      r.assumptions.push_back("DeepEP V2 (NCCL Gin) costed as EPO's DeepEP (normal kernels)");
  }
  try {
    c.derive_and_check();
  } catch (const Error& e) {
    return reject(std::string("configuration not accepted: ") + e.what());
  }
  if (r.quantity == OpQuantity::net_bandwidth && c.ep_num_domains() < 2)
    return reject("a network bandwidth of ranks inside one NVLink domain of " + sys.cluster);
  r.config = c;
  set_row_profile(r, c.hw);
  return r;
}

std::vector<OpBenchRow> load_op_benchmarks(const std::string& path, const ClusterMap& clusters) {
  std::vector<OpBenchRow> rows;
  for_each_json_line(path, [&](const nlohmann::json& j, int line) {
    OpBenchRow r = map_op_benchmark_row(j, clusters);
    if (r.id.empty()) r.id = path + ":" + std::to_string(line);
    rows.push_back(std::move(r));
  });
  return rows;
}

}  // namespace epo::calib
