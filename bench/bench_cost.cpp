// Closed-form op-cost evaluations per second on this machine (one core): each evaluation computes
// every op of a layer (FLOPs, bytes, durations) for a configuration. Goal: >= 1,000,000 per second.
#include <cstdio>
#include <vector>

#include "bench/harness.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"

using namespace epo;

int main(int argc, char** argv) {
  const auto flags = bench::parse_common_flags(argc, argv);
  bench::Report rep("epo op-cost model throughput (one core)",
                    {{"model", "-", 16, 0}, {"dispatcher", "-", 10, 0}, {"evals", "count", 10, 0},
                     {"time", "s", 10, 3}, {"rate", "evals/s", 14, 0}, {"per_eval", "ns", 10, 1}});
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
    const double t0 = bench::now_seconds();
    for (int i = 0; i < n; ++i) {
      c.par.micro_batch_size = 1 + (i & 1);  // defeat caching of identical inputs
      sink += static_cast<double>(model::compute_step_costs(c).moe_layer.ops[0].duration_ns);
    }
    const double dt = bench::now_seconds() - t0;
    const double rate = n / dt;
    worst = std::min(worst, rate);
    rep.row({name, disp, n, dt, rate, 1e9 / rate});
    if (sink < 0) std::printf("impossible\n");
  }
  rep.goal("op-cost evaluations per second per core (worst case)", worst, ">=", 1e6, "evals/s");
  rep.write_json(flags.json_path);
  return 0;
}
