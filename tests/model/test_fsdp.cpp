// Megatron-FSDP: the per-micro-batch gathers and reduce-scatters its sharding strategy adds, what
// of them the step sees, HSDP's instances, and the memory each strategy shards.
#include "catch.hpp"
#include "model/cost.hpp"
#include "model/prediction.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;
using test::qwen;

namespace {

Config fsdp(Config c, FsdpSharding s, int instances = 1) {
  c.opt.megatron_fsdp = true;
  c.opt.fsdp_sharding = s;
  c.opt.distributed_optimizer_instances = instances;
  c.derive_and_check();
  return c;
}

Config with_gbs(Config c, int gbs) {
  c.par.global_batch_size = gbs;
  c.derive_and_check();
  return c;
}

}  // namespace

TEST_CASE("Megatron-FSDP communicates every micro-batch where the distributed optimizer "
          "communicates once a step",
          "[cost][fsdp]") {
  const Config dist = qwen(64, 1, 1, 8, 1);  // dp 64 over the network, expert-dp 8
  const Config zero3 = fsdp(dist, FsdpSharding::optim_grads_params);
  const Config zero2 = fsdp(dist, FsdpSharding::optim_grads);
  const StepCosts d = compute_step_costs(dist), p3 = compute_step_costs(zero3),
                  p2 = compute_step_costs(zero2);
  CHECK(d.fsdp_comm_us == 0);
  CHECK(d.fsdp_exposed_us == 0);
  // optim_grads_params gathers twice and reduce-scatters once per micro-batch; optim_grads only
  // reduce-scatters, and keeps the gather after the optimizer step.
  CHECK(p3.fsdp_comm_us > p2.fsdp_comm_us);
  CHECK(p3.fsdp_exposed_us > p2.fsdp_exposed_us);
  CHECK(p3.param_gather_us == 0);
  CHECK(p2.param_gather_us == Approx(d.param_gather_us));
  // The end-of-step reduction is gone with one instance (each micro-batch reduced its own).
  CHECK(p3.dp_grad_reduce.duration_ns == 0);
  CHECK(d.dp_grad_reduce.duration_ns > 0);
  // Four times the micro-batches, four times the communication; the distributed optimizer's
  // reduction stays once a step.
  const StepCosts p3x4 = compute_step_costs(with_gbs(zero3, 256));
  CHECK(p3x4.fsdp_comm_us == Approx(4 * p3.fsdp_comm_us));
  CHECK(p3x4.fsdp_exposed_us > 3 * p3.fsdp_exposed_us);
  CHECK(compute_step_costs(with_gbs(dist, 256)).dp_grad_reduce.duration_ns ==
        d.dp_grad_reduce.duration_ns);
  // optim and no_shard communicate as the distributed optimizer and DDP do.
  CHECK(compute_step_costs(fsdp(dist, FsdpSharding::optim)).fsdp_comm_us == 0);
}

TEST_CASE("Megatron-FSDP's communication hides behind the layers' compute, not all of it",
          "[cost][fsdp]") {
  const Config zero3 = fsdp(qwen(64, 1, 1, 8, 1), FsdpSharding::optim_grads_params);
  const StepCosts s = compute_step_costs(zero3);
  CHECK(s.fsdp_exposed_us > 0);
  CHECK(s.fsdp_exposed_us < s.fsdp_comm_us);
  // The prediction carries it: the step is at least the plain step plus what is exposed.
  const Prediction with = predict(zero3, PredictMode::fast);
  Config off = zero3;
  off.opt.megatron_fsdp = false;
  off.derive_and_check();
  const Prediction without = predict(off, PredictMode::fast);
  CHECK(with.step_time_us != Approx(without.step_time_us));
  CHECK(predict(zero3, PredictMode::full).step_time_us ==
        Approx(with.step_time_us).epsilon(0.02));
}

TEST_CASE("HSDP shards inside an NVLink domain and reduces across the instances once a step",
          "[cost][fsdp]") {
  const Config flat = fsdp(qwen(64, 1, 1, 8, 1), FsdpSharding::optim_grads_params);
  const Config hsdp = fsdp(qwen(64, 1, 1, 8, 1), FsdpSharding::optim_grads_params, 8);
  const StepCosts f = compute_step_costs(flat), h = compute_step_costs(hsdp);
  // Eight instances of eight ranks: each micro-batch's rings stay on NVLink, so they are cheaper
  // than the 64-rank rings over the network; the shards then cross the instances once.
  CHECK(h.fsdp_comm_us < f.fsdp_comm_us);
  CHECK(h.dp_grad_reduce.duration_ns > 0);
  CHECK(h.dp_grad_reduce.net_bytes > 0);
}

TEST_CASE("Megatron-FSDP memory: each strategy shards what it names", "[memory][fsdp]") {
  const Config dist = qwen(64, 1, 1, 8, 1);
  const MemoryBreakdown d = predict(dist, PredictMode::fast).memory;
  const MemoryBreakdown g = predict(fsdp(dist, FsdpSharding::optim_grads), PredictMode::fast).memory;
  const MemoryBreakdown p =
      predict(fsdp(dist, FsdpSharding::optim_grads_params), PredictMode::fast).memory;
  CHECK(g.weights_bytes == Approx(d.weights_bytes));
  CHECK(g.gradients_bytes < 0.5 * d.gradients_bytes);
  CHECK(p.weights_bytes < 0.5 * d.weights_bytes);
  CHECK(p.gradients_bytes == Approx(g.gradients_bytes));
  CHECK(p.optimizer_bytes == Approx(d.optimizer_bytes));
  CHECK(p.total_bytes < g.total_bytes);
  // HSDP keeps a shard per instance; outer_dp_sharding_strategy = optim shards the optimizer
  // states across the instances too.
  Config hsdp = fsdp(dist, FsdpSharding::optim_grads_params, 4);
  const MemoryBreakdown h = predict(hsdp, PredictMode::fast).memory;
  CHECK(h.weights_bytes > p.weights_bytes);
  CHECK(h.optimizer_bytes == Approx(4 * p.optimizer_bytes));
  hsdp.opt.fsdp_outer_optim = true;
  CHECK(predict(hsdp, PredictMode::fast).memory.optimizer_bytes == Approx(p.optimizer_bytes));
}
