#include "model/trace.hpp"

#include <algorithm>
#include <cstdio>

#include "model/config_io.hpp"
#include "model/error.hpp"

namespace epo::model {

namespace {

const char* lane_title(Lane lane) {
  switch (lane) {
    case Lane::compute: return "compute stream";
    case Lane::comm: return "comm stream";
    case Lane::grad_reduce: return "grad reduce stream";
  }
  return "?";
}

void append_escaped(std::string& out, const std::string& s) {
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
}

/// Microseconds with nanosecond resolution, as the trace format's "ts"/"dur" expect.
void append_us(std::string& out, TimeNs ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", static_cast<long long>(ns / 1000),
                static_cast<long long>(ns % 1000));
  out += buf;
}

}  // namespace

std::string trace_json(const std::vector<TraceRecord>& records,
                       const std::vector<TraceFlow>& flows, const std::string& title,
                       int baseline_first_pid) {
  std::string out;
  out.reserve(records.size() * 200 + flows.size() * 180 + 256);
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"title\":\"";
  append_escaped(out, title);
  out += "\"},\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&]() {
    if (!first) out += ",\n";
    first = false;
  };
  // Process and thread names for every (rank, lane) that occurs.
  int max_rank = -1;
  for (const auto& r : records) max_rank = std::max(max_rank, r.rank);
  std::vector<int> seen(static_cast<std::size_t>(max_rank + 1) * kNumLanes, 0);
  for (const auto& r : records) seen[static_cast<std::size_t>(r.rank) * kNumLanes + static_cast<int>(r.lane)] = 1;
  char buf[256];
  for (int rank = 0; rank <= max_rank; ++rank) {
    bool any = false;
    for (int l = 0; l < kNumLanes; ++l) any = any || seen[rank * kNumLanes + l];
    if (!any) continue;
    sep();
    const bool base = baseline_first_pid >= 0 && rank >= baseline_first_pid;
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"%spp rank %d\"}}",
                  rank, base ? "baseline 1F1B " : "", base ? rank - baseline_first_pid : rank);
    out += buf;
    sep();
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
                  rank, rank);
    out += buf;
    for (int l = 0; l < kNumLanes; ++l) {
      if (!seen[rank * kNumLanes + l]) continue;
      sep();
      std::snprintf(buf, sizeof buf,
                    "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                    rank, l, lane_title(static_cast<Lane>(l)));
      out += buf;
    }
  }
  for (const auto& r : records) {
    sep();
    out += "{\"ph\":\"X\",\"name\":\"";
    append_escaped(out, r.name);
    std::snprintf(buf, sizeof buf, "\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":",
                  to_string(r.lane), r.rank, static_cast<int>(r.lane));
    out += buf;
    append_us(out, r.start_ns);
    out += ",\"dur\":";
    append_us(out, std::max<TimeNs>(0, r.end_ns - r.start_ns));
    std::snprintf(buf, sizeof buf,
                  ",\"args\":{\"microbatch\":%d,\"layer\":%d,\"chunk\":%d,\"direction\":\"%s\"}}",
                  r.microbatch, r.layer, r.chunk, to_string(r.dir));
    out += buf;
  }
  int id = 0;
  for (const auto& f : flows) {
    if (f.from < 0 || f.to < 0 || f.from >= static_cast<int>(records.size()) ||
        f.to >= static_cast<int>(records.size())) {
      continue;
    }
    const TraceRecord& a = records[f.from];
    const TraceRecord& b = records[f.to];
    // The start binds to the waited-for slice (ts inside it), the finish to the waiting slice.
    sep();
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"s\",\"name\":\"wait\",\"cat\":\"event\",\"id\":%d,\"pid\":%d,\"tid\":%d,\"ts\":",
                  id, a.rank, static_cast<int>(a.lane));
    out += buf;
    append_us(out, a.start_ns);
    out += "}";
    sep();
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"f\",\"bp\":\"e\",\"name\":\"wait\",\"cat\":\"event\",\"id\":%d,\"pid\":%d,\"tid\":%d,\"ts\":",
                  id, b.rank, static_cast<int>(b.lane));
    out += buf;
    append_us(out, b.start_ns);
    out += "}";
    ++id;
  }
  out += "\n]}\n";
  return out;
}

