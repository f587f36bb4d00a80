// The generators of the plan search: each yields the values one dimension may take, given the
// model, the hardware and the choices already made. Only structurally meaningful values come out
// (delayed wgrad and early release only with overlap, SM counts only for flex backends); whatever
// Megatron would reject is left to the rules, so that it is counted by reason.
#include <algorithm>
#include <initializer_list>
#include <sstream>
#include <string>
#include <vector>

#include "model/error.hpp"
#include "planner/emit.hpp"
#include "planner/pipeline_split.hpp"
#include "planner/search.hpp"
#include "planner/search_tune.hpp"

namespace epo::planner {

using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::FlexBackend;
using model::RecomputeGranularity;

namespace {

std::vector<int> divisors(int n, int max_value) {
  std::vector<int> d;
  for (int i = 1; i <= std::min(n, max_value); ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

std::vector<int> gen_tp(const Config& b) {
  std::vector<int> v;
  for (int tp = 1; tp <= std::min(b.num_gpus, std::max(1, b.hw.nvlink_domain_size)); tp *= 2)
    if (b.model.num_attention_heads % tp == 0) v.push_back(tp);
  return v;
}
std::vector<int> gen_cp(const Config& b, int tp) {
  std::vector<int> v;
  // Context parallelism pays only for long sequences: keep >= 2048 tokens per CP rank.
  for (int cp = 1; cp <= 8; cp *= 2)
    if (b.par.seq_length % cp == 0 && b.par.seq_length / cp >= 2048 &&
        b.num_gpus % (static_cast<long long>(tp) * cp) == 0)
      v.push_back(cp);
  return v;
}
/// A dimension's values: the generated ones, or only the value a flag fixed.
std::vector<int> fixed_or(int fixed, std::vector<int> generated) {
  if (fixed > 0) return {fixed};
  return generated;
}
/// Megatron's plain split or, where pp * vpp does not divide the layers, a balanced layout.
bool splittable(const Config& b, int pp, int vpp) {
  return even_split_holds(b.model.num_layers, pp, vpp) ||
         !balanced_pipeline_layout(b.model.num_layers, b.model.mtp_num_layers, pp, vpp).empty();
}
std::vector<int> gen_pp(const Config& b, int tp, int cp) {
  // Divisors of the layer count, and 2 to 16 in powers of two with an uneven layout (DeepSeek-V3's
  // 61 layers; the sizes its recipes use), which costs the search a factor of the layouts added.
  std::vector<int> v;
  for (int pp = 1; pp <= 32; ++pp) {
    const bool pow2 = (pp & (pp - 1)) == 0 && pp <= 16;
    if (b.model.num_layers % pp != 0 && !(pow2 && splittable(b, pp, 1))) continue;
    if (b.num_gpus % (static_cast<long long>(tp) * cp * pp) == 0) v.push_back(pp);
  }
  return v;
}
std::vector<int> gen_vpp(const Config& b, int pp) {
  if (pp == 1) return {1};
  std::vector<int> v;
  for (int vpp = 1; vpp <= 8; ++vpp)
    if (even_split_holds(b.model.num_layers, pp, vpp) ||
        ((vpp == 1 || vpp == 2 || vpp == 4) && splittable(b, pp, vpp)))
      v.push_back(vpp);
  return v;
}
std::vector<int> gen_ep(const Config& b, int tp, int cp, int pp, int etp) {
  std::vector<int> v;
  if (b.model.num_experts == 0) return {1};
  // 64-bit products: etp * ep * pp reaches 2^37 for the largest allowed sizes.
  const long long dp = b.num_gpus / (static_cast<long long>(tp) * cp * pp);
  for (int ep : divisors(b.model.num_experts, b.num_gpus)) {
    const long long expert_group = static_cast<long long>(etp) * ep;
    if (b.num_gpus % (expert_group * pp) == 0 && (tp * cp * dp) % expert_group == 0)
      v.push_back(ep);
  }
  return v;
}
std::vector<int> gen_etp(int tp) {
  // Bridge's default (1) and Megatron-Core's (= tp).
  if (tp == 1) return {1};
  return {1, tp};
}
std::vector<int> gen_mbs(const Config& b, int dp) {
  std::vector<int> v;
  for (int mbs : {1, 2, 4})
    if (b.par.global_batch_size % (static_cast<long long>(mbs) * dp) == 0) v.push_back(mbs);
  return v;
}
/// (dispatcher, backend) pairs.
std::vector<std::pair<Dispatcher, FlexBackend>> gen_dispatch(const Config& b) {
  if (b.model.num_experts == 0) return {{Dispatcher::alltoall, FlexBackend::deepep}};
  return {{Dispatcher::alltoall, FlexBackend::deepep},
          {Dispatcher::flex, FlexBackend::deepep},
          {Dispatcher::flex, FlexBackend::hybridep}};
}
/// Flex backends at Megatron's default SM count (0); the search tunes the count afterwards for
/// the plans it reports (planner/search_tune.cpp). A fixed layout tries every count at once.
std::vector<int> gen_comm_sms(const SearchSpec& s, Dispatcher d, FlexBackend fb) {
  if (d == Dispatcher::flex && s.fixed.comm_sms >= 0) return {s.fixed.comm_sms};
  if (d != Dispatcher::flex || !s.fixed_layout) return {0};
  return detail::flex_sm_counts(fb);
}
struct OverlapFlags {
  bool overlap, delay, early;
};
std::vector<OverlapFlags> gen_overlap(const SearchSpec& s) {
  std::vector<OverlapFlags> v{{false, false, false}};
  if (s.base.model.num_experts == 0) return v;
  const bool early_exists =
      static_cast<int>(s.ctx.megatron) >= static_cast<int>(MegatronVersion::core_v0_16);
  for (bool delay : {false, true})
    for (bool early : {false, true})
      if (!early || early_exists) v.push_back({true, delay, early});
  return v;
}

/// Sets a module list; the search applies millions of candidates to one configuration and most
/// keep the list the one before set, so it is rebuilt only when it differs.
void set_modules(std::vector<std::string>& v, std::initializer_list<const char*> names) {
  if (v.size() == names.size() && std::equal(v.begin(), v.end(), names.begin())) return;
  v.assign(names.begin(), names.end());
}

}  // namespace

void apply_candidate(Config& cfg, const Candidate& c) {
  auto& p = cfg.par;
  auto& o = cfg.opt;
  p.tp = c.tp;
  p.pp = c.pp;
  p.vpp = c.vpp;
  p.cp = c.cp;
  p.ep = c.ep;
  p.etp = c.etp;
  p.micro_batch_size = c.mbs;
  p.sequence_parallel = c.tp > 1;
  p.dp = cfg.num_gpus / (c.tp * c.pp * c.cp);
  if (c.layout != Candidate::kKeep) {
    if (c.layout == 1) {
      // Candidates come in runs of one layout: build its string once per run.
      thread_local int memo[4] = {-1, -1, -1, -1};
      thread_local std::string memo_layout;
      const int key[4] = {cfg.model.num_layers, cfg.model.mtp_num_layers, c.pp, c.vpp};
      if (!std::equal(key, key + 4, memo)) {
        memo_layout = balanced_pipeline_layout(key[0], key[1], key[2], key[3]);
        std::copy(key, key + 4, memo);
      }
      p.pipeline_layout = memo_layout;
    } else {
      p.pipeline_layout.clear();
    }
    p.first_stage_layers = p.last_stage_layers = 0;
    p.account_for_embedding_in_pipeline_split = p.account_for_loss_in_pipeline_split = false;
  }
  o.dispatcher = static_cast<Dispatcher>(c.dispatcher);
  o.flex_backend = static_cast<FlexBackend>(c.backend);
  o.overlap_moe_expert_parallel_comm = c.overlap;
  o.delay_wgrad_compute = c.delay_wgrad;
  o.ep_overlap_early_attn_memory_release = c.early_release;
  o.comm_sms = c.comm_sms;
  o.moe_shared_expert_overlap = false;
  if (c.recompute != Candidate::kKeep) {
    o.recompute_granularity = static_cast<RecomputeGranularity>(c.recompute);
    o.recompute_method.clear();
    o.recompute_num_layers = 0;
    if (c.recompute == Candidate::kRecomputeMla) {
      o.recompute_granularity = RecomputeGranularity::selective;
      set_modules(o.recompute_modules, {"mla_up_proj", "mlp"});
    } else if (o.recompute_granularity == RecomputeGranularity::selective) {
      set_modules(o.recompute_modules, {"core_attn", "moe_act", "layernorm"});
    } else {
      o.recompute_modules.clear();
    }
    if (o.recompute_granularity == RecomputeGranularity::full) {
      o.recompute_method = "uniform";
      o.recompute_num_layers = 1;
    }
  }
  if (c.cuda_graph == 1) {
    o.cuda_graph_impl = CudaGraphImpl::transformer_engine;
    set_modules(o.cuda_graph_modules, {"attn", "moe_router", "moe_preprocess"});
  } else if (c.cuda_graph == 0) {
    o.cuda_graph_impl = CudaGraphImpl::none;
    o.cuda_graph_modules.clear();
  }
  o.cuda_device_max_connections =
      c.cdmc > 0 ? c.cdmc : recommended_cuda_device_max_connections(cfg);
  // The fused grouped MLP stays asked for only where it runs (ETP 1): a candidate says what it runs.
  o.fused_grouped_mlp = c.fused_grouped_mlp != 0;
  if (o.fused_grouped_mlp && !model::fused_grouped_mlp_runs(cfg)) o.fused_grouped_mlp = false;
}

Config candidate_config(const Config& base, const Candidate& c) {
  Config cfg = base;
  apply_candidate(cfg, c);
  cfg.derive_and_check();
  return cfg;
}

std::string plan_key(const Config& cfg) {
  const auto& p = cfg.par;
  const auto& o = cfg.opt;
  std::ostringstream os;
  os << "tp" << p.tp << " pp" << p.pp << " vpp" << p.vpp << " cp" << p.cp << " ep" << p.ep
     << " etp" << p.etp << (p.pipeline_layout.empty() ? "" : " uneven") << " mbs" << p.micro_batch_size << " "
     << (o.dispatcher == Dispatcher::flex ? std::string("flex/") + model::to_string(o.flex_backend)
                                          : std::string(model::to_string(o.dispatcher)));
  if (o.dispatcher == Dispatcher::flex) os << " sms" << o.comm_sms;
  if (o.overlap_moe_expert_parallel_comm) os << " ovl";
  if (o.delay_wgrad_compute) os << " dw";
  if (o.ep_overlap_early_attn_memory_release) os << " er";
  if (o.recompute_granularity != RecomputeGranularity::none)
    os << " rc-" << model::to_string(o.recompute_granularity);
  if (!o.recompute_modules.empty() && o.recompute_modules.front() == "mla_up_proj") os << "-mla";
  if (o.cuda_graph_impl == CudaGraphImpl::full_iteration) os << " graphs-full";
  else if (o.cuda_graph_impl != CudaGraphImpl::none) os << " graphs";
  return os.str();
}

std::vector<Candidate> generate_candidates(const SearchSpec& s) {
  const Config& b = s.base;
  std::vector<Candidate> out;
  struct Layout {
    int tp, pp, vpp, cp, ep, etp, mbs;
  };
  std::vector<Layout> layouts;
  if (s.fixed_layout) {
    layouts.push_back({b.par.tp, b.par.pp, b.par.vpp, b.par.cp, b.par.ep, b.par.etp,
                       b.par.micro_batch_size});
  } else {
    const SearchSpec::Fixed& f = s.fixed;
    auto free = [](int fixed, int v) { return fixed <= 0 || fixed == v; };
    for (int tp : fixed_or(f.tp, gen_tp(b)))
      for (int cp : fixed_or(f.cp, gen_cp(b, tp)))
        for (int pp : fixed_or(f.pp, gen_pp(b, tp, cp)))
          for (int vpp : fixed_or(f.vpp, gen_vpp(b, pp)))
            for (int etp : gen_etp(tp))
              for (int ep : gen_ep(b, tp, cp, pp, etp))
                for (int mbs : fixed_or(f.mbs, gen_mbs(b, b.num_gpus / (tp * cp * pp))))
                  if (free(f.etp, etp) && free(f.ep, ep))
                    layouts.push_back({tp, pp, vpp, cp, ep, etp, mbs});
  }
  std::vector<OverlapFlags> flags;
  for (const auto& f : gen_overlap(s))
    if ((s.fixed.overlap < 0 || s.fixed.overlap == f.overlap) &&
        (s.fixed.delay_wgrad < 0 || s.fixed.delay_wgrad == f.delay) &&
        (s.fixed.early_release < 0 || s.fixed.early_release == f.early))
      flags.push_back(f);
  std::vector<std::pair<Dispatcher, FlexBackend>> dispatch;
  if (s.fixed.dispatcher == static_cast<int>(Dispatcher::allgather))
    dispatch.push_back({Dispatcher::allgather, FlexBackend::deepep});
  for (const auto& [d, fb] : gen_dispatch(b))
    if ((s.fixed.dispatcher < 0 || s.fixed.dispatcher == static_cast<int>(d)) &&
        (s.fixed.backend < 0 || d != Dispatcher::flex || s.fixed.backend == static_cast<int>(fb)))
      dispatch.push_back({d, fb});
  const bool mla = b.model.attention == model::AttentionKind::mla;
  for (const auto& l : layouts) {
    Candidate c;
    c.tp = static_cast<std::int16_t>(l.tp);
    c.pp = static_cast<std::int16_t>(l.pp);
    c.vpp = static_cast<std::int16_t>(l.vpp);
    c.cp = static_cast<std::int16_t>(l.cp);
    c.ep = static_cast<std::int16_t>(l.ep);
    c.etp = static_cast<std::int16_t>(l.etp);
    c.mbs = static_cast<std::int16_t>(l.mbs);
    c.fused_grouped_mlp = b.opt.fused_grouped_mlp;
    c.cdmc = static_cast<std::int16_t>(s.fixed.cdmc);
    c.layout = s.fixed_layout ? Candidate::kKeep
                              : static_cast<std::uint8_t>(!even_split_holds(b.model.num_layers, l.pp, l.vpp));
    for (const auto& [d, fb] : dispatch) {
      c.dispatcher = static_cast<std::uint8_t>(d);
      c.backend = static_cast<std::uint8_t>(fb);
      for (int sms : gen_comm_sms(s, d, fb)) {
        c.comm_sms = static_cast<std::int16_t>(sms);
        for (const auto& f : flags) {
          c.overlap = f.overlap;
          c.delay_wgrad = f.delay;
          c.early_release = f.early;
          // With a fixed layout, recompute and CUDA graphs stay as given. MLA models also try
          // recomputing their up-projections (Bridge's DeepSeek-V3 recipes).
          // Full-iteration graphs are not searched: what they save is the fitted per-op host
          // time, which on H100 stands in for costs the model lacks (the public EP-overlap A/B,
          // docs/measurements.md); a configuration given with --layout can still ask for one.
          // A flag fixing recompute or graphs keeps the base's, as a fixed layout does.
          const bool keep_rc = s.fixed_layout || s.fixed.recompute;
          const bool keep_g = s.fixed_layout || s.fixed.cuda_graphs;
          const int num_rc = keep_rc ? 1 : mla ? 4 : 3, num_g = keep_g ? 1 : 2;
          for (int rc = 0; rc < num_rc; ++rc) {
            c.recompute = keep_rc ? Candidate::kKeep : static_cast<std::uint8_t>(rc);
            for (int g = 0; g < num_g; ++g) {
              c.cuda_graph = keep_g ? Candidate::kKeep : static_cast<std::uint8_t>(g);
              out.push_back(c);
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace epo::planner
