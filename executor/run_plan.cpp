// epo run: modes (virtual ranks on one GPU, one thread per GPU over NCCL, and with MPI one
// process per node or per GPU group, see run_mpi.hpp), measurement phases, --check against the
// single-rank reference, the measurement document.
#include <algorithm>
#include <functional>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "executor/context.hpp"
#include "executor/gpu_check.hpp"
#include "executor/host_affinity.hpp"
#include "executor/layer_ops.hpp"
#include "executor/process_layout.hpp"
#include "executor/run.hpp"
#include "executor/run_mpi.hpp"
#include "executor/run_layout.hpp"
#include "executor/runner.hpp"
#include "executor/thread_barrier.hpp"
#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"

namespace epo::exec {

namespace {

#if EPO_WITH_MPI
constexpr bool kBuiltWithMpi = true;
#else
constexpr bool kBuiltWithMpi = false;
#endif

struct Plan {
  model::Config cfg;
  RunOptions opt;
  RunLayout layout;
  RunShape sh;
  Transport transport = Transport::local;
  bool virt = false;
  int ranks = 1;
  model::Schedule configured, other;  // other: baseline (overlap on) or overlapped (overlap off)
  int slots = 1;
};

struct Shared {
  std::mutex mu;
  std::vector<OpRecord> records;
  std::vector<Capture> cap_cfg, cap_other;
  std::vector<std::int64_t> memory;
  std::vector<std::int64_t> device_used;  ///< per GPU, at the end of the measured steps
  std::vector<FlexState*> flex;
  double raw_alltoall_us = 0;
  std::vector<std::string> placement;  ///< where each GPU's issuing host thread runs
};

RankSetup setup_for(const Plan& p, int rank, int device) {
  return rank_setup(p.layout, rank, device, p.opt.check);
}

/// Runs the measured phases for the ranks of one host thread. `sync` lines up the threads.
void run_group(const Plan& p, Group& g, Shared& shared, const std::function<void()>& sync) {
  const bool overlap = p.cfg.opt.overlap_moe_expert_parallel_comm;
  auto phase = [&](const model::Schedule& s, bool overlapped, int iters, bool keep,
                   std::vector<Capture>* caps) {
    Runner runner(g, s, p.cfg.opt.delay_wgrad_compute);
    for (int i = 0; i < p.opt.warmup; ++i) {
      runner.run_step();
      sync();
    }
    std::vector<OpRecord> mine;
    for (int i = 0; i < iters; ++i) {
      runner.run_step();
      if (keep) runner.collect(mine, i, overlapped);
      sync();
    }
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.records.insert(shared.records.end(), mine.begin(), mine.end());
    if (caps)
      for (RankState* rs : g.ranks) (*caps)[rs->rank()] = capture(*rs);
  };
  phase(p.configured, overlap, p.opt.iters, true, p.opt.check ? &shared.cap_cfg : nullptr);
  if (overlap)
    phase(p.other, false, p.opt.iters, true, p.opt.check ? &shared.cap_other : nullptr);
  else if (p.opt.check)
    phase(p.other, true, 1, false, &shared.cap_other);
  // The raw NCCL reference needs a communicator: GPUs, not virtual ranks (flex among virtual
  // ranks uses peer pointers only).
  if (p.transport != Transport::local && p.opt.raw_alltoall && g.ranks[0]->nccl != nullptr) {
    const auto& sh = p.sh;
    const double us = raw_alltoall(*g.ranks[0], static_cast<std::int64_t>(sh.tokens) * sh.topk *
                                                    sh.hidden * 2);
    std::lock_guard<std::mutex> lock(shared.mu);
    if (g.ranks[0]->rank() == 0) shared.raw_alltoall_us = us;
  }
  EPO_CHECK_CUDA(cudaDeviceSynchronize());
  const auto [free, total] = device_memory_info();
  std::lock_guard<std::mutex> lock(shared.mu);
  for (RankState* rs : g.ranks) shared.memory[rs->rank()] = rs->allocated_bytes();
  shared.device_used.push_back(static_cast<std::int64_t>(total - free));
}

void run_virtual(const Plan& p, Shared& shared) {
  EPO_CHECK_CUDA(cudaSetDevice(0));
  shared.placement.push_back(pin_thread_near_gpu(0));
  std::vector<std::unique_ptr<RankState>> ranks;
  Group g;
  for (int r = 0; r < p.ranks; ++r) {
    ranks.push_back(std::make_unique<RankState>(p.cfg, p.sh, setup_for(p, r, 0)));
    g.ranks.push_back(ranks.back().get());
  }
  g.transport = p.transport;
  g.comm_sms = p.sh.comm_sms;
  g.shared_device = true;
  if (p.transport == Transport::flex) {
    std::vector<FlexState*> all;
    for (auto& r : ranks) all.push_back(&r->flex());
    for (auto& r : ranks) install_flex_peers(*r, all);
  }
  run_group(p, g, shared, [] {});
}

/// One thread per GPU. With `group` (several MPI processes) the threads drive this process's
/// ranks only, meet the other processes at every barrier and reach their flex buffers through
/// CUDA IPC; a failing thread then ends the whole job with its error.
void run_threads(const Plan& p, Shared& shared, ProcessGroup* group) {
  const int first = group ? group->first_rank() : 0;
  const int n = group ? static_cast<int>(group->devices().size()) : p.ranks;
  auto device_of = [&](int i) { return group ? group->devices()[i] : i; };
  const bool flex = p.transport == Transport::flex;
  ncclUniqueId id;
  if (group) id = group->unique_id();
  else EPO_CHECK_NCCL(nullptr, ncclGetUniqueId(&id));
  Barrier barrier(n, group ? std::function<void()>([group] { group->barrier(); })
                           : std::function<void()>());
  std::vector<std::exception_ptr> errors(n);
  shared.flex.assign(p.ranks, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      const int r = first + i;
      try {
        ScopedOp scope(r, "setup");
        EPO_CHECK_CUDA(cudaSetDevice(device_of(i)));
        {
          const std::string placed = pin_thread_near_gpu(device_of(i));
          std::lock_guard<std::mutex> lock(shared.mu);
          shared.placement.push_back(placed);
        }
        if (flex)  // the GPUs of this process; other processes' through IPC
          for (int j = 0; j < n; ++j) {
            if (j == i) continue;
            const cudaError_t st = cudaDeviceEnablePeerAccess(device_of(j), 0);
            if (st != cudaErrorPeerAccessAlreadyEnabled) EPO_CHECK_CUDA(st);
            cudaGetLastError();
          }
        RankState rs(p.cfg, p.sh, setup_for(p, r, device_of(i)));
        barrier.wait();  // every rank allocated before the collective communicator init
        NcclComm comm(p.ranks, id, r);
        NcclComm meta = comm.split(r);  // the counts all-gather's own communicator
        rs.nccl = comm.get();
        rs.nccl_meta = meta.get();
        Group g;
        g.ranks = {&rs};
        g.transport = p.transport;
        g.comm_sms = p.sh.comm_sms;
        {
          std::lock_guard<std::mutex> lock(shared.mu);
          shared.flex[r] = &rs.flex();
        }
        if (group && flex) {
          group->export_flex(i, rs);
          barrier.wait([group] { group->exchange_flex(); });
        } else {
          barrier.wait();
        }
        if (flex) {
          std::vector<FlexState*> all = shared.flex;
          if (group) group->open_flex_peers(i, all);
          install_flex_peers(rs, all);
        }
        barrier.wait();
        run_group(p, g, shared, [&] { barrier.wait(); });
        EPO_CHECK_CUDA(cudaDeviceSynchronize());
        meta.finalize();
        comm.finalize();
        barrier.wait();  // peers' flex buffers stay alive until everyone is done
        if (group && flex) group->close_flex_peers(i);
      } catch (...) {
        if (group) group->abort(std::current_exception());
        errors[i] = std::current_exception();
        barrier.fail();
      }
    });
  for (auto& t : threads) t.join();
  // The first rank's own failure, not a peer's "another rank failed".
  for (auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const ::epo::Error& err) {
      if (std::string(err.what()).find("another rank failed") == std::string::npos) throw;
    }
  }
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

/// Several processes: this process's records, memory and captures go to world rank 0, which
/// gets every rank's in `shared`. Returns whether this process is world rank 0.
bool gather_at_root(ProcessGroup& group, const Plan& p, Shared& shared) {
  RankResults r;
  for (int i = 0; i < static_cast<int>(group.devices().size()); ++i)
    r.ranks.push_back(group.first_rank() + i);
  r.records = std::move(shared.records);
  r.memory_bytes = std::move(shared.memory);
  if (p.opt.check) {
    r.cap_cfg = std::move(shared.cap_cfg);
    r.cap_other = std::move(shared.cap_other);
  }
  if (!group.gather(r)) return false;
  shared.records = std::move(r.records);
  shared.memory = std::move(r.memory_bytes);
  if (p.opt.check) {
    shared.cap_cfg = std::move(r.cap_cfg);
    shared.cap_other = std::move(r.cap_other);
  }
  return true;
}

void check_against_reference(const Plan& p, Shared& shared, RunResult& result) {
  CheckResult& c = result.check;
  c.schedules_bit_identical = true;
  for (int r = 0; r < p.ranks; ++r) {
    for (const auto& d : bit_differences(shared.cap_cfg[r], shared.cap_other[r])) {
      c.schedules_bit_identical = false;
      c.failures.push_back("rank " + std::to_string(r) + ": overlapped and baseline " + d +
                           " differ");
    }
  }
  const auto schedule_failures = c.failures;
  EPO_CHECK_CUDA(cudaSetDevice(0));
  const RankSetup s = reference_setup(p.layout);
  const model::Schedule& baseline =
      p.cfg.opt.overlap_moe_expert_parallel_comm ? p.other : p.configured;
  RankState ref(p.cfg, p.sh, s);
  Group g;
  g.ranks = {&ref};
  g.comm_sms = p.sh.comm_sms;
  g.shared_device = true;
  Runner runner(g, baseline, p.cfg.opt.delay_wgrad_compute);
  runner.run_step();
  const Capture ref_cap = capture(ref);
  c.failures.clear();
  compare_to_reference(shared.cap_cfg, ref_cap, p.sh.tokens, p.sh.hidden, ref.local_experts(), c);
  c.failures.insert(c.failures.begin(), schedule_failures.begin(), schedule_failures.end());
  c.passed = c.failures.empty();
  // Weight gradients accumulate in bf16 (Megatron keeps fp32 main grads): over many micro-batches
  // the rounding of the two summation orders drifts past the tolerance without any wrong value.
  constexpr int kCheckMicrobatches = 16;
  if (!c.passed && p.sh.num_microbatches > kCheckMicrobatches)
    c.failures.push_back("note: weight gradients accumulate in bf16 over " +
                         std::to_string(p.sh.num_microbatches) +
                         " micro-batches, which the tolerance is not made for; check with --gbs "
                         "giving at most " + std::to_string(kCheckMicrobatches) +
                         " micro-batches");
}

/// Refuses a run whose memory plan does not fit a GPU's free memory, before any allocation.
void refuse_if_too_large(const Plan& p, int gpus) {
  std::int64_t free_min = -1, total = 0;
  for (int d = 0; d < std::min(gpus, p.layout.devices); ++d) {
    EPO_CHECK_CUDA(cudaSetDevice(d));
    const auto [free, all] = device_memory_info();
    if (free_min < 0 || static_cast<std::int64_t>(free) < free_min) {
      free_min = static_cast<std::int64_t>(free);
      total = static_cast<std::int64_t>(all);
    }
  }
  if (free_min >= 0) require_fits(p.cfg, p.layout, p.opt, free_min, total);
}

}  // namespace

