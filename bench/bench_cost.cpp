// Closed-form op-cost evaluations per second on this machine (one core). One op-cost evaluation =
// the FLOPs, HBM bytes, link bytes, SMs and duration of one schedule op (e.g. the forward dispatch
// of a layer). compute_step_costs() evaluates every op a configuration has (each layer kind's
// nodes in every direction, embedding, LM head, pipeline transfer, gradient reduction) in one call;
// the table shows both rates. Goal: >= 1,000,000 op-cost evaluations per second per core.
#include <cstdio>
#include <vector>

#include "bench/harness.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"

using namespace epo;

int main(int argc, char** argv) {
  const auto flags = bench::parse_common_flags(argc, argv);
  bench::Report rep("epo op-cost model throughput (one core)",
                    {{"model", "-", 16, 0}, {"dispatcher", "-", 10, 0}, {"calls", "count", 10, 0},
                     {"ops_per_call", "count", 12, 0}, {"time", "s", 8, 3},
                     {"call_rate", "calls/s", 12, 0}, {"op_rate", "ops/s", 12, 0},
                     {"per_op", "ns", 8, 1}});
  rep.context("host", "CPU, single thread");
  std::vector<std::pair<std::string, std::string>> cases = {
      {"qwen3-30b-a3b", "alltoall"}, {"qwen3-30b-a3b", "flex"}, {"deepseek-v3", "flex"}, {"mixtral-8x7b", "alltoall"}};
  double worst = 1e300;
  for (const auto& [name, disp] : cases) {
    model::Config c;
    c.model = model::load_model_preset(name);
    c.hw = model::load_hardware_preset("h100-sxm");
    c.num_gpus = 64;
    c.par.ep = std::min(c.model.num_experts, 64);
    c.par.global_batch_size = 256;
    c.opt.dispatcher = model::parse_dispatcher(disp, "dispatcher");
    c.opt.overlap_moe_expert_parallel_comm = true;
    c.derive_and_check();
    const int n = flags.iters > 0 ? flags.iters : 200000;
    double sink = 0;
    const auto probe = model::compute_step_costs(c);
    int ops = 6;  // embedding fwd/bwd, LM head fwd/bwd, pipeline transfer, gradient reduction
    for (const auto* L : {&probe.moe_layer, &probe.dense_layer, &probe.mtp_layer}) ops += static_cast<int>(L->ops.size());
    const double t0 = bench::now_seconds();
    for (int i = 0; i < n; ++i) {
      c.opt.comm_sms = 8 + 2 * (i & 7);  // vary an input that changes the costs
      sink += static_cast<double>(model::compute_step_costs(c).moe_layer.ops[0].duration_ns);
    }
    const double dt = bench::now_seconds() - t0;
    const double rate = n / dt;
    worst = std::min(worst, rate * ops);
    rep.row({name, disp, n, ops, dt, rate, rate * ops, 1e9 / (rate * ops)});
    if (sink < 0) std::printf("impossible\n");
  }
  rep.goal("op-cost evaluations per second per core (worst case)", worst, ">=", 1e6, "ops/s");
  rep.write_json(flags.json_path);
  return 0;
}
