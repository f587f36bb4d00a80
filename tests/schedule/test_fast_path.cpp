// The exact max-plus evaluator against the simulator without contention, and the steady-state
// fast path against the full simulation on a suite of configurations.
#include <cmath>
#include <string>

#include "catch.hpp"
#include "fixtures.hpp"
#include "model/config_io.hpp"
#include "model/fast_path.hpp"

using namespace epo;
using namespace epo::model;
using namespace epo::model::testing;

namespace {

/// Uneven node durations so that no two paths tie by accident.
LayerNs uneven_layer() {
  LayerNs n;
  n.pd_f = 1300;
  n.di_f = 900;
  n.mlp_f = 2100;
  n.co_f = 1100;
  n.pd_b = 2500;
  n.di_b = 950;
  n.mlp_b = 3900;
  n.co_b = 1050;
  n.mlp_w = 1700;
  n.pd_w = 800;
  n.kernels = 3;
  return n;
}

}  // namespace

TEST_CASE("without contention the max-plus closed form equals the simulation exactly",
          "[fast_path]") {
  struct Row {
    int layers, pp, vpp, m;
    bool overlap, delay;
    int cdmc;
    double sync_us;
  };
  const Row rows[] = {
      {2, 1, 1, 4, true, false, 32, 0.0},  {3, 1, 1, 5, true, true, 32, 7.5},
      {3, 1, 1, 5, true, true, 1, 7.5},    {4, 1, 1, 3, false, false, 32, 3.0},
      {8, 2, 2, 4, true, true, 32, 2.0},   {8, 2, 2, 6, false, false, 1, 2.0},
      {8, 4, 2, 8, true, false, 1, 0.0},   {12, 4, 1, 8, false, false, 32, 5.0},
  };
  for (const auto& r : rows) {
    INFO("layers " << r.layers << " pp " << r.pp << " vpp " << r.vpp << " M " << r.m
                   << " overlap " << r.overlap << " cdmc " << r.cdmc);
    Config cfg = make_config(r.layers, r.pp, r.vpp, r.m, r.overlap, r.delay);
    cfg.opt.cuda_device_max_connections = r.cdmc;
    cfg.hw.host_sync_us = r.sync_us;
    const StepCosts costs = make_costs(uneven_layer(), 700);
    const PipelineSchedule p = build_pipeline(cfg, r.overlap);
    CHECK(maxplus_step_ns(p, cfg, costs) == simulate(p, cfg, costs, ideal_options()).step_ns);
  }
}

TEST_CASE("contention coefficients 0: simulation equals the closed form", "[fast_path]") {
  Config cfg = make_config(6, 2, 3, 6, true, true);
  cfg.hw.contention_coeff = 0.0;
  cfg.hw.nvl_contention_coeff = 0.0;
  cfg.hw.host_sync_us = 4.0;
  const StepCosts costs = make_costs(uneven_layer(), 500);
  SimOptions o;  // contention modelled, but every rate is 1
  o.sm_admission = false;
  const PipelineSchedule p = build_pipeline(cfg, true);
  CHECK(maxplus_step_ns(p, cfg, costs) == simulate(p, cfg, costs, o).step_ns);
  // With the default contention curve the same schedule runs longer.
  Config slow = cfg;
  slow.hw.nvl_contention_coeff = 0.055;
  slow.hw.nvl_contention_exp = 0.41;
  CHECK(simulate(p, slow, costs, o).step_ns > maxplus_step_ns(p, cfg, costs));
}

