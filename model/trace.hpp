#pragma once
// Timelines for people: Chrome trace-event JSON (opens in Perfetto and chrome://tracing) and an
// ASCII picture of one steady-state layer step. Predicted (simulated) and measured (executor)
// timelines use the same records, so both come out with the same processes, tracks and names:
// one process (pid) per pipeline rank, one track (tid) per stream, ops named as schedule nodes.
#include <cstddef>
#include <string>
#include <vector>

#include "model/schedule.hpp"
#include "model/simulate.hpp"

namespace epo::model {

/// One op on a timeline.
struct TraceRecord {
  int rank = 0;                  ///< pipeline rank (the trace's pid)
  Lane lane = Lane::compute;     ///< stream (the trace's tid)
  std::string name;              ///< schedule node name, e.g. "dispatch.fwd" (op_name)
  int microbatch = -1;
  int layer = -1;
  int chunk = -1;
  Direction dir = Direction::forward;
  TimeNs start_ns = 0;
  TimeNs end_ns = 0;
};

/// An event wait: record `to` could not start before record `from` ended (drawn as an arrow).
struct TraceFlow {
  int from = 0;
  int to = 0;
};

/// Chrome trace-event JSON for the records (times in microseconds), with process and thread
/// names and one flow arrow per TraceFlow. `title` goes into otherData. Processes from
/// `baseline_first_pid` on (>= 0) are named "baseline 1F1B pp rank N" (N counted from there).
std::string trace_json(const std::vector<TraceRecord>& records,
                       const std::vector<TraceFlow>& flows, const std::string& title,
                       int baseline_first_pid = -1);

/// Records of a simulated run, in schedule order (rank by rank), one per op.
std::vector<TraceRecord> trace_records(const PipelineSchedule& schedule, const SimRun& run);
/// Flow arrows of the schedule: waits on an op of another stream (the micro-batch event chain)
/// and pipeline recv ops waiting for their sends. Indices refer to trace_records' order.
std::vector<TraceFlow> trace_flows(const PipelineSchedule& schedule);

/// Size guard of the Chrome trace: above this many bytes (about 200 per op) only the first
/// schedule steps of each rank are written; Perfetto and chrome://tracing load a trace of this
/// size in seconds, a PP2 VPP3 step of 142 MB hardly at all.
inline constexpr std::size_t kMaxTraceBytes = std::size_t{64} << 20;

/// What write_trace wrote.
struct TraceWritten {
  std::size_t ops = 0, total_ops = 0;   ///< written, and in the whole step (baseline included)
  std::size_t estimated_full_bytes = 0; ///< the whole step's trace, estimated
  int steps = 0, total_steps = 0;       ///< schedule steps per rank written, and in the step
  bool cut() const { return ops < total_ops; }
};

/// Writes the simulated timeline of `result` (the configured schedule; with `with_baseline` the
/// baseline too, as processes pp..2pp-1 named "baseline") atomically to `path`. Above
/// `max_bytes` (0: no limit) only the first schedule steps of each rank are written. Throws on
/// I/O errors.
TraceWritten write_trace(const std::string& path, const SimResult& result,
                         bool with_baseline = false, std::size_t max_bytes = 0);

/// One steady-state layer step (rank 0, a combined step in the middle of the schedule, its middle
/// layer step) drawn per stream, `width` characters wide, with a legend of ops and durations.
/// Empty when the schedule has no ops with timings.
std::string ascii_layer_step(const PipelineSchedule& schedule, const SimRun& run,
                             int width = 96);

}  // namespace epo::model
