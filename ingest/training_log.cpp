#include "ingest/training_log.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <regex>

#include "ingest/log_lines.hpp"

namespace epo::ingest {

namespace {

constexpr int kMaxWrappedLines = 8;
constexpr double kStepMatchMs = 10.0;  // Step Time is printed in s with 2 decimals  // a record hard-wrapped over more lines is not rejoined

/// A printed figure: every one a log prints (times, throughput, loss, memory) is finite and not
/// negative; anything else (an overflowing number, a stray sign) counts as not printed.
double to_d(const std::string& s) {
  const double v = std::strtod(s.c_str(), nullptr);
  return std::isfinite(v) && v >= 0 ? v : kNotPrinted;
}
/// A printed count (iteration, samples, batch size, skipped iterations): 0 to 2^53 (exact in a
/// double, so differences of two never overflow); anything else counts as not printed (-1).
constexpr long long kMaxLogCount = 1LL << 53;
long long to_ll(const std::string& s) {
  errno = 0;
  const long long v = std::strtoll(s.c_str(), nullptr, 10);
  return errno == 0 && v >= 0 && v <= kMaxLogCount ? v : -1;
}


// Where a terminal wrapped a record and trailing blanks were trimmed, the blank between two words
// can be lost, so the patterns take \s* where Megatron prints one blank.
struct Patterns {
  std::regex megatron_iter{R"(iteration\s*(\d+)\s*/\s*(\d+)\s*\|)"};
  std::regex nemo_iter{R"(Training epoch \d+, iteration (\d+)/(\d+))"};
  std::regex iter_end{R"(nan\s*iterations:\s*\d+\s*\|)"};
  std::regex consumed{R"(consumed\s*samples:\s*(\d+))"};
  std::regex elapsed{R"(elapsed\s*time\s*per\s*iteration\s*\(ms\):\s*([0-9.]+))"};
  std::regex tflops{R"(throughput\s*per\s*GPU\s*\(TFLOP/s/GPU\):\s*([0-9.]+))"};
  std::regex gbs{R"(global\s*batch\s*size:\s*(\d+))"};
  std::regex lm_loss{R"(lm\s*loss:\s*([-+0-9.eE]+|nan|inf))"};
  std::regex loss_scale{R"(loss\s*scale:\s*([0-9.eE+]+))"};
  std::regex skipped{R"(number\s*of\s*skipped\s*iterations:\s*(\d+))"};
  std::regex nans{R"(number\s*of\s*nan\s*iterations:\s*(\d+))"};
  std::regex nemo_step{R"(train_step_timing in s[:=]\s*([0-9.eE+-]+))"};
  std::regex nemo_tflops{R"(TFLOPS_per_GPU[:=]\s*([0-9.eE+-]+))"};
  std::regex nemo_gbs{R"(global_batch_size[:=]\s*(\d+))"};
  std::regex nemo_loss{R"(reduced_train_loss[:=]\s*([0-9.eE+-]+))"};
  std::regex nemo_consumed{R"(consumed_samples[:=]\s*(\d+))"};
  std::regex nemo_max_alloc{R"(max_memory_allocated[:=]\s*([0-9.eE+]+))"};
  std::regex nemo_max_res{R"(max_memory_reserved[:=]\s*([0-9.eE+]+))"};
  // Lightning's progress bar (NeMo 2 without ProgressPrinter): "Epoch 0: : 10%|..| 10/100
  // [01:48<16:12, reduced_train_loss=5.17, global_step=9.00, ..., train_step_timing in s=10.80]".
  std::regex bar_iter{R"(Epoch \d+:.*?\|\s*(\d+)/(\d+|\?)\s*\[)"};
  std::regex bar_global_step{R"(global_step=\s*([0-9.]+))"};
  std::regex mem_start{R"(memory\s*\((MB|GB)\))"};
  std::regex mem_end{R"(max\s*reserved:\s*[0-9.]+|mem-alloc-retires)"};
  std::regex mem_mb{R"(\[Rank\s*(\d+)\]\s*\(after\s*(\d+)\s*iterations\)\s*memory\s*\(MB\)\s*\|\s*allocated:\s*([0-9.]+)\s*\|\s*max\s*allocated:\s*([0-9.]+)\s*\|\s*reserved:\s*([0-9.]+)\s*\|\s*max\s*reserved:\s*([0-9.]+))"};
  std::regex mem_gb{R"(\[Rank\s*(\d+)\]\s*\(after\s*(\d+)\s*iterations\)\s*memory\s*\(GB\)(.*))"};
  std::regex gb_field{R"((mem-[a-z-]+-gigabytes):\s*([0-9.eE+-]+))"};
  std::regex step_time{R"(Step Time\s*:\s*([0-9.]+)s\s*GPU utilization:\s*([0-9.]+)\s*(MODEL_)?TFLOP/s/GPU)"};
  std::regex theoretical{R"(Theoretical memory footprints: weight and optimizer=([0-9.]+) MB(, activation=([0-9.]+) MB, total=([0-9.]+) MB)?)"};
  std::regex params{R"(number of parameters on \(tensor, (?:gtp_weight_remat, )?pipeline\) model parallel rank \([0-9, ]+\):\s*(\d+))"};
  std::regex world{R"(using world size:\s*(\d+))"};
  std::regex overlap_warning{R"(Falling back to alltoall|only applicable|overlap_moe_expert_parallel_comm|CUDA_DEVICE_MAX_CONNECTIONS|Skipping DeepEP)"};
};

const Patterns& pat() {
  static const Patterns p;
  return p;
}

bool find(const std::string& s, const std::regex& r, std::smatch& m) { return std::regex_search(s, m, r); }

/// Records that a terminal wrapped are joined back: an iteration line until its last field, a
/// memory line until "max reserved".
std::vector<LogLine> joined_records(const std::vector<LogLine>& lines) {
  std::vector<LogLine> out;
  const auto& p = pat();
  for (size_t i = 0; i < lines.size(); ++i) {
    LogLine l = lines[i];
    const bool iter = std::regex_search(l.text, p.megatron_iter) && !std::regex_search(l.text, p.nemo_iter);
    const bool mem = std::regex_search(l.text, p.mem_start);
    int joined = 0;
    while ((iter && !std::regex_search(l.text, p.iter_end)) || (mem && !std::regex_search(l.text, p.mem_end))) {
      if (i + 1 >= lines.size() || ++joined > kMaxWrappedLines) break;
      const std::string& next = lines[i + 1].text;
      if (std::regex_search(next, p.megatron_iter) || next.find("[Rank") != std::string::npos) break;
      l.text += next;
      ++i;
    }
    out.push_back(std::move(l));
  }
  return out;
}

IterationRecord megatron_iteration(const std::string& s, const std::smatch& head, int line) {
  const auto& p = pat();
  IterationRecord r;
  r.line = line;
  r.iteration = to_ll(head[1]);
  r.train_iters = to_ll(head[2]);
  std::smatch m;
  if (find(s, p.consumed, m)) r.consumed_samples = to_ll(m[1]);
  if (find(s, p.elapsed, m)) r.elapsed_ms = to_d(m[1]);
  if (find(s, p.tflops, m)) r.tflops_per_gpu = to_d(m[1]);
  if (find(s, p.gbs, m)) r.global_batch_size = to_ll(m[1]);
  if (find(s, p.lm_loss, m)) r.lm_loss = to_d(m[1]);
  if (find(s, p.loss_scale, m)) r.loss_scale = to_d(m[1]);
  if (find(s, p.skipped, m)) r.skipped_iterations = to_ll(m[1]);
  if (find(s, p.nans, m)) r.nan_iterations = to_ll(m[1]);
  return r;
}

void nemo_iteration(const std::string& s, const std::smatch& head, int line, TrainingLog& log) {
  const auto& p = pat();
  IterationRecord r;
  r.nemo = true;
  r.line = line;
  r.iteration = to_ll(head[1]);
  r.train_iters = to_ll(head[2]);
  std::smatch m;
  if (find(s, p.nemo_step, m)) r.elapsed_ms = to_d(m[1]) * 1000.0;
  if (find(s, p.nemo_tflops, m)) r.tflops_per_gpu = to_d(m[1]);
  if (find(s, p.nemo_gbs, m)) r.global_batch_size = to_ll(m[1]);
  if (find(s, p.nemo_loss, m)) r.lm_loss = to_d(m[1]);
  if (find(s, p.nemo_consumed, m)) r.consumed_samples = to_ll(m[1]);
  log.iterations.push_back(r);
  MemoryRecord mem;
  mem.line = line;
  mem.after_iteration = r.iteration;
  constexpr double kMiB = 1024.0 * 1024.0;  // the callback prints bytes
  if (find(s, p.nemo_max_alloc, m)) mem.max_allocated_mb = to_d(m[1]) / kMiB;
  if (find(s, p.nemo_max_res, m)) mem.max_reserved_mb = to_d(m[1]) / kMiB;
  if (mem.max_allocated_mb == mem.max_allocated_mb || mem.max_reserved_mb == mem.max_reserved_mb)
    log.memory.push_back(mem);
}

void memory_records(const std::string& s, int line, TrainingLog& log) {
  const auto& p = pat();
  for (auto it = std::sregex_iterator(s.begin(), s.end(), p.mem_mb); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    log.memory.push_back({line, static_cast<int>(to_ll(m[1])), to_ll(m[2]), to_d(m[3]), to_d(m[4]),
                          to_d(m[5]), to_d(m[6])});
  }
  std::smatch m;
  if (!find(s, p.mem_gb, m)) return;
  MemoryRecord r;  // Bridge v0.2+: GB (1e9 bytes), keys from torch.cuda.memory_stats
  r.line = line;
  r.rank = static_cast<int>(to_ll(m[1]));
  r.after_iteration = to_ll(m[2]);
  const std::string rest = m[3];
  constexpr double kMbPerGb = 1e9 / (1024.0 * 1024.0);
  for (auto it = std::sregex_iterator(rest.begin(), rest.end(), p.gb_field); it != std::sregex_iterator(); ++it) {
    const std::string k = (*it)[1];
    const double mb = to_d((*it)[2]) * kMbPerGb;
    if (k == "mem-allocated-gigabytes") r.allocated_mb = mb;
    else if (k == "mem-max-allocated-gigabytes") r.max_allocated_mb = mb;
    else if (k == "mem-reserved-gigabytes") r.reserved_mb = mb;
    else if (k == "mem-max-reserved-gigabytes") r.max_reserved_mb = mb;
  }
  log.memory.push_back(r);
}

}  // namespace

bool TrainingLog::empty() const {
  return iterations.empty() && memory.empty() && bridge_steps.empty() &&
         !(theoretical_weight_optimizer_mb == theoretical_weight_optimizer_mb);
}

TrainingLog read_training_log(const std::string& text) {
  const auto& p = pat();
  TrainingLog log;
  for (const auto& l : joined_records(log_lines(text))) {
    const std::string& s = l.text;
    std::smatch m;
    if (find(s, p.nemo_iter, m)) {
      nemo_iteration(s, m, l.number, log);
      continue;
    }
    if (s.find("train_step_timing") != std::string::npos && find(s, p.bar_iter, m)) {
      nemo_iteration(s, m, l.number, log);
      std::smatch g;  // the bar counts batches of the epoch; global_step counts optimizer steps
      if (find(s, p.bar_global_step, g)) {
        const double step = to_d(g[1]);
        log.iterations.back().iteration =
            !std::isnan(step) && step < kMaxLogCount ? std::llround(step) + 1 : -1;
      }
      continue;
    }
    if (find(s, p.megatron_iter, m) && s.find("elapsed") != std::string::npos) {
      IterationRecord r = megatron_iteration(s, m, l.number);
      // Bridge prints its Step Time line (rank 0) just before the iteration line of the same
      // step; its TFLOP/s stands in where the iteration line has none.
      if (std::isnan(r.tflops_per_gpu) && !log.bridge_steps.empty() &&
          std::fabs(log.bridge_steps.back().step_s * 1000.0 - r.elapsed_ms) < kStepMatchMs)
        r.tflops_per_gpu = log.bridge_steps.back().tflops_per_gpu;
      log.iterations.push_back(r);
    }
    if (s.find("memory") != std::string::npos) memory_records(s, l.number, log);
    if (find(s, p.step_time, m)) log.bridge_steps.push_back({l.number, to_d(m[1]), to_d(m[2])});
    if (find(s, p.theoretical, m)) {
      log.theoretical_weight_optimizer_mb = to_d(m[1]);
      if (m[2].matched) {
        log.theoretical_activation_mb = to_d(m[3]);
        log.theoretical_total_mb = to_d(m[4]);
      }
    }
    if (find(s, p.params, m)) log.params_per_model_parallel_rank = to_ll(m[1]);
    if (find(s, p.world, m)) log.world_size = static_cast<int>(to_ll(m[1]));
    if (std::regex_search(s, p.overlap_warning) && s.find("_ARGS:") == std::string::npos &&
        s.find(" ....") == std::string::npos)  // not a launcher echo or an argument line
      log.overlap_warnings.push_back("line " + std::to_string(l.number) + ": " + s.substr(0, 240));
  }
  return log;
}

}  // namespace epo::ingest
