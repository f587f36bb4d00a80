#include "model/limits.hpp"

#include <algorithm>
#include <cmath>

#include "model/config.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"

namespace epo::model {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v)
    if (!x.empty()) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

void check_range(const IntRange& r, long long v) {
  EPO_REQUIRE_INPUT(v >= r.min && v <= r.max, r.flag, " / ", r.key, " = ", v,
                    " is out of range (allowed: ", r.min, "..", r.max, ")");
}

void check_range(const RealRange& r, double v) {
  EPO_REQUIRE_INPUT(std::isfinite(v) && v >= r.min && v <= r.max, r.flag, " / ", r.key, " = ", v,
                    " is out of range (allowed: ", r.min, "..", r.max, ")");
}

void check_names(const char* what, const std::vector<std::string>& names,
                 const std::vector<std::string>& allowed) {
  for (const auto& n : names)
    EPO_REQUIRE_INPUT(std::find(allowed.begin(), allowed.end(), n) != allowed.end(), what, ": '",
                      n, "' is not allowed (allowed: ", join(allowed), ")");
}

const RealRange* profile_range(const std::string& name) {
  for (const RealRange& r : limits::profile::kReal)
    if (name == r.key) return &r;
  return nullptr;
}

void check_config_limits(const Config& c) {
  using namespace limits;
  check_range(kGpus, c.num_gpus);
  check_range(kVirtualRanks, c.virtual_ranks);
  const Parallel& p = c.par;
  check_range(kTp, p.tp);
  check_range(kPp, p.pp);
  check_range(kVpp, p.vpp);
  check_range(kCp, p.cp);
  check_range(kEp, p.ep);
  check_range(kEtp, p.etp);
  check_range(kMicroBatch, p.micro_batch_size);
  check_range(kGlobalBatch, p.global_batch_size);
  check_range(kSeqLength, p.seq_length);
  const Options& o = c.opt;
  check_range(kCommSms, o.comm_sms);
  check_range(kRecomputeLayers, o.recompute_num_layers);
  check_range(kBf16Layers, o.bf16_layers_start);
  check_range(kBf16Layers, o.bf16_layers_end);
  check_linear_modules(o.bf16_linears, "--bf16-linears / options.bf16_linears");
  check_linear_modules(o.fp8_linears, "--fp8-linears / options.fp8_linears");
  check_range(kMaxConnections, o.cuda_device_max_connections);
  check_range(kManualGcInterval, o.manual_gc_interval);
  check_range(kDistOptInstances, o.distributed_optimizer_instances);
  check_range(kSeed, static_cast<long long>(o.routing.seed));
  check_range(kSkew, o.routing.skew);
  check_range(kCapacityFactor, o.capacity_factor);
  check_range(kRankCapacityFactor, o.rank_capacity_factor);
  check_names("--recompute-method / options.recompute_method", {o.recompute_method},
              kRecomputeMethods);
  check_names("--recompute-modules / options.recompute_modules", o.recompute_modules,
              kRecomputeModules);
  check_names("--cuda-graph-modules / options.cuda_graph_modules", o.cuda_graph_modules,
              kCudaGraphModules);
  check_names("--offload-modules / options.offload_modules", o.offload_modules, kOffloadModules);
}

long long pipeline_slots(const Config& c) {
  const long long dp = std::max(1, c.par.dp);
  const long long m = c.par.global_batch_size / (static_cast<long long>(c.par.micro_batch_size) * dp);
  return m * c.par.pp * c.par.vpp;
}

void check_pipeline_slots(const Config& c) {
  const long long slots = pipeline_slots(c);
  EPO_REQUIRE_INPUT(slots <= limits::kMaxPipelineSlots, "gbs = ", c.par.global_batch_size,
                    " with mbs = ", c.par.micro_batch_size, " and dp = ", c.par.dp, " gives ",
                    slots / (static_cast<long long>(c.par.pp) * c.par.vpp),
                    " micro-batches per step on pp*vpp = ", c.par.pp, "*", c.par.vpp,
                    " chunks: ", slots, " chunk-micro-batches (allowed: at most ",
                    limits::kMaxPipelineSlots, " = 2^24; lower gbs or raise mbs)");
}

