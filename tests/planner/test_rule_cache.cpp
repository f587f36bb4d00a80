// The filter's cached rule check (planner/search_rule_cache.hpp) names the same first failing rule
// as the plain ErrorRules::first_error for every candidate of small search spaces: in every
// Megatron version and front end, with base options and contexts that make many rules fire, in
// the generation order and shuffled.
#include <algorithm>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "catch.hpp"
#include "planner/search.hpp"
#include "planner/search_rule_cache.hpp"
#include "planner/search_tune.hpp"
#include "planner_test_util.hpp"

using namespace epo;
using namespace epo::planner;

namespace {

struct Tally {
  long long checked = 0, failed = 0;
  std::set<std::string> fired;  ///< ids of the first errors seen
};

/// Checks every candidate of `s` in the order `order` (indices into its candidates).
void check_space(const SearchSpec& s, const std::vector<Candidate>& cands,
                 const std::vector<size_t>& order, Tally& t) {
  const planner::detail::ErrorRules rules(s.ctx);
  planner::detail::RuleVerdictCache cache(rules);
  model::Config work = s.base;
  for (size_t i : order) {
    apply_candidate(work, cands[i]);
    const Rule* plain = rules.first_error(work);
    const Rule* cached = cache.first_error(cands[i], work);
    if (plain != cached) {
      INFO(plan_key(work));
      INFO("plain " << (plain ? plain->id : "none") << ", cached "
                    << (cached ? cached->id : "none"));
      REQUIRE(plain == cached);
    }
    ++t.checked;
    if (plain) {
      ++t.failed;
      t.fired.insert(plain->id);
    }
  }
}

/// The candidates of `s` in runs of one layout (every `stride`-th run, so that the spaces stay
/// small), in generation order and then a shuffled sample of them.
void check_both_orders(const SearchSpec& s, size_t stride, Tally& t) {
  const auto cands = generate_candidates(s);
  std::vector<size_t> order;
  size_t run = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    const Candidate& a = cands[i];
    const Candidate& b = cands[i == 0 ? 0 : i - 1];
    if (a.tp != b.tp || a.pp != b.pp || a.vpp != b.vpp || a.cp != b.cp || a.ep != b.ep ||
        a.etp != b.etp || a.mbs != b.mbs)
      ++run;
    if (run % stride == 0) order.push_back(i);
  }
  check_space(s, cands, order, t);
  std::mt19937 rng(12345);
  std::shuffle(order.begin(), order.end(), rng);
  order.resize(std::min<size_t>(order.size(), 500));
  check_space(s, cands, order, t);
}

/// A change of the base options or of the context that makes some rule fire.
using Tweak = void (*)(model::Config&, ValidationContext&);
const Tweak kTweaks[] = {
    [](model::Config&, ValidationContext&) {},
    [](model::Config&, ValidationContext& x) {
      x.te = {2, 2};
    },
    [](model::Config&, ValidationContext& x) {
      x.te = {2, 6};
    },
    [](model::Config&, ValidationContext& x) {
      x.te = {2, 9};
    },
    [](model::Config&, ValidationContext& x) {
      x.torch = {2, 5};
    },
    [](model::Config&, ValidationContext& x) { x.moe_pad_expert_input_to_capacity = true; },
    [](model::Config& c, ValidationContext& x) {
      x.moe_pad_expert_input_to_capacity = true;
      c.opt.capacity_factor = 1.0;
    },
    [](model::Config& c, ValidationContext&) { c.opt.capacity_factor = 1.0; },
    [](model::Config&, ValidationContext& x) { x.fp8_dispatch = true; },
    [](model::Config&, ValidationContext& x) { x.megatron_fsdp = true; },
    [](model::Config&, ValidationContext& x) { x.partial_activation_checkpoints = true; },
    [](model::Config&, ValidationContext& x) { x.moe_use_legacy_grouped_gemm = true; },
    [](model::Config&, ValidationContext& x) { x.add_bias_linear = true; },
    [](model::Config&, ValidationContext& x) { x.model_bf16_or_fp16 = false; },
    [](model::Config&, ValidationContext& x) { x.transformer_engine = false; },
    [](model::Config&, ValidationContext& x) { x.bridge_apply_flex_backend = true; },
    [](model::Config& c, ValidationContext&) { c.opt.attention_dropout = 0.1; },
    [](model::Config& c, ValidationContext&) { c.opt.hidden_dropout = 0.1; },
    [](model::Config& c, ValidationContext&) { c.opt.gradient_accumulation_fusion = false; },
    [](model::Config& c, ValidationContext&) {
      c.opt.deepep_num_sms = 21;
      c.opt.hybridep_num_sms = 24;
    },
    [](model::Config& c, ValidationContext&) { c.opt.distributed_optimizer_instances = 4; },
    [](model::Config& c, ValidationContext&) {
      // Cleared by the candidates with etp > 1 and kept cleared (apply_candidate).
      c.opt.fused_grouped_mlp = true;
      c.opt.precision = model::Precision::fp8;
    },
    [](model::Config& c, ValidationContext&) { c.opt.moe_grouped_gemm = false; },
    [](model::Config& c, ValidationContext&) { c.opt.params_dtype = model::ParamsDtype::fp32; },
    [](model::Config& c, ValidationContext&) { c.opt.rank_capacity_factor = 1.5; },
    [](model::Config& c, ValidationContext&) { c.opt.paged_stash = true; },
    [](model::Config& c, ValidationContext&) {
      c.opt.rank_capacity_factor = 1.5;
      c.opt.paged_stash = true;
    },
    [](model::Config& c, ValidationContext&) {
      c.opt.overlap_dispatch_backward_with_experts_wgrad = true;
    },
};

}  // namespace