RunResult run_plan(const model::Config& cfg, const RunOptions& options) {
  check_runnable(cfg, options);
  set_device_max_connections(cfg.opt.cuda_device_max_connections);
  Plan p;
  p.cfg = cfg;
  p.opt = options;
  p.layout = plan_run(cfg);
  p.sh = p.layout.sh;
  p.virt = p.layout.virt;
  p.ranks = p.layout.ranks;
  p.transport = p.layout.transport;
  const bool overlap = cfg.opt.overlap_moe_expert_parallel_comm;
  p.configured = p.layout.configured;
  p.other = p.layout.other;
  p.slots = p.layout.slots;
  for (const auto* s : {&p.configured, &p.other}) {
    if (s->ops.size() > 4000) continue;  // the check is quadratic; the schedule tests cover it
    const auto errors = verify_schedule_for_runner(*s, p.slots);
    if (!errors.empty())
      throw EPO_RUNTIME_ERROR("the schedule cannot be run safely: ", errors.front(), " (and ",
                              errors.size() - 1, " more)");
  }
  [[maybe_unused]] const bool mpi =
      use_mpi(launch_env(), options.mpi, options.gpus_per_process > 0, kBuiltWithMpi);
  std::unique_ptr<ProcessGroup> group;  // several processes: this one's share (checked by all)
#if EPO_WITH_MPI
  if (mpi) group = join_processes(cfg, options);
#endif
  int gpus = 0;
  const cudaError_t st = group ? cudaSuccess : cudaGetDeviceCount(&gpus);
  if (st != cudaSuccess)
    throw EPO_RUNTIME_ERROR("no usable CUDA device: cudaGetDeviceCount: ", cudaGetErrorString(st));
  const int needed = p.virt ? 1 : p.ranks;
  if (!group && gpus < needed)
    throw EPO_INPUT_ERROR("the plan needs ", needed, " GPUs (", p.ranks, " EP ranks, one per GPU) "
                          "but ", gpus, " are present; use --gpus ", gpus, " or --virtual-ranks ",
                          p.ranks, " to run every rank on one GPU");
  if (!group) refuse_if_too_large(p, gpus);
  Shared shared;
  shared.cap_cfg.resize(p.ranks);
  shared.cap_other.resize(p.ranks);
  shared.memory.assign(p.ranks, 0);
  if (p.virt) run_virtual(p, shared);
  else run_threads(p, shared, group.get());
  RunResult result;
  if (group && !gather_at_root(*group, p, shared)) {
    result.report = false;  // world rank 0 reports the run
    return result;
  }
  if (options.check) check_against_reference(p, shared, result);
  for (const auto& placed : shared.placement) result.notes.push_back(placed);
  result.notes.push_back(std::string("core attention: ") + kCoreAttentionNote);
  result.notes.push_back("LayerNorms and the router's gradient are left out; the LM head and "
                         "embedding are a seeded input and a seeded output gradient");
  if (group) result.notes.push_back(group->describe() + "; world rank 0 gathered the records");
  if (p.virt && cfg.par.dp > 1)
    result.notes.push_back("dp_grad_reduce is not executed between virtual ranks (one GPU)");
  result.notes.push_back(expert_gemm_note(cfg));
  result.raw_alltoall_us = shared.raw_alltoall_us;
  result.raw_alltoall_bytes_per_rank =
      static_cast<double>(p.sh.tokens) * p.sh.topk * p.sh.hidden * 2.0;

  RunInfo info;
  info.virtual_ranks = cfg.virtual_ranks;
  info.gpus = p.virt ? 1 : p.ranks;
  info.layers = cfg.model.num_layers;
  info.iters = options.iters;
  info.warmup = options.warmup;
  info.routing = model::to_string(cfg.opt.routing.kind);
  info.expert_gemm = model::to_string(cfg.opt.expert_gemm);
  info.expert_gemm_path = model::to_string(model::expert_gemm_path(cfg));
  info.overlapped = overlap;
  info.shared_clock = p.virt;
  info.peak_memory_bytes = shared.memory;
  info.device_used_bytes = shared.device_used;
  const ScheduleSummary summary = summarize(shared.records, overlap, p.virt);
  result.comm_busy_us = summary.comm_busy_us;
  result.exposed_comm_us = summary.exposed_comm_us;
  result.measurement = measurement_json(context_json(0, options.command_line, options.git_revision),
                                        model::to_json(cfg), info, shared.records);
  // Trace: the last measured step of the configured schedule (pids 0..R-1) and of the baseline
  // (pids R..2R-1), with the schedule's cross-stream waits as arrows.
  std::vector<model::TraceRecord> trace;
  std::vector<model::TraceFlow> flows;
  auto add = [&](bool overlapped, const model::Schedule& s, int pid_offset) {
    const auto recs = measured_trace_records(shared.records, overlapped, options.iters - 1,
                                             pid_offset, p.virt);
    model::PipelineSchedule one;
    one.ranks.push_back(s);
    const auto f = model::trace_flows(one);
    const int n = static_cast<int>(s.ops.size());
    if (static_cast<int>(recs.size()) == p.ranks * n)
      for (int r = 0; r < p.ranks; ++r)
        for (const auto& fl : f)
        flows.push_back({static_cast<int>(trace.size()) + r * n + fl.from,
                         static_cast<int>(trace.size()) + r * n + fl.to});
    trace.insert(trace.end(), recs.begin(), recs.end());
  };
  add(overlap, p.configured, 0);
  if (overlap) add(false, p.other, p.ranks);
  result.trace_json = model::trace_json(trace, flows, "measured: " + cfg.model_name);
  return result;
}

}  // namespace epo::exec