long long estimated_schedule_ops(const Config& c) {
  // Per micro-batch and decoder (or MTP) layer: four forward ops, four backward ops and two
  // delayed weight-gradient ops; per chunk and micro-batch on each rank, a send and a recv each
  // way; embedding and head forward and backward; one gradient reduce per rank.
  const long long dp = std::max(1, c.par.dp);
  const long long m = c.par.global_batch_size / (static_cast<long long>(c.par.micro_batch_size) * dp);
  const long long layers = static_cast<long long>(c.model.num_layers) + c.model.mtp_num_layers;
  return m * layers * 10 + pipeline_slots(c) * 4 + m * 4 + c.par.pp;
}

namespace {

/// Summed device and host time of one op in ns, as a double; throws on a duration the cost model
/// could not represent (ns_from_us saturates non-finite and huge values).
double op_work_ns(const OpCost& op) {
  for (const TimeNs t : {op.duration_ns, op.host_ns, op.device_ns}) {
    if (t < 0 || t >= kTimeNsSaturated)
      throw EPO_INPUT_ERROR("the cost of op ", to_string(op.kind), " (", to_string(op.dir),
                            ") is not a finite time below 2^62 ns (", t,
                            " ns): the sizes are beyond what the model can time; lower seq, mbs "
                            "or the model's dimensions");
  }
  return static_cast<double>(op.duration_ns) + static_cast<double>(op.host_ns);
}

double layer_work_ns(const LayerCosts& l) {
  double w = 0;
  for (const auto& op : l.ops) w += op_work_ns(op);
  return w;
}

}  // namespace

void check_step_work(const Config& c, const StepCosts& costs) {
  const long long dp = std::max(1, c.par.dp);
  const double m = static_cast<double>(
      c.par.global_batch_size / (static_cast<long long>(c.par.micro_batch_size) * dp));
  const int dense = std::min(c.model.first_k_dense_layers, c.model.num_layers);
  double per_mb = (c.model.num_layers - dense) * layer_work_ns(costs.moe_layer) +
                  dense * layer_work_ns(costs.dense_layer) +
                  c.model.mtp_num_layers * layer_work_ns(costs.mtp_layer);
  per_mb += op_work_ns(costs.embedding_fwd) + op_work_ns(costs.embedding_bwd) +
            op_work_ns(costs.lm_head_fwd) + op_work_ns(costs.lm_head_bwd);
  per_mb += 4.0 * c.par.pp * c.par.vpp * op_work_ns(costs.pp_send_recv);
  const double syncs = static_cast<double>(estimated_schedule_ops(c)) *
                       std::max(0.0, c.hw.host_sync_us) * 1000.0;
  const double work = m * per_mb + c.par.pp * op_work_ns(costs.dp_grad_reduce) + syncs;
  EPO_REQUIRE_INPUT(work <= limits::kMaxStepWorkNs, "the step's ops sum to ", work / 1e9,
                    " s over all ranks (gbs = ", c.par.global_batch_size, ", mbs = ",
                    c.par.micro_batch_size, ", seq = ", c.par.seq_length, "), above the ",
                    "simulator's bound of 2^53 ns (104 days) per step (allowed: a step below it; "
                    "lower gbs, mbs or seq)");
}

std::string interleaved_microbatch_problem(int pp, int vpp, int num_microbatches) {
  if (vpp <= 1) return "";
  if (num_microbatches < pp)
    return detail::concat("the interleaved schedule (vpp = ", vpp, ") needs at least pp = ", pp,
                          " micro-batches per step, got ", num_microbatches,
                          " (Megatron: the number of contiguous micro-batches in a virtual "
                          "pipeline stage should range in [PP=", pp, ", M=", num_microbatches,
                          "])");
  const int rest = num_microbatches % pp;
  if (rest == 0) return "";
  return detail::concat(
      "the interleaved schedule (vpp = ", vpp, ") needs the ", num_microbatches,
      " micro-batches per step to be a multiple of pp = ", pp, " (Megatron: the remainder of M ",
      "divided by N, the contiguous micro-batches in a virtual pipeline stage (default pp), should ",
      "be 0 or at least the pipeline-parallel size, but it is ", rest, ")");
}