TEST_CASE("fast path agrees with the full simulation within 1%", "[fast_path]") {
  struct Model {
    const char* name;
    int ep;
  };
  const Model models[] = {{"qwen3-30b-a3b", 8}, {"mixtral-8x7b", 8}, {"deepseek-v3", 8},
                          {"gpt-oss-120b", 8}};
  struct Layout {
    int pp, vpp;
  };
  const Layout layouts[] = {{1, 1}, {2, 2}, {4, 2}};
  struct Disp {
    Dispatcher d;
    FlexBackend b;
  };
  const Disp disps[] = {{Dispatcher::alltoall, FlexBackend::deepep},
                        {Dispatcher::flex, FlexBackend::deepep},
                        {Dispatcher::flex, FlexBackend::hybridep}};
  int checked = 0;
  for (const auto& m : models) {
    for (const auto& l : layouts) {
      for (const auto& d : disps) {
        if (std::string(m.name) == "mixtral-8x7b" && d.d == Dispatcher::flex) continue;
        for (bool ov : {false, true}) {
          for (int cdmc : {1, 32}) {
            Config cfg;
            cfg.model = load_model_preset(m.name);
            cfg.hw = load_hardware_preset("h200-sxm");
            cfg.num_gpus = 16 * l.pp;
            cfg.par.pp = l.pp;
            cfg.par.vpp = l.vpp;
            cfg.par.ep = m.ep;
            cfg.par.seq_length = 4096;
            cfg.par.global_batch_size = 16 * 16;  // 16 micro-batches per data-parallel rank
            cfg.opt.dispatcher = d.d;
            cfg.opt.flex_backend = d.b;
            cfg.opt.overlap_moe_expert_parallel_comm = ov;
            cfg.opt.delay_wgrad_compute = ov && d.d == Dispatcher::flex;
            cfg.opt.cuda_device_max_connections = cdmc;
            // DeepSeek-V3's 61 layers do not split evenly: check the layout with 64, then
            // schedule the real 61 unevenly.
            const int layers = cfg.model.num_layers;
            const int stages = l.pp * l.vpp;
            cfg.model.num_layers = (layers + stages - 1) / stages * stages;
            cfg.derive_and_check();
            cfg.model.num_layers = layers;
            const StepCosts costs = compute_step_costs(cfg);
            SimOptions o;
            o.keep_timings = true;
            const SimRun full = simulate(build_pipeline(cfg, ov), cfg, costs, o);
            const FastResult fast = fast_step(cfg, costs, ov, o);
            INFO(m.name << " pp " << l.pp << " vpp " << l.vpp << " " << to_string(d.d) << "/"
                        << to_string(d.b) << " overlap " << ov << " cdmc " << cdmc);
            const double err = static_cast<double>(fast.step_ns) / full.step_ns - 1.0;
            CHECK(std::fabs(err) < 0.01);
            // Never below the busiest stream of any rank.
            for (const auto& rm : full.ranks) {
              CHECK(full.step_ns >= rm.busy_ns[0]);
              CHECK(full.step_ns >= rm.busy_ns[1]);
            }
            ++checked;
          }
        }
      }
    }
  }
  CHECK(checked == 4 * 3 * 3 * 2 * 2 - 3 * 2 * 2 * 2);
}

TEST_CASE("fast path on hand-built costs: exact for PP=1 without contention", "[fast_path]") {
  for (int m : {1, 2, 5}) {
    for (bool ov : {false, true}) {
      const Config cfg = make_config(23, 1, 1, m, ov, ov);
      const StepCosts costs = make_costs(uneven_layer(), 600);
      const SimOptions o = ideal_options();
      const TimeNs full = simulate(build_pipeline(cfg, ov), cfg, costs, o).step_ns;
      INFO("M " << m << " overlap " << ov);
      // 23 MoE layers: 17 simulated, 6 extrapolated from the two-layer increment.
      CHECK(fast_step(cfg, costs, ov, o).step_ns == full);
    }
  }
}

TEST_CASE("fast path within 1% where the host's lead builds over many layers", "[fast_path]") {
  // Qwen3-30B-A3B on 16 GPUs of the dgx-h100 cluster profile (Megatron's per-op host time): with
  // attention, router and preprocessing graphed, the host runs ahead of the device a little more
  // each layer; a step extrapolated from four simulated layers came out 1.1-1.2 % short. Now
  // within 0.7 % (EP 8 without delayed wgrad, the profile's per-op host time at 1,498 us).
  for (int ep : {8, 16}) {
    for (bool delay : {false, true}) {
      Config cfg;
      cfg.model = load_model_preset("qwen3-30b-a3b");
      cfg.hw = load_hardware_preset("dgx-h100");
      cfg.num_gpus = 16;
      cfg.par.ep = ep;
      cfg.par.global_batch_size = 256;
      cfg.opt.dispatcher = Dispatcher::flex;
      cfg.opt.flex_backend = FlexBackend::hybridep;
      cfg.opt.comm_sms = 16;
      cfg.opt.overlap_moe_expert_parallel_comm = true;
      cfg.opt.delay_wgrad_compute = delay;
      cfg.opt.ep_overlap_early_attn_memory_release = true;
      cfg.opt.cuda_graph_impl = CudaGraphImpl::transformer_engine;
      cfg.opt.cuda_graph_modules = {"attn", "moe_router", "moe_preprocess"};
      cfg.derive_and_check();
      const StepCosts costs = compute_step_costs(cfg);
      const TimeNs full = simulate(build_pipeline(cfg, true), cfg, costs).step_ns;
      const TimeNs fast = fast_step(cfg, costs, true).step_ns;
      INFO("ep " << ep << " delayed wgrad " << delay);
      CHECK(std::fabs(static_cast<double>(fast) / full - 1.0) < 0.01);
    }
  }
}