std::vector<TraceRecord> trace_records(const PipelineSchedule& schedule, const SimRun& run) {
  EPO_REQUIRE_INPUT(run.timings.size() == schedule.ranks.size(),
                    "trace: the run has no per-op timings (simulate with keep_timings)");
  std::vector<TraceRecord> out;
  out.reserve(schedule.num_ops());
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    const auto& ops = schedule.ranks[r].ops;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const ScheduleOp& op = ops[i];
      TraceRecord t;
      t.rank = static_cast<int>(r);
      t.lane = op.lane;
      t.name = op_name(op);
      t.microbatch = op.microbatch;
      t.layer = op.layer;
      t.chunk = op.chunk;
      t.dir = op.dir;
      t.start_ns = run.timings[r][i].start_ns;
      t.end_ns = run.timings[r][i].end_ns;
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::vector<TraceFlow> trace_flows(const PipelineSchedule& schedule) {
  std::vector<int> offset(schedule.ranks.size() + 1, 0);
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    offset[r + 1] = offset[r] + static_cast<int>(schedule.ranks[r].ops.size());
  }
  std::vector<TraceFlow> out;
  for (std::size_t r = 0; r < schedule.ranks.size(); ++r) {
    const auto& ops = schedule.ranks[r].ops;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const ScheduleOp& op = ops[i];
      for (int w = 0; w < op.num_waits; ++w) {
        if (ops[op.waits[w]].lane != op.lane) {
          out.push_back({offset[r] + op.waits[w], offset[r] + static_cast<int>(i)});
        }
      }
      if (op.pp_role == PpRole::recv && op.peer_rank >= 0 && op.peer_op >= 0) {
        out.push_back({offset[op.peer_rank] + op.peer_op, offset[r] + static_cast<int>(i)});
      }
    }
  }
  return out;
}

namespace {

/// Schedule step of each record of trace_records(schedule, ...), in the same order.
void append_steps(const PipelineSchedule& schedule, std::vector<int>& steps) {
  for (const auto& rank : schedule.ranks)
    for (const auto& op : rank.ops) steps.push_back(op.step);
}

/// Keeps the records of the first `n` schedule steps (and no step-less ones past them).
void keep_first_steps(int n, const std::vector<int>& steps, std::vector<TraceRecord>& records,
                      std::vector<TraceFlow>& flows) {
  std::vector<int> index(records.size(), -1);
  std::vector<TraceRecord> kept;
  for (std::size_t i = 0; i < records.size(); ++i)
    if (steps[i] >= 0 && steps[i] < n) {
      index[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(records[i]));
    }
  records = std::move(kept);
  std::vector<TraceFlow> kept_flows;
  for (const auto& f : flows)
    if (index[f.from] >= 0 && index[f.to] >= 0) kept_flows.push_back({index[f.from], index[f.to]});
  flows = std::move(kept_flows);
}

}  // namespace

TraceWritten write_trace(const std::string& path, const SimResult& result, bool with_baseline,
                         std::size_t max_bytes) {
  std::vector<TraceRecord> records = trace_records(result.schedule, result.run);
  std::vector<TraceFlow> flows = trace_flows(result.schedule);
  std::vector<int> steps;
  append_steps(result.schedule, steps);
  std::string title = result.run.overlapped ? "combined 1F1B (overlapped)" : "1F1B";
  int baseline_pid = -1;
  if (with_baseline && result.run.overlapped) {
    std::vector<TraceRecord> base = trace_records(result.baseline_schedule, result.baseline);
    std::vector<TraceFlow> base_flows = trace_flows(result.baseline_schedule);
    const int shift = static_cast<int>(result.schedule.ranks.size());
    const int first = static_cast<int>(records.size());
    for (auto& b : base) {
      b.rank += shift;
      records.push_back(std::move(b));
    }
    for (auto f : base_flows) flows.push_back({f.from + first, f.to + first});
    append_steps(result.baseline_schedule, steps);
    title += "; baseline 1F1B from pid " + std::to_string(shift);
    baseline_pid = shift;
  }
  // About 200 bytes per op and 180 per flow arrow (measured on the traces this writes).
  auto estimate = [](std::size_t ops, std::size_t arrows) { return 200 * ops + 180 * arrows; };
  TraceWritten w;
  w.total_ops = records.size();
  w.estimated_full_bytes = estimate(records.size(), flows.size());
  for (int st : steps) w.total_steps = std::max(w.total_steps, st + 1);
  w.steps = w.total_steps;
  if (max_bytes > 0 && w.estimated_full_bytes > max_bytes) {
    // The most steps whose ops fit, at the whole trace's mean bytes per op (arrows included).
    const double per_op =
        static_cast<double>(w.estimated_full_bytes) / static_cast<double>(records.size());
    std::vector<std::size_t> ops_before(static_cast<std::size_t>(w.total_steps) + 1, 0);
    for (int st : steps)
      if (st >= 0) ++ops_before[static_cast<std::size_t>(st) + 1];
    for (std::size_t i = 1; i < ops_before.size(); ++i) ops_before[i] += ops_before[i - 1];
    w.steps = 1;
    while (w.steps < w.total_steps &&
           static_cast<double>(ops_before[static_cast<std::size_t>(w.steps) + 1]) * per_op <=
               static_cast<double>(max_bytes))
      ++w.steps;
    keep_first_steps(w.steps, steps, records, flows);
    title += "; first " + std::to_string(w.steps) + " of " + std::to_string(w.total_steps) +
             " schedule steps per rank (size guard)";
  }
  w.ops = records.size();
  write_text_file(path, trace_json(records, flows, title, baseline_pid));
  return w;
}

