// What epo run will run and the memory it will take (run_layout.hpp).
#include "executor/run_layout.hpp"

#include <algorithm>
#include <cstdio>

#include "model/error.hpp"

namespace epo::exec {

RunLayout plan_run(const model::Config& cfg) {
  RunLayout p;
  p.sh = run_shape(cfg);
  p.virt = cfg.virtual_ranks > 0;
  p.ranks = cfg.par.ep;
  p.devices = p.virt ? 1 : p.ranks;
  const bool flex = cfg.opt.dispatcher == model::Dispatcher::flex;
  p.transport = flex ? Transport::flex : (p.virt ? Transport::local : Transport::nccl);
  const bool overlap = cfg.opt.overlap_moe_expert_parallel_comm;
  p.configured = model::build_schedule(cfg, 0, overlap);
  p.other = model::build_schedule(cfg, 0, !overlap);
  p.slots = std::max(activation_slots(p.configured), activation_slots(p.other));
  return p;
}

RankSetup rank_setup(const RunLayout& layout, int rank, int device, bool keep_outputs) {
  RankSetup s;
  s.rank = rank;
  s.device = device;
  s.num_ranks = layout.ranks;
  s.slots = layout.slots;
  s.num_microbatches = layout.sh.num_microbatches;
  s.transport = layout.transport;
  s.keep_outputs = keep_outputs;
  return s;
}

RankSetup reference_setup(const RunLayout& layout) {
  RankSetup s;
  s.rank = 0;
  s.num_ranks = 1;
  s.blocks = layout.ranks;
  s.num_microbatches = layout.sh.num_microbatches;
  s.transport = Transport::local;
  s.keep_outputs = true;
  if (layout.transport == Transport::flex) s.emulate_flex_ranks = layout.ranks;
  // The reference runs the baseline schedule only.
  const bool overlapped_configured = layout.configured.overlapped;
  s.slots = activation_slots(overlapped_configured ? layout.other : layout.configured);
  return s;
}

RunMemory run_memory(const model::Config& cfg, const RunLayout& layout, bool check) {
  RunMemory m;
  const int per_device = layout.virt ? layout.ranks : 1;
  std::int64_t on_device = 0;
  for (int r = 0; r < layout.ranks; ++r) {
    m.ranks.push_back(plan_rank_memory(cfg, layout.sh, rank_setup(layout, r, 0, check)));
    if (layout.virt) on_device += m.ranks.back().total_bytes;
    else on_device = std::max(on_device, m.ranks.back().total_bytes);
  }
  m.reserve_bytes = kDeviceReserveBytes + per_device * kRankReserveBytes;
  m.device_bytes = on_device + m.reserve_bytes;
  if (check)
    m.reference_bytes = plan_rank_memory(cfg, layout.sh, reference_setup(layout)).total_bytes +
                        kDeviceReserveBytes + kRankReserveBytes;
  return m;
}

namespace {

/// Bytes the fullest GPU needs for `cfg`, or -1 if it cannot be run.
std::int64_t device_need(const model::Config& cfg, const RunOptions& options) {
  try {
    check_runnable(cfg, options);
    const RunLayout layout = plan_run(cfg);
    const RunMemory m = run_memory(cfg, layout, options.check);
    return std::max(m.device_bytes, m.reference_bytes);
  } catch (const ::epo::Error&) {
    return -1;
  }
}

std::string gb(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GB", static_cast<double>(bytes) / 1e9);
  return buf;
}

}  // namespace

std::vector<std::string> runs_that_fit(const model::Config& cfg, const RunOptions& options,
                                       std::int64_t device_capacity_bytes) {
  std::vector<std::string> out;
  auto fits = [&](const model::Config& c, const std::string& flags) {
    const std::int64_t need = device_need(c, options);
    if (need < 0 || need > device_capacity_bytes) return false;
    out.push_back(flags + " (" + gb(need) + " on the fullest GPU)");
    return true;
  };
  // Fewer layers (the most that fit).
  for (int n = cfg.model.num_layers - 1; n >= 1; --n) {
    model::Config c = cfg;
    c.model.num_layers = n;
    c.model.first_k_dense_layers = std::min(c.model.first_k_dense_layers, n);
    try {
      c.derive_and_check();
    } catch (const ::epo::Error&) {
      continue;
    }
    if (fits(c, "--layers " + std::to_string(n))) break;
  }
  // Shorter sequences (the longest that fit).
  for (int seq = cfg.par.seq_length / 2; seq >= 128; seq /= 2) {
    model::Config c = cfg;
    c.par.seq_length = seq;
    try {
      c.derive_and_check();
    } catch (const ::epo::Error&) {
      continue;
    }
    if (fits(c, "--seq " + std::to_string(seq))) break;
  }
  // Fewer virtual ranks, the same micro-batches each (the most ranks that fit).
  if (cfg.virtual_ranks > 1)
    for (int r = cfg.virtual_ranks / 2; r >= 1; r /= 2) {
      if (cfg.model.num_experts % r != 0) continue;
      model::Config c = cfg;
      c.virtual_ranks = r;
      c.num_gpus = r;
      c.par.ep = r;
      c.par.global_batch_size = cfg.par.global_batch_size * r / cfg.virtual_ranks;
      try {
        c.derive_and_check();
      } catch (const ::epo::Error&) {
        continue;
      }
      const std::string flags = "--virtual-ranks " + std::to_string(r) + " --gpus " +
                                std::to_string(r) + " --ep " + std::to_string(r) + " --gbs " +
                                std::to_string(c.par.global_batch_size);
      if (fits(c, flags)) break;
    }
  return out;
}

void require_fits(const model::Config& cfg, const RunLayout& layout, const RunOptions& options,
                  std::int64_t free_bytes, std::int64_t total_bytes) {
  const RunMemory m = run_memory(cfg, layout, options.check);
  const std::int64_t need = std::max(m.device_bytes, m.reference_bytes);
  if (need <= free_bytes) return;
  std::string msg = "the run needs " + gb(need) + " on " +
                    (layout.virt ? "its GPU (all " + std::to_string(layout.ranks) +
                                       " virtual ranks)"
                                 : std::string("its fullest GPU")) +
                    " but " + gb(free_bytes) + " of " + gb(total_bytes) +
                    " are free; see `epo run --dry-run` for where it goes";
  const auto smaller = runs_that_fit(cfg, options, free_bytes);
  if (smaller.empty()) msg += "; no smaller run of this plan fits";
  for (std::size_t i = 0; i < smaller.size(); ++i)
    msg += (i == 0 ? "; these fit: " : ", or ") + smaller[i];
  throw EPO_INPUT_ERROR(msg);
}

}  // namespace epo::exec