TEST_CASE("fast path within 1% for short steps and few micro-batches", "[fast_path]") {
  // The tiny preset: one layer per chunk, microsecond ops, so step-to-step transitions and P2P
  // waits weigh the most.
  for (int pp : {2, 4}) {
    for (int vpp : {1, 2}) {
      for (int m : {1, 2, 4, 8}) {
        for (bool ov : {false, true}) {
          Config cfg;
          cfg.model = load_model_preset("tiny");
          cfg.hw = load_hardware_preset("h100-sxm");
          cfg.num_gpus = 8 * pp;
          cfg.par.pp = pp;
          cfg.par.vpp = vpp;
          cfg.par.ep = 8;
          cfg.par.global_batch_size = 8 * m;
          cfg.opt.dispatcher = Dispatcher::flex;
          cfg.opt.flex_backend = FlexBackend::hybridep;
          cfg.opt.overlap_moe_expert_parallel_comm = ov;
          cfg.opt.delay_wgrad_compute = ov;
          cfg.opt.ep_overlap_early_attn_memory_release = ov && m % 2 == 0;
          if (cfg.model.num_layers < pp * vpp) continue;
          if (vpp > 1 && m % pp != 0) continue;  // Megatron refuses these (RUNTIME-VPP-MICROBATCHES)
          cfg.derive_and_check();
          const StepCosts costs = compute_step_costs(cfg);
          const TimeNs full = simulate(build_pipeline(cfg, ov), cfg, costs).step_ns;
          const TimeNs fast = fast_step(cfg, costs, ov).step_ns;
          INFO("pp " << pp << " vpp " << vpp << " M " << m << " overlap " << ov);
          CHECK(std::fabs(static_cast<double>(fast) / full - 1.0) < 0.01);
        }
      }
    }
  }
}

TEST_CASE("ranking prediction: fast mode's figures without the baseline", "[fast_path]") {
  // Alternating layouts also checks that the per-thread tables of the step walk follow the
  // configuration (each prediction is compared with a fresh fast-mode one).
  struct Case {
    int pp, vpp, mbs;
    bool overlap;
  };
  const Case cases[] = {{1, 1, 1, true}, {2, 2, 1, true}, {4, 3, 2, false}, {2, 2, 1, false},
                        {4, 3, 2, true}, {1, 1, 1, false}};
  for (int round = 0; round < 2; ++round) {
    for (const auto& k : cases) {
      Config cfg;
      cfg.model = load_model_preset("qwen3-30b-a3b");
      cfg.hw = load_hardware_preset("h100-sxm");
      cfg.num_gpus = 16 * k.pp;
      cfg.par.pp = k.pp;
      cfg.par.vpp = k.vpp;
      cfg.par.ep = 8;
      cfg.par.micro_batch_size = k.mbs;
      cfg.par.seq_length = 4096;
      cfg.par.global_batch_size = 256;
      cfg.opt.dispatcher = Dispatcher::flex;
      cfg.opt.flex_backend = FlexBackend::deepep;
      cfg.opt.overlap_moe_expert_parallel_comm = k.overlap;
      cfg.opt.delay_wgrad_compute = k.overlap;
      cfg.derive_and_check();
      INFO("pp " << k.pp << " vpp " << k.vpp << " mbs " << k.mbs << " overlap " << k.overlap);
      const Prediction full = predict(cfg, PredictMode::fast);
      const Prediction rank = predict_fast_ranking(cfg);
      CHECK(rank.step_time_us == full.step_time_us);
      CHECK(rank.exposed_comm_us == full.exposed_comm_us);
      CHECK(rank.tokens_per_s_per_gpu == full.tokens_per_s_per_gpu);
      CHECK(rank.memory.total_bytes == full.memory.total_bytes);
      CHECK(rank.memory.fits == full.memory.fits);
      CHECK(rank.baseline_step_time_us == 0);
      CHECK(full.baseline_step_time_us > 0);
      for (int r = 0; r < k.pp; ++r) {
        CHECK(activation_peak_layers_fast(cfg, r, k.overlap) ==
              activation_peak_layers(build_schedule(cfg, r, k.overlap)));
      }
    }
  }
}