TEST_CASE("every rule listed with what it reads is an error rule") {
  for (const auto& e : planner::detail::rule_reads()) {
    CAPTURE(e.id);
    CHECK(find_rule(e.id).severity == Severity::error);
  }
}

TEST_CASE("the cached rule check names the plain check's first error for every candidate") {
  struct Space {
    const char* model;
    const char* hardware;
    int gpus, gbs;
    size_t stride;  ///< every stride-th layout is checked
  };
  const Space spaces[] = {{"tiny", "h100-sxm", 8, 64, 7},
                          {"qwen3-30b-a3b", "dgx-h100", 16, 256, 41},
                          {"deepseek-v3", "gb200-nvl72", 64, 512, 113}};
  Tally t;
  for (const auto& sp : spaces) {
    const model::Config base =
        test::make_config(sp.model, sp.hardware, sp.gpus, 1, 1, 1, 1, sp.gbs);
    // Every version and front end as they come, and every tweak in three of them.
    std::vector<std::pair<ValidationContext, Tweak>> cases;
    for (int m = 0; m < kNumMegatronVersions; ++m)
      for (Frontend f : {Frontend::bridge, Frontend::mlm}) {
        ValidationContext x;
        x.megatron = static_cast<MegatronVersion>(m);
        x.frontend = f;
        const bool tweaked = (m == 0 && f == Frontend::mlm) || (m == 3 && f == Frontend::bridge) ||
                             (m == kNumMegatronVersions - 1 && f == Frontend::bridge);
        for (size_t k = 0; k < (tweaked ? std::size(kTweaks) : 1); ++k)
          cases.push_back({x, kTweaks[k]});
      }
    for (auto [ctx, tweak] : cases) {
      CAPTURE(sp.model, sp.gpus, to_string(ctx.megatron), to_string(ctx.frontend));
      SearchSpec s;
      s.base = base;
      tweak(s.base, ctx);
      s.ctx = ctx;
      check_both_orders(s, sp.stride, t);
      // A fixed layout: the SM counts vary, recompute and CUDA graphs stay the base's.
      s.fixed_layout = true;
      s.base.par.tp = 2;
      s.base.par.ep = 4;
      s.base.opt.cuda_graph_impl = model::CudaGraphImpl::transformer_engine;
      s.base.opt.cuda_graph_modules = {"attn", "moe"};
      check_both_orders(s, 1, t);
    }
  }
  // The spaces reach many rules, reading each group of fields, and leave candidates that pass.
  CHECK(t.failed > 0);
  CHECK(t.failed < t.checked);
  for (unsigned bit = 1; bit < planner::detail::kReadsEverything; bit <<= 1) {
    CAPTURE(bit);
    CHECK(std::any_of(t.fired.begin(), t.fired.end(), [&](const std::string& id) {
      return (planner::detail::rule_reads(id) & bit) != 0;
    }));
  }
  CHECK(t.fired.size() >= 40);
  INFO(t.checked << " candidates checked, " << t.fired.size() << " rules seen first");
  CHECK(t.checked > 0);
}
