// epo run --dry-run: what the run would do and the device memory each rank would allocate, from
// the executor's own memory plan (executor/run_layout.hpp), on any machine.
#include "cli/run_dry.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/report_format.hpp"
#include "executor/run_layout.hpp"
#include "model/config_io.hpp"

namespace epo::cli {

namespace {

const char* transport_name(exec::Transport t) {
  switch (t) {
    case exec::Transport::local: return "local copies between virtual ranks";
    case exec::Transport::nccl: return "NCCL";
    case exec::Transport::flex: return "flex kernels (peer stores)";
  }
  return "?";
}

nlohmann::json plan_json(const exec::RankMemoryPlan& p) {
  nlohmann::json classes = nlohmann::json::object();
  for (int c = 0; c < exec::kNumMemClasses; ++c)
    classes[exec::to_string(static_cast<exec::MemClass>(c))] = p.class_bytes[c];
  nlohmann::json buffers = nlohmann::json::array();
  for (const auto& a : p.allocations)
    buffers.push_back({{"name", a.name}, {"class", exec::to_string(a.cls)},
                       {"offset_bytes", a.offset}, {"bytes", a.bytes}});
  return {{"total_bytes", p.total_bytes}, {"class_bytes", classes},
          {"capacity_rows", p.capacity_rows}, {"pinned_host_bytes", p.pinned_bytes},
          {"allocations", buffers}};
}

}  // namespace

int print_dry_run(const model::Config& cfg, const exec::RunOptions& options,
                  const std::string& json_path) {
  exec::check_runnable(cfg, options);
  const exec::RunLayout lay = exec::plan_run(cfg);
  const exec::RunMemory mem = exec::run_memory(cfg, lay, options.check);
  const auto& sh = lay.sh;
  int moe_layers = 0;
  for (int l = 0; l < sh.num_layers; ++l) moe_layers += l >= sh.first_k_dense ? 1 : 0;
  std::printf("# epo run --dry-run: nothing is allocated; the figures are the executor's memory "
              "plan (the allocation it makes)\n");
  std::printf("model      %s, %d layer(s) (%d MoE, %d dense)\n", cfg.model_name.c_str(),
              sh.num_layers, moe_layers, sh.num_layers - moe_layers);
  std::printf("ranks      EP %d, %s; dispatcher %s over %s\n", lay.ranks,
              lay.virt ? "virtual ranks on one GPU" : "one GPU each",
              model::to_string(cfg.opt.dispatcher), transport_name(lay.transport));
  std::printf("schedule   %s, delay_wgrad %s; %d micro-batches of %d tokens per rank "
              "(seq %d x mbs %d); %d activation slot(s) per layer\n",
              cfg.opt.overlap_moe_expert_parallel_comm ? "combined-1F1B overlap, then the 1F1B "
                                                         "baseline"
                                                       : "1F1B",
              cfg.opt.delay_wgrad_compute ? "on" : "off", sh.num_microbatches, sh.tokens, sh.seq,
              sh.mbs, lay.slots);
  std::printf("experts    top-%d of %d, %d per rank (ffn %d, hidden %d); %s routing; expert-row "
              "capacity %lld rows per rank (mean %lld)\n",
              sh.topk, sh.num_experts, sh.local_experts, sh.expert_ffn, sh.hidden,
              model::to_string(cfg.opt.routing.kind),
              static_cast<long long>(mem.ranks.front().capacity_rows),
              static_cast<long long>(sh.tokens) * sh.topk);
  std::printf("steps      %d warm-up + %d measured per schedule%s\n\n", options.warmup,
              options.iters, options.check ? ", then the --check reference" : "");
  std::printf("%-5s", "rank");
  for (int c = 0; c < exec::kNumMemClasses; ++c)
    std::printf(" %11s", exec::to_string(static_cast<exec::MemClass>(c)));
  std::printf(" %11s\n", "total");
  for (std::size_t r = 0; r < mem.ranks.size(); ++r) {
    const auto& p = mem.ranks[r];
    std::printf("%-5zu", r);
    for (int c = 0; c < exec::kNumMemClasses; ++c)
      std::printf(" %11s", fmt_bytes(static_cast<double>(p.class_bytes[c])).c_str());
    std::printf(" %11s\n", fmt_bytes(static_cast<double>(p.total_bytes)).c_str());
  }
  for (int c = 0; c < exec::kNumMemClasses; ++c)
    std::printf("  %-11s %s\n", exec::to_string(static_cast<exec::MemClass>(c)),
                exec::describe(static_cast<exec::MemClass>(c)));
  // Where rank 0's memory goes, largest first (a name summed over slots and layers).
  std::map<std::string, std::pair<std::int64_t, int>> by_name;
  for (const auto& a : mem.ranks.front().allocations) {
    auto& e = by_name[std::string(exec::to_string(a.cls)) + ": " + a.name];
    e.first += a.bytes;
    e.second += 1;
  }
  std::vector<std::pair<std::string, std::pair<std::int64_t, int>>> rows(by_name.begin(),
                                                                         by_name.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("\nrank 0, largest buffers (summed over slots and layers):\n");
  for (std::size_t i = 0; i < rows.size() && i < 14; ++i)
    std::printf("  %11s  %3d x  %s\n", fmt_bytes(static_cast<double>(rows[i].second.first)).c_str(),
                rows[i].second.second, rows[i].first.c_str());
  const double capacity = cfg.hw.hbm_bytes;
  const std::int64_t need = std::max(mem.device_bytes, mem.reference_bytes);
  std::printf("\nper GPU    %s: ranks' plans %s + reserve %s (context, libraries)%s; %s has %s: "
              "%s\n",
              lay.virt ? "the one GPU" : "fullest GPU",
              fmt_bytes(static_cast<double>(mem.device_bytes - mem.reserve_bytes)).c_str(),
              fmt_bytes(static_cast<double>(mem.reserve_bytes)).c_str(),
              mem.reference_bytes > 0
                  ? (", --check reference afterwards " +
                     fmt_bytes(static_cast<double>(mem.reference_bytes)))
                        .c_str()
                  : "",
              cfg.hardware_name.c_str(), fmt_bytes(capacity).c_str(),
              need <= capacity ? "fits" : "does NOT fit");
  std::printf("host       pinned staging %s per rank\n",
              fmt_bytes(static_cast<double>(mem.ranks.front().pinned_bytes)).c_str());
  if (need > capacity) {
    const auto smaller = exec::runs_that_fit(cfg, options, static_cast<std::int64_t>(capacity));
    if (smaller.empty()) std::printf("no smaller run of this plan fits\n");
    for (const auto& s : smaller) std::printf("fits:      %s\n", s.c_str());
  }
  if (!json_path.empty()) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& p : mem.ranks) ranks.push_back(plan_json(p));
    const nlohmann::json doc = {
        {"schema_version", 1},
        {"kind", "run_memory_plan"},
        {"model", cfg.model_name},
        {"hardware", cfg.hardware_name},
        {"ranks", lay.ranks},
        {"virtual_ranks", cfg.virtual_ranks},
        {"layers", sh.num_layers},
        {"microbatches", sh.num_microbatches},
        {"tokens_per_microbatch", sh.tokens},
        {"activation_slots", lay.slots},
        {"device_bytes", mem.device_bytes},
        {"reserve_bytes", mem.reserve_bytes},
        {"reference_bytes", mem.reference_bytes},
        {"device_capacity_bytes", capacity},
        {"fits", need <= capacity},
        {"rank_plans", ranks}};
    model::write_json_file(json_path, doc);
  }
  return 0;
}

}  // namespace epo::cli