const char* interleaved_microbatch_fix() {
  return "make gbs / (mbs * dp) a multiple of pp (change the global batch size, dp or the "
         "micro-batch size), or use vpp = 1";
}

void check_interleaved_microbatches(const Config& c) {
  const std::string problem =
      interleaved_microbatch_problem(c.par.pp, c.par.vpp, c.par.num_microbatches());
  if (problem.empty()) return;
  throw Error(ErrorKind::rejected,
              detail::concat(kInterleavedMicrobatchRule, ": ", problem,
                             "; fix: ", interleaved_microbatch_fix()),
              __FILE__, __LINE__);
}

/// A quantized precision the GPU cannot run: "" when `c` asks another precision or the profile
/// has the compute capability and the peak it needs, else what is missing.
static std::string quantized_problem(const Config& c, Precision p, int min_major, double peak,
                                     const char* needs, const char* unit) {
  if (c.opt.precision != p || (c.hw.compute_capability_major >= min_major && peak > 0)) return "";
  return detail::concat(needs, "; this GPU has compute capability ", c.hw.compute_capability_major,
                        peak > 0 ? "" : detail::concat(" and no ", unit, " peak in its profile"));
}

std::string nvfp4_hardware_problem(const Config& c) {
  return quantized_problem(c, Precision::nvfp4, 10, c.hw.fp4_tflops,
                           "NVFP4 needs a Blackwell GPU (compute capability 10.0 or higher with "
                           "FP4 tensor cores)",
                           "FP4");
}

const char* nvfp4_hardware_fix() {
  return "use --precision fp8 on this GPU, or a Blackwell profile (b200, gb200, b300, gb300)";
}

std::string fp8_hardware_problem(const Config& c) {
  return quantized_problem(c, Precision::fp8, 8, c.hw.fp8_tflops,
                           "FP8 needs FP8 tensor cores (compute capability 8.9 or higher: Ada, "
                           "Hopper, Blackwell)",
                           "FP8");
}

const char* fp8_hardware_fix() {
  return "use --precision bf16 on this GPU, or a profile with FP8 tensor cores (h100-sxm, b200...)";
}

void check_precision_hardware(const Config& c) {
  struct Check {
    const char* rule;
    std::string problem;
    const char* fix;
  };
  for (const Check& k : {Check{kFp8ArchRule, fp8_hardware_problem(c), fp8_hardware_fix()},
                         Check{kNvfp4ArchRule, nvfp4_hardware_problem(c), nvfp4_hardware_fix()}})
    if (!k.problem.empty())
      throw Error(ErrorKind::rejected, detail::concat(k.rule, ": ", k.problem, "; fix: ", k.fix),
                  __FILE__, __LINE__);
}

std::string dist_opt_instances_problem(const Config& c) {
  const int n = c.opt.distributed_optimizer_instances;
  if (n <= 1 || c.par.dp <= 0) return "";
  if ((c.par.dp * c.par.cp) % n != 0)
    return detail::concat("data-parallel size x context-parallel size = ", c.par.dp * c.par.cp,
                          " is not divisible by num_distributed_optimizer_instances = ", n);
  const int edp = c.par.expert_dp(c.num_gpus);
  if (edp % n != 0)
    return detail::concat("expert data-parallel size = ", edp,
                          " is not divisible by num_distributed_optimizer_instances = ", n);
  return "";
}

void check_dist_opt_instances(const Config& c) {
  const std::string problem = dist_opt_instances_problem(c);
  if (problem.empty()) return;
  throw Error(ErrorKind::rejected,
              detail::concat(kDistOptInstancesRule, ": ", problem,
                             "; fix: a --dist-opt-instances that divides both"),
              __FILE__, __LINE__);
}

void check_simulation_size(const Config& c, const StepCosts& costs) {
  const long long ops = estimated_schedule_ops(c);
  EPO_REQUIRE_INPUT(ops <= limits::kMaxSimulatedOps, "the full simulation of this step would hold ",
                    ops, " ops (gbs = ", c.par.global_batch_size, ", ", c.model.num_layers,
                    " layers; allowed: up to ", limits::kMaxSimulatedOps,
                    " = 2^22); use the fast path (--fast) or a smaller gbs");
  check_step_work(c, costs);
}

}  // namespace epo::model
