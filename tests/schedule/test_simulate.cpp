// Discrete-event simulation of hand-built schedules: exact step times derived by hand.
#include "catch.hpp"
#include "fixtures.hpp"
#include "model/fast_path.hpp"
#include "model/simulate.hpp"

using namespace epo;
using namespace epo::model;
using namespace epo::model::testing;

namespace {

TimeNs step_of(const Config& cfg, const StepCosts& costs, bool overlapped,
               const SimOptions& o = ideal_options()) {
  return simulate(build_pipeline(cfg, overlapped), cfg, costs, o).step_ns;
}

}  // namespace

TEST_CASE("one layer, one micro-batch: a strict chain of eight 1 us nodes", "[simulate]") {
  const Config cfg = make_config(1, 1, 1, 1, true);
  // F: pd, dispatch, mlp, combine; B: combine, mlp, dispatch, pd -> 8 x 1 us.
  CHECK(step_of(cfg, make_costs(LayerNs{}), true) == 8000);
  CHECK(step_of(cfg, make_costs(LayerNs{}), false) == 8000);
}

TEST_CASE("PP=1 combined steps: F0, (M-1) combined steps of 4 us, last B", "[simulate]") {
  for (int M : {2, 3, 4, 7}) {
    const Config cfg = make_config(1, 1, 1, M, true);
    // F0 = 4 us; each combined step: CO_b|PD_f, MLP_b|DI_f, MLP_f|DI_b, PD_b|CO_f = 4 us; B = 4 us.
    CHECK(step_of(cfg, make_costs(LayerNs{}), true) == 4000 * (M + 1));
    // Baseline: M x (4 us forward + 4 us backward).
    CHECK(step_of(cfg, make_costs(LayerNs{}), false) == 8000 * M);
  }
}

TEST_CASE("delayed wgrad: the combined step of one layer grows to 6 us", "[simulate]") {
  LayerNs n;
  n.mlp_w = 1000;
  n.pd_w = 1000;
  const Config cfg = make_config(1, 1, 1, 2, true, true);
  // F0 [0,4]; step: CO_b|PD_f [4,5], MLP_b|DI_f [5,6], MLP_w|DI_b [6,7], MLP_f [7,8],
  // PD_b|CO_f [8,9], PD_w (deferred) [9,10]; B: CO_b, MLP_b, MLP_w|DI_b, PD_b, PD_w -> [10,15].
  CHECK(step_of(cfg, make_costs(n), true) == 15000);
  // Baseline folds wgrad into the backward nodes: 2 x (4 + 6) us.
  CHECK(step_of(cfg, make_costs(n), false) == 20000);
}

TEST_CASE("communication longer than compute: the comm stream sets the step", "[simulate]") {
  LayerNs n;
  n.di_f = n.di_b = n.co_f = n.co_b = 3000;
  const Config cfg = make_config(1, 1, 1, 3, true);
  // F and B alone: 1+3+1+3 = 8 us each. Combined step: comm CO_b [8,11], DI_f waits PD_f(9) and
  // CO_b -> [11,14], DI_b (after MLP_b [11,12]) [14,17], CO_f (after MLP_f [14,15]) [17,20]:
  // 12 us, so the step is 8 + 2 x 12 + 8 = 40 us.
  const auto run = simulate(build_pipeline(cfg, true), cfg, make_costs(n), ideal_options());
  CHECK(run.step_ns == 40000);
  // Never below the busiest stream: comm busy = 3 x 12 us.
  CHECK(run.ranks[0].busy_ns[1] == 36000);
  CHECK(run.step_ns >= run.ranks[0].busy_ns[1]);
  // Exposed EP comm: F0 and B alone expose 6 us each; each combined step 12 us of comm against
  // 4 us of compute inside its span -> 8 us exposed.
  CHECK(run.ranks[0].exposed_ep_comm_ns == 6000 + 6000 + 2 * 8000);
}

TEST_CASE("host blocking: the dispatch's host sync delays its issue and what follows", "[simulate]") {
  Config cfg = make_config(1, 1, 1, 1, true);
  cfg.hw.host_sync_us = 2.0;
  // Alltoall dropless: host waits for PD_f (ends 1 us) + 2 us sync -> dispatch at 3 us; 8 + 2 us.
  CHECK(step_of(cfg, make_costs(LayerNs{}), true) == 10000);
  SimOptions o = ideal_options();
  o.host_blocking = false;
  CHECK(step_of(cfg, make_costs(LayerNs{}), true, o) == 8000);
  cfg.opt.capacity_factor = 1.5;  // static shapes: no sync
  CHECK(step_of(cfg, make_costs(LayerNs{}), true) == 8000);
}

