#pragma once
// Measured op records and what is computed from them: the summary (step time, exposed
// communication, per-op means), the "ops" array of the measurement JSON and the measured Chrome
// trace. Pure C++ so the CPU tests cover it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/schedule.hpp"
#include "model/trace.hpp"

namespace epo::exec {

/// One op of one rank in one measured step; times in microseconds from the rank's clock origin.
struct OpRecord {
  int rank = 0;
  int step = 0;                 ///< measured step index (0..iters-1)
  bool overlapped = false;      ///< schedule: combined-1F1B (true) or baseline
  model::OpKind kind = model::OpKind::pre_dispatch;
  model::Direction dir = model::Direction::forward;
  model::Lane lane = model::Lane::compute;
  std::string name;             ///< op_name() of the schedule op, e.g. "dispatch.fwd"
  int microbatch = -1;
  int layer = -1;
  double start_us = 0;
  double end_us = 0;
};

/// Figures of one schedule's measured steps.
struct ScheduleSummary {
  int num_steps = 0;
  double step_time_us = 0;      ///< mean over steps of the step span (see summarize)
  double exposed_comm_us = 0;   ///< mean over steps and ranks: comm-lane time not under compute
  double comm_busy_us = 0;      ///< mean over steps and ranks: union of comm-lane intervals
};

/// Summary of the records of one schedule. With `shared_clock` (virtual ranks on one GPU) a
/// step's span runs from the first start to the last end over all ranks; otherwise it is the
/// longest span of any rank (each GPU has its own clock).
ScheduleSummary summarize(const std::vector<OpRecord>& records, bool overlapped,
                          bool shared_clock);

/// Mean duration of each op kind and direction, keyed "dispatch/forward", over the records of
/// one schedule.
nlohmann::json op_means_json(const std::vector<OpRecord>& records, bool overlapped);

/// The "ops" array of the measurement document.
nlohmann::json ops_json(const std::vector<OpRecord>& records);

/// Trace records (model/trace.hpp) of one measured step of one schedule: pid = rank +
/// pid_offset, in schedule order rank by rank (the order model::trace_flows indexes), shifted
/// so the step starts at 0 (per rank unless `shared_clock`).
std::vector<model::TraceRecord> measured_trace_records(const std::vector<OpRecord>& records,
                                                       bool overlapped, int step, int pid_offset,
                                                       bool shared_clock);

/// What a measurement document says about the run besides its op records.
struct RunInfo {
  int virtual_ranks = 0;
  int gpus = 1;
  int layers = 0;
  int iters = 0;
  int warmup = 0;
  std::string routing;                       ///< "uniform", "balanced", "skewed" or "trained"
  std::string expert_gemm = "auto";          ///< --expert-gemm as given
  std::string expert_gemm_path = "per-expert";  ///< what it resolves to (model::expert_gemm_path)
  bool overlapped = false;                   ///< the configured schedule is combined-1F1B
  bool shared_clock = false;                 ///< all ranks on one GPU
  std::vector<std::int64_t> peak_memory_bytes;  ///< per rank: device bytes the rank allocated
  /// Per GPU: bytes in use at the end of the measured steps (cudaMemGetInfo: total - free; the
  /// context, libraries and every allocation included); empty when not read.
  std::vector<std::int64_t> device_used_bytes;
};

/// The measurement document (schema_version 1, kind "measurement"): context, config, run, ops,
/// summary. The caller adds "prediction". Without a baseline run (overlap off) the baseline
/// figures equal the configured ones.
nlohmann::json measurement_json(const nlohmann::json& context, const nlohmann::json& config,
                                const RunInfo& info, const std::vector<OpRecord>& records);

}  // namespace epo::exec
