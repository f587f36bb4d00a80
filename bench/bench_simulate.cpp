// Speed of the schedule simulator and the steady-state fast path.
//   bench_simulate [-n ITERS] [-w WARMUP] [--json FILE]
// Rows: building + simulating whole training steps (events = op starts + op ends + wake-ups),
// then fast-path evaluations. Goals: >= 10 M simulated events per second on one core for a full
// step, DeepSeek-V3 at PP8 VPP4 with 256 micro-batches in under 50 ms, and >= 1000 fast-path
// evaluations per second for the same configuration.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "bench/harness.hpp"
#include "model/config_io.hpp"
#include "model/fast_path.hpp"
#include "model/simulate.hpp"

using namespace epo;
using namespace epo::model;

namespace {

struct Case {
  std::string label;
  Config cfg;
};

/// A configuration; a layer count that pp*vpp does not divide is checked with the next multiple
/// and then scheduled unevenly (first and last stages lighter, see layers_per_virtual_stage).
Config make(const char* model, int gpus, int pp, int vpp, int ep, int microbatches,
            Dispatcher d, FlexBackend b, bool overlap) {
  Config c;
  c.model = load_model_preset(model);
  c.hw = load_hardware_preset("h200-sxm");
  c.num_gpus = gpus;
  c.par.pp = pp;
  c.par.vpp = vpp;
  c.par.ep = ep;
  c.par.seq_length = 4096;
  c.par.micro_batch_size = 1;
  c.par.global_batch_size = microbatches * (gpus / pp);
  c.opt.dispatcher = d;
  c.opt.flex_backend = b;
  c.opt.overlap_moe_expert_parallel_comm = overlap;
  c.opt.delay_wgrad_compute = overlap;
  const int layers = c.model.num_layers;
  const int stages = pp * vpp;
  c.model.num_layers = (layers + stages - 1) / stages * stages;
  c.derive_and_check();
  c.model.num_layers = layers;
  return c;
}

/// CPU time of this thread, seconds: the per-core cost, whatever else the machine runs.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a.empty() ? "unknown" : a + " " + b + " " + c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const bench::CommonFlags flags = bench::parse_common_flags(argc, argv);
  const int iters = flags.iters > 0 ? flags.iters : 7;
  const int warmup = flags.warmup >= 0 ? flags.warmup : 1;

  bench::Report rep("bench_simulate: schedule simulation and fast path",
                    {{"case", "-", 34, 0},
                     {"mode", "-", 9, 0},
                     {"ops", "count", 9, 0},
                     {"events", "count", 10, 0},
                     {"step", "ms", 11, 1},
                     {"wall_med", "ms", 10, 3},
                     {"cpu_med", "ms", 10, 3},
                     {"cpu_rate", "Mev/s", 10, 2},
                     {"cpu_evals", "1/s", 10, 0}});
  rep.context("hardware profile", "h200-sxm (preset)");
  rep.context("iterations", std::to_string(iters) + " (+" + std::to_string(warmup) + " warm-up)");
  rep.context("threads", "1 (the simulator is single-threaded)");
  rep.context("events", "op starts + op ends + host/SM/queue wake-ups");
  rep.context("time", "full: build_pipeline + simulate of the configured schedule; wall clock "
                      "and this thread's CPU time (rates and goals use CPU time: per core)");
  rep.context("load average", load_average() + " (the machine is shared; wall time includes "
                              "waiting for a core)");

  std::vector<Case> cases;
  cases.push_back({"qwen3-30b-a3b ep16 pp1 M64 a2a",
                   make("qwen3-30b-a3b", 16, 1, 1, 16, 64, Dispatcher::alltoall,
                        FlexBackend::deepep, true)});
  cases.push_back({"qwen3-235b ep32 pp8 vpp4 M64",
                   make("qwen3-235b-a22b", 256, 8, 4, 32, 64, Dispatcher::alltoall,
                        FlexBackend::deepep, true)});
  cases.push_back({"deepseek-v3 ep64 pp8 vpp4 M256",
                   make("deepseek-v3", 1024, 8, 4, 64, 256, Dispatcher::flex, FlexBackend::deepep,
                        true)});
  rep.context("deepseek-v3 layout",
              "1024 GPUs, tp1 pp8 vpp4 ep64 dp128, mbs1 seq4096, 256 micro-batches, flex/deepep, "
              "overlap + delayed wgrad; 61 layers on 32 virtual stages (stages 0, 1, 31 hold one)");

  double dsv3_full_ms = 0, dsv3_rate = 0, dsv3_evals = 0, best_rate = 0;
  for (const auto& c : cases) {
    const StepCosts costs = compute_step_costs(c.cfg);
    const bool ov = c.cfg.opt.overlap_moe_expert_parallel_comm;
    SimOptions o;
    o.keep_timings = false;
    std::vector<double> full_ms, full_cpu_ms, sim_cpu_ms;
    SimRun run;
    for (int i = 0; i < warmup + iters; ++i) {
      const double t0 = bench::now_seconds(), c0 = thread_cpu_seconds();
      const PipelineSchedule p = build_pipeline(c.cfg, ov);
      const double c1 = thread_cpu_seconds();
      run = simulate(p, c.cfg, costs, o);
      const double t2 = bench::now_seconds(), c2 = thread_cpu_seconds();
      if (i >= warmup) {
        full_ms.push_back((t2 - t0) * 1e3);
        full_cpu_ms.push_back((c2 - c0) * 1e3);
        sim_cpu_ms.push_back((c2 - c1) * 1e3);
      }
    }
    const double rate = static_cast<double>(run.num_events) / (median(sim_cpu_ms) * 1e-3) / 1e6;
    best_rate = std::max(best_rate, rate);
    rep.row({c.label, "full", static_cast<double>(run.num_ops),
             static_cast<double>(run.num_events), us_from_ns(run.step_ns) / 1e3, median(full_ms),
             median(full_cpu_ms), rate, 1e3 / median(full_cpu_ms)});

    // Fast path: evaluations per second (per-thread buffers warm after the first call).
    FastResult fast = fast_step(c.cfg, costs, ov, o);
    int n = 0;
    const double f0 = bench::now_seconds(), fc0 = thread_cpu_seconds();
    double f1 = f0;
    while (f1 - f0 < 0.3 || n < 5) {
      fast = fast_step(c.cfg, costs, ov, o);
      ++n;
      f1 = bench::now_seconds();
    }
    const double wall_ms = (f1 - f0) * 1e3 / n;
    const double cpu_ms = (thread_cpu_seconds() - fc0) * 1e3 / n;
    rep.row({c.label, "fast", 0.0, 0.0, us_from_ns(fast.step_ns) / 1e3, wall_ms, cpu_ms, 0.0,
             1e3 / cpu_ms});
    if (c.label.rfind("deepseek-v3", 0) == 0) {
      dsv3_full_ms = median(full_cpu_ms);
      dsv3_rate = rate;
      dsv3_evals = 1e3 / cpu_ms;
    }
  }
  rep.goal("deepseek-v3 pp8 vpp4 M256 build+simulate (cpu)", dsv3_full_ms, "<=", 50.0, "ms");
  rep.goal("deepseek-v3 simulated events/s per core", dsv3_rate, ">=", 10.0, "M/s");
  rep.goal("best simulated events/s per core", best_rate, ">=", 10.0, "M/s");
  rep.goal("deepseek-v3 fast-path evaluations per core", dsv3_evals, ">=", 1000.0, "1/s");
  rep.write_json(flags.json_path);
  return rep.goals_missed() > 0 ? 1 : 0;
}