TEST_CASE("host blocking: alltoall's sync waits for the router, DeepEP's for its stream",
          "[simulate]") {
  // A long backward combine runs on the communication stream when the forward dispatch's host
  // sync comes: alltoall's host returns once the router's counts are copied, DeepEP's only after
  // its notify kernel, queued behind the combine.
  Config cfg = make_config(1, 1, 1, 3, true);
  cfg.hw.host_sync_us = 2.0;
  LayerNs n;
  n.co_b = 20000;
  n.host = 500;
  const TimeNs a2a = step_of(cfg, make_costs(n), true);
  cfg.opt.dispatcher = Dispatcher::flex;
  cfg.opt.flex_backend = FlexBackend::deepep;
  const TimeNs deepep = step_of(cfg, make_costs(n), true);
  CHECK(a2a < deepep);
  const auto p = build_pipeline(cfg, true);
  CHECK(maxplus_step_ns(p, cfg, make_costs(n)) == simulate(p, cfg, make_costs(n), ideal_options()).step_ns);
}

TEST_CASE("host issue: ops the host issues for their whole duration cannot overlap", "[simulate]") {
  for (int M : {2, 3}) {
    const Config cfg = make_config(1, 1, 1, M, true);
    LayerNs n;
    // Every op takes 1 us, all of it the host's issue time (one host thread, launch-bound ops):
    // the overlapped schedule's pairs run one after the other, as the baseline does.
    n.host = 1000;
    CHECK(step_of(cfg, make_costs(n), true) == 8000 * M);
    CHECK(step_of(cfg, make_costs(n), false) == 8000 * M);
    // 0.7 us of each op on the host: a pair needs 1.4 us of issue for 1 us of device time each,
    // so the pairs overlap in part.
    n.host = 700;
    const TimeNs half = step_of(cfg, make_costs(n), true);
    CHECK(half > 4000 * (M + 1));
    CHECK(half < 8000 * M);
    const auto p = build_pipeline(cfg, true);
    CHECK(maxplus_step_ns(p, cfg, make_costs(n)) ==
          simulate(p, cfg, make_costs(n), ideal_options()).step_ns);
  }
}

TEST_CASE("rate sharing: compute runs slower while communication runs", "[simulate]") {
  LayerNs n;
  n.di_f = n.di_b = n.co_f = n.co_b = 2000;
  const Config cfg = make_config(1, 1, 1, 2, true);
  SimOptions o = ideal_options();
  o.contention = true;
  o.compute_rate_under_comm = 0.5;
  // F0 alone: 1+2+1+2 = 6 us. Combined step from 6: CO_b [6,8] beside PD_f at half rate [6,8];
  // MLP_b [8,10] (half rate) beside DI_f [8,10]; DI_b [10,12] beside MLP_f [10,12]; CO_f [12,14]
  // beside PD_b [12,14]: 8 us, as without contention (the comm stream is the bottleneck).
  // B alone [14,20].
  CHECK(step_of(cfg, make_costs(n), true, o) == 20000);
  LayerNs m;  // compute 2 us per node, comm 1 us: compute-bound, so contention shows
  m.pd_f = m.mlp_f = m.pd_b = m.mlp_b = 2000;
  // Ideal: F0 6 us; combined step PD_f [6,8], MLP_b [8,10], MLP_f [10,12], PD_b [12,14]; B 6 us.
  const TimeNs ideal = step_of(cfg, make_costs(m), true);
  const TimeNs slowed = step_of(cfg, make_costs(m), true, o);
  CHECK(ideal == 6000 + 8000 + 6000);
  CHECK(slowed > ideal);
}