namespace {

const char* short_name(const ScheduleOp& op) {
  const bool f = op.dir == Direction::forward;
  switch (op.kind) {
    case OpKind::pre_dispatch: return f ? "PD.f" : "PD.b";
    case OpKind::dispatch: return f ? "DI.f" : "DI.b";
    case OpKind::mlp: return f ? "MLP.f" : "MLP.b";
    case OpKind::combine: return f ? "CO.f" : "CO.b";
    case OpKind::mlp_wgrad: return "MLP.w";
    case OpKind::pre_dispatch_wgrad: return "PD.w";
    case OpKind::mtp_post: return f ? "MTP.f" : "MTP.b";
    default: return op_name(op);
  }
}

}  // namespace

std::string ascii_layer_step(const PipelineSchedule& schedule, const SimRun& run, int width) {
  if (schedule.ranks.empty() || run.timings.empty()) return "";
  const Schedule& s = schedule.ranks[0];
  const auto& tm = run.timings[0];
  // A combined step in the middle (else a forward step), and its middle layer step.
  std::vector<int> candidates;
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    if (s.steps[i].f_microbatch >= 0 && s.steps[i].b_microbatch >= 0) candidates.push_back(static_cast<int>(i));
  }
  if (candidates.empty()) {
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
      if (s.steps[i].f_microbatch >= 0) candidates.push_back(static_cast<int>(i));
    }
  }
  if (candidates.empty()) return "";
  const int step = candidates[candidates.size() / 2];
  const ScheduleStep& st = s.steps[step];
  int max_ls = -1;
  for (int i = st.first_op; i < st.end_op; ++i) max_ls = std::max(max_ls, s.ops[i].layer_step);
  if (max_ls < 0) return "";
  const int ls = max_ls / 2;
  std::vector<int> ops;
  TimeNs t0 = -1, t1 = 0;
  for (int i = st.first_op; i < st.end_op; ++i) {
    const ScheduleOp& op = s.ops[i];
    if (op.layer_step != ls || op.lane == Lane::grad_reduce || op.layer < 0) continue;
    ops.push_back(i);
    t0 = t0 < 0 ? tm[i].start_ns : std::min(t0, tm[i].start_ns);
    t1 = std::max(t1, tm[i].end_ns);
  }
  if (ops.empty() || t1 <= t0) return "";
  width = std::max(width, 20);
  const double scale = static_cast<double>(width) / static_cast<double>(t1 - t0);
  char buf[256];
  std::string out;
  std::snprintf(buf, sizeof buf,
                "layer step %d of step %d on pp rank 0 (forward mb %d chunk %d, backward mb %d "
                "chunk %d): %.1f us\n",
                ls, step, st.f_microbatch, st.f_chunk, st.b_microbatch, st.b_chunk,
                us_from_ns(t1 - t0));
  out += buf;
  for (Lane lane : {Lane::compute, Lane::comm}) {
    std::string line(static_cast<std::size_t>(width), ' ');
    for (int i : ops) {
      const ScheduleOp& op = s.ops[i];
      if (op.lane != lane || tm[i].end_ns <= tm[i].start_ns) continue;
      int c0 = static_cast<int>((tm[i].start_ns - t0) * scale);
      int c1 = static_cast<int>((tm[i].end_ns - t0) * scale);
      c0 = std::clamp(c0, 0, width - 1);
      c1 = std::clamp(std::max(c1, c0 + 1), c0 + 1, width);
      for (int c = c0; c < c1; ++c) line[c] = '=';
      line[c0] = '[';
      line[c1 - 1] = ']';
      const std::string label = short_name(op);
      for (int k = 0; k < static_cast<int>(label.size()) && c0 + 1 + k < c1 - 1; ++k) {
        line[c0 + 1 + k] = label[k];
      }
    }
    std::snprintf(buf, sizeof buf, "  %-8s|", lane == Lane::compute ? "compute" : "comm");
    out += buf;
    out += line;
    out += "|\n";
  }
  for (int i : ops) {
    const ScheduleOp& op = s.ops[i];
    std::snprintf(buf, sizeof buf, "    %-7s %-5s %-18s mb %3d layer %3d  %9.1f us  at +%.1f us\n",
                  op.lane == Lane::compute ? "compute" : "comm", short_name(op), op_name(op),
                  op.microbatch, op.layer, us_from_ns(tm[i].end_ns - tm[i].start_ns),
                  us_from_ns(tm[i].start_ns - t0));
    out += buf;
  }
  return out;
}

}  // namespace epo::model
