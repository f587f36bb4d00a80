#pragma once
// Step types of the steady-state fast path (internal to model/): their shapes, simulated timings
// and per-thread buffers (fast_path_types.cpp), used by the pipeline recursion (fast_path.cpp).
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/config.hpp"
#include "model/cost.hpp"
#include "model/fast_path.hpp"
#include "model/schedule.hpp"
#include "model/simulate.hpp"
#include "model/timeline.hpp"

namespace epo::model::detail {

/// Layer counts of a chunk shape that decide its cost.
struct ShapeSig {
  int dense = 0, moe = 0;
  bool mtp = false, first = false, last = false;
  bool operator==(const ShapeSig& o) const {
    return dense == o.dense && moe == o.moe && mtp == o.mtp && first == o.first && last == o.last;
  }
};

/// Cost signature of a chunk shape: its dense and MoE layer counts and stage flags.
ShapeSig signature(const Config& cfg, const ChunkShape& c);

/// Timing of one step type, in ns from the step's start.
struct Timing {
  double lambda = 0;   // span of the step alone
  double pi = 0;       // increment when the same step follows back to back
  double sigma_f = 0;  // forward send done, from the step's start
  double sigma_b = 0;  // backward send done, from the step's start
  double busy_compute = 0, busy_comm = 0, exposed = 0;
  double dp_end = 0;  // gradient reduce done, from the step's start (last backward only)
  // The same with the host ahead of the device (every op its device time), and the host's own
  // issue time of one step: fast_step runs the device's chain and the host's side by side.
  double lambda_dev = 0, pi_dev = 0, sigma_f_dev = 0, sigma_b_dev = 0;
  double host = 0;
  double head_mid = 0,
         lambda_mid = 0;    // span with the host ahead by head_mid = lambda - lambda_dev
  double host_done = 0;     // the host done issuing the step (the step alone)
  bool host_syncs = false;  // the host waits for the device inside the step

  /// Span of the step when its host began `head` ns before its device could (negative: after):
  /// through (0, lambda), (head_mid, lambda_mid), then down by the head start to lambda_dev.
  double span(double head) const {
    if (head <= 0 || host <= 0) return lambda - std::min(0.0, head);
    if (head <= head_mid) return lambda + (lambda_mid - lambda) * head / head_mid;
    return std::max(lambda_dev, lambda_mid - (head - head_mid));
  }

  Timing extrapolate(const Timing& smaller, double periods) const {
    Timing t;
    t.lambda = lambda + periods * (lambda - smaller.lambda);
    t.pi = pi + periods * (pi - smaller.pi);
    t.sigma_f = sigma_f + periods * (sigma_f - smaller.sigma_f);
    t.sigma_b = sigma_b + periods * (sigma_b - smaller.sigma_b);
    t.busy_compute = busy_compute + periods * (busy_compute - smaller.busy_compute);
    t.busy_comm = busy_comm + periods * (busy_comm - smaller.busy_comm);
    t.exposed = exposed + periods * (exposed - smaller.exposed);
    t.dp_end = dp_end + periods * (dp_end - smaller.dp_end);
    t.lambda_dev = lambda_dev + periods * (lambda_dev - smaller.lambda_dev);
    t.pi_dev = pi_dev + periods * (pi_dev - smaller.pi_dev);
    t.sigma_f_dev = sigma_f_dev + periods * (sigma_f_dev - smaller.sigma_f_dev);
    t.sigma_b_dev = sigma_b_dev + periods * (sigma_b_dev - smaller.sigma_b_dev);
    t.host = host + periods * (host - smaller.host);
    t.head_mid = head_mid + periods * (head_mid - smaller.head_mid);
    t.lambda_mid = lambda_mid + periods * (lambda_mid - smaller.lambda_mid);
    t.host_done = host_done + periods * (host_done - smaller.host_done);
    t.host_syncs = host_syncs;
    return t;
  }
};

/// Per-thread buffers of fast_step (schedules, simulator, step-type tables, arrivals).
struct Workspace {
  Schedule sched;
  SimWorkspace sim;
  std::vector<int> stage_layers;
  std::vector<ShapeSig> sigs;     // distinct chunk signatures
  std::vector<int> sig_of;        // [rank * vpp + chunk]
  std::vector<int> chunk_layers;  // [rank * vpp + chunk]: layers incl. MTP
  std::vector<int> type_index;    // [(f_sig + 1) * (n + 1) + (b_sig + 1)] -> timings index
  std::vector<Timing> timings;
  struct LastKey {
    int f_sig, b_sig, total_layers;
  };
  std::vector<LastKey> last_keys;  // last backward of a chunk (with the gradient reduce)
  std::vector<Timing> last_timings;
  std::vector<TimeNs> fwd_arrival, bwd_arrival;  // [stage * M + mb]
  std::vector<Interval> ep, compute;
  // Simulated step types and whole steps by their complete input, across calls: the planner
  // predicts many configurations whose layers cost the same (pipeline layouts of one shape;
  // options that move no op, such as CUDA graphs where the profile has no host time per op) and
  // whose step types repeat. A context is everything a step type's simulation reads besides the
  // two chunk shapes (set_memo_context); its bytes map to a small id, and a type's key is that id
  // with the shapes, a step's that id with the pipeline layout. All three tables are emptied
  // together when one grows past its cap.
  std::unordered_map<std::string, int> memo_contexts;
  std::unordered_map<std::string, Timing> memo_types;
  std::unordered_map<std::string, FastResult> memo_steps;
  int memo_context = -1;  // the current fast_step's context id
  long long memo_hits = 0;
  std::string memo_key;   // scratch
};

/// The calling thread's workspace.
Workspace& workspace();

/// Sets ws.memo_context for the step types fast_step is about to simulate: every op cost the
/// simulation resolves (durations, host and device times, kernels, link, SMs and the compute rate
/// beside it), the options the schedule builder and the simulator read, the model's layer kinds,
/// the host synchronisation time, `overlapped` and `options`. The gradient reduce, which only a
/// chunk's last backward runs, is part of that type's key instead, so that layouts with another
/// data-parallel size share the other types.
void set_memo_context(Workspace& ws, const Config& cfg, const StepCosts& costs, bool overlapped,
                      const SimOptions& options);
/// Sets ws.memo_key to the key of a whole step: the context with the gradient reduce, pp, vpp,
/// the micro-batch count and the layers of every virtual stage (ws.stage_layers, already set).
void set_step_key(Workspace& ws, const Config& cfg, const StepCosts& costs);

/// Timing of a step type: simulated with at most kKeep+1 repeated layers per side, extrapolated
/// by the per-two-layer increment (two, so that a period-two steady state extrapolates exactly).
Timing type_timing(Workspace& ws, const Config& cfg, const StepCosts& costs, bool overlapped,
                   const SimOptions& options, int f_sig, int b_sig, int total_layers);

}  // namespace epo::model::detail