TEST_CASE("rate sharing, exact: one compute op slowed by one comm op", "[simulate]") {
  // mb0 forward alone: PD_f 4 us [0,4]; DI_f 2 us [4,6]; MLP_f 4 us [6,10]; CO_f 2 us [10,12];
  // backward: CO_b 2 us [12,14] ... strict chain, so no overlap: rate sharing changes nothing.
  LayerNs n;
  n.pd_f = n.mlp_f = n.pd_b = n.mlp_b = 4000;
  n.di_f = n.di_b = n.co_f = n.co_b = 2000;
  const Config cfg = make_config(1, 1, 1, 1, true);
  SimOptions o = ideal_options();
  o.contention = true;
  o.compute_rate_under_comm = 0.5;
  CHECK(step_of(cfg, make_costs(n), true, o) == 24000);
  // Two micro-batches: combined step starts at 12 us with CO_b(0) [12,14] beside PD_f(1): PD_f
  // does 1 us of work at half rate in [12,14], then 3 us alone -> ends 17.
  // MLP_b(0) [17,...] beside DI_f(1) [17,19]: 1 us at half rate, then 3 us -> ends 22.
  // DI_b(0) [22,24] beside MLP_f(1) (chain DI_f done at 19, stream MLP_b at 22): 1 us in
  // [22,24], 3 us -> ends 27. CO_f(1) [27,29] beside PD_b(0) [27,...]: 1 us in [27,29], 3 us
  // -> ends 32. B(1) alone: 2+4+2+4 = 12 -> 44 us.
  const Config cfg2 = make_config(1, 1, 1, 2, true);
  CHECK(step_of(cfg2, make_costs(n), true, o) == 44000);
}

TEST_CASE("SM admission: a comm kernel issued after a running GEMM waits for its kernel end",
          "[simulate]") {
  LayerNs n;
  n.mlp_b = 4000;
  n.kernels = 4;  // 1 us per kernel
  const Config cfg = make_config(1, 1, 1, 2, true);
  SimOptions o = ideal_options();
  // Without admission: F0 [0,4]; CO_b|PD_f [4,5]; MLP_b [5,9] with DI_f [5,6]; DI_b waits
  // MLP_b -> [9,10]; MLP_f [9,10]; CO_f|PD_b [10,11]; B alone 1+4+1+1 = 7 -> 18 us.
  CHECK(step_of(cfg, make_costs(n), true, o) == 18000);
  // With admission DI_f (issued after MLP_b) starts at MLP_b's first kernel end, 6 us: it still
  // ends before MLP_b, so the step is unchanged...
  o.sm_admission = true;
  CHECK(step_of(cfg, make_costs(n), true, o) == 18000);
  // ...but a 4 us dispatch now ends at 10 instead of 9, which delays MLP_f and the step by 1 us.
  n.di_f = 4000;
  o.sm_admission = false;
  const TimeNs free_start = step_of(cfg, make_costs(n), true, o);
  o.sm_admission = true;
  CHECK(step_of(cfg, make_costs(n), true, o) == free_start + 1000);
}

TEST_CASE("CUDA_DEVICE_MAX_CONNECTIONS=1 exposes communication that 32 queues hide",
          "[simulate]") {
  LayerNs n;
  n.di_f = n.di_b = n.co_f = n.co_b = 1500;
  n.pd_f = n.pd_b = n.mlp_f = n.mlp_b = 2000;
  n.kernels = 4;  // a dispatch issued after mlp_b waits until mlp_b's last kernel is dispatched
  Config cfg = make_config(4, 1, 1, 8, true);
  const auto many = simulate(build_pipeline(cfg, true), cfg, make_costs(n), ideal_options());
  cfg.opt.cuda_device_max_connections = 1;
  const auto one = simulate(build_pipeline(cfg, true), cfg, make_costs(n), ideal_options());
  CHECK(one.step_ns > many.step_ns);
  CHECK(one.exposed_ep_comm_ns > many.exposed_ep_comm_ns);
}

TEST_CASE("baseline equals the sum of its critical path", "[simulate]") {
  LayerNs n;
  n.pd_f = 1100;
  n.di_f = 700;
  n.mlp_f = 2300;
  n.co_f = 900;
  n.pd_b = 1900;
  n.di_b = 800;
  n.mlp_b = 4100;
  n.co_b = 600;
  const TimeNs edge = 500;
  for (int layers : {1, 3}) {
    for (int M : {1, 4}) {
      Config cfg = make_config(layers, 1, 1, M, false);
      cfg.opt.overlap_grad_reduce = false;
      const auto run = simulate(build_pipeline(cfg, false), cfg, make_costs(n, edge),
                                ideal_options());
      // Strict chain: every op in turn, plus the (not overlapped) gradient reduce at the end.
      const TimeNs per_mb = layers * (1100 + 700 + 2300 + 900 + 1900 + 800 + 4100 + 600) +
                            4 * edge;
      CHECK(run.step_ns == M * per_mb + edge);
    }
  }
}
