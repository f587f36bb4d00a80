// bench_kernels rows of the compute-side kernels: routing, layouts, permute, unpermute, SwiGLU and
// the grouped GEMMs, each next to its bound measured in the same run.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include <cublas_v2.h>

#include "bench/bench_kernels.hpp"
#include "executor/expert_gemm.hpp"
#include "model/cost.hpp"

namespace epo::bench::kernels {

namespace ek = epo::kernels;

namespace {

constexpr double kMB = 1e6;
constexpr double kMemGoalPct = 80.0;
constexpr double kGemmGoalPct = 85.0;
constexpr double kRoutingGoalUs = 20.0;

std::string tag(const Shape& s, int tokens) {
  return s.model + " " + std::to_string(tokens);
}

// Memory-bound row: bound = device-to-device copy moving the same bytes (half read, half written).
void memory_row(Report& report, const std::string& op, const Shape& shape, int tokens,
                const std::string& param, double time_us, double bytes, cudaStream_t stream,
                const Timing& timing) {
  RowData row{
      op,      shape.model,
      param,   tokens,
      time_us, bytes / kMB,
      -1,      copy_bound_us(static_cast<size_t>(bytes / 2) / 16 * 16 + 16, stream, timing)};
  const double pct = add_row(report, row);
  report.goal(op + " " + tag(shape, tokens) + " of copy bound", pct, ">=", kMemGoalPct, "%");
}

std::vector<int> balanced_counts(int rows, int experts) {
  std::vector<int> c(experts, rows / experts);
  for (int e = 0; e < rows % experts; ++e) ++c[e];
  return c;
}

// Zipf-like skew (weight (e+1)^-1.2) with the same total, a few experts empty.
std::vector<int> skewed_counts(int rows, int experts) {
  std::vector<double> w(experts);
  double sum = 0;
  for (int e = 0; e < experts; ++e) sum += w[e] = e % 7 == 6 ? 0.0 : std::pow(e + 1.0, -1.2);
  std::vector<int> c(experts);
  int given = 0;
  for (int e = 0; e < experts; ++e) given += c[e] = static_cast<int>(rows * w[e] / sum);
  c[0] += rows - given;
  return c;
}

std::vector<int64_t> offsets_of(const std::vector<int>& counts) {
  std::vector<int64_t> o(counts.size());
  int64_t at = 0;
  for (size_t e = 0; e < counts.size(); ++e) {
    o[e] = at;
    at += counts[e];
  }
  return o;
}

// Every grouped-GEMM path, with its row-name tag.
constexpr ek::GroupedGemmAlgo kAlgos[] = {
    ek::GroupedGemmAlgo::kPerExpertLoop, ek::GroupedGemmAlgo::kGroupedBatched,
    ek::GroupedGemmAlgo::kMultiStream, ek::GroupedGemmAlgo::kStridedBatched};
const char* algo_name(ek::GroupedGemmAlgo algo) {
  switch (algo) {
    case ek::GroupedGemmAlgo::kPerExpertLoop:
      return "loop";
    case ek::GroupedGemmAlgo::kGroupedBatched:
      return "batched";
    case ek::GroupedGemmAlgo::kMultiStream:
      return "streams";
    case ek::GroupedGemmAlgo::kStridedBatched:
      return "strided";
  }
  return "?";
}

void gemm_rows(Report& report, const Shape& shape, int tokens, int num_ranks, cudaStream_t stream,
               const Timing& common_timing) {
  // cuBLAS may wait on the host inside a call (workspace, pointer arrays): no gate. The rows are
  // milliseconds of GPU work, so the host's launch time does not matter to them.
  Timing timing = common_timing;
  timing.gated = false;
  const int local = shape.num_experts / num_ranks;
  const int rows = tokens * shape.num_topk;  // rows per rank when routing is balanced
  const int H = shape.hidden, N = 2 * shape.ffn;
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate");
  DeviceMem x(sizeof(ek::bf16) * rows * static_cast<size_t>(H));
  DeviceMem w(sizeof(ek::bf16) * local * static_cast<size_t>(H) * N);
  DeviceMem out(sizeof(ek::bf16) * rows * static_cast<size_t>(N));
  DeviceMem dx(x.bytes()), dw(w.bytes());
  DeviceMem workspace(ek::grouped_gemm_workspace_bytes(local));
  fill_random_bf16(x.as<ek::bf16>(), x.bytes() / 2, 1, 1.f, stream);
  fill_random_bf16(w.as<ek::bf16>(), w.bytes() / 2, 2, 0.05f, stream);
  fill_random_bf16(out.as<ek::bf16>(), out.bytes() / 2, 3, 1.f, stream);
  const double gflop = 2.0 * rows * H * N / 1e9;
  const std::string param =
      std::to_string(local) + "x" + std::to_string(H) + "x" + std::to_string(N);

  // Bounds: one dense GEMM of the same total FLOPs and the same operand layout.
  const double dense_fwd = median_time_us(
      [&] {
        ek::gemm_bf16(handle, x.as<ek::bf16>(), w.as<ek::bf16>(), out.as<ek::bf16>(), rows, N, H,
                      false, false, 1.f, 0.f, stream);
      },
      stream, timing);
  const double dense_dgrad = median_time_us(
      [&] {
        ek::gemm_bf16(handle, out.as<ek::bf16>(), w.as<ek::bf16>(), dx.as<ek::bf16>(), rows, H, N,
                      false, true, 1.f, 0.f, stream);
      },
      stream, timing);
  const double dense_wgrad = median_time_us(
      [&] {
        ek::gemm_bf16(handle, x.as<ek::bf16>(), out.as<ek::bf16>(), dw.as<ek::bf16>(), H, N, rows,
                      true, false, 1.f, 0.f, stream);
      },
      stream, timing);
  add_row(report, {"dense_gemm_fwd", shape.model,
                   std::to_string(rows) + "x" + std::to_string(H) + "x" + std::to_string(N), tokens,
                   dense_fwd, -1, gflop, -1});

  // The goal is on the path epo run's `--expert-gemm auto` takes for this shape on a GPU of its
  // own; the other paths are reported next to it.
  const auto chosen = epo::exec::kernel_algo(model::automatic_expert_gemm(
      static_cast<double>(rows) / local, static_cast<double>(H) * N, false));
  report.context("gg_auto " + tag(shape, tokens),
                 std::string("epo run --expert-gemm auto takes the ") + algo_name(chosen) +
                     " path here (model::automatic_expert_gemm, one rank per GPU)");
  struct Routing {
    const char* name;
    std::vector<int> counts;
  };
  const std::vector<Routing> routings = {{"balanced", balanced_counts(rows, local)},
                                         {"skewed", skewed_counts(rows, local)}};
  for (const auto& r : routings) {
    const auto offsets = offsets_of(r.counts);
    for (auto algo : kAlgos) {
      const std::string op = std::string("gg_fwd_") + algo_name(algo) + "_" + r.name;
      try {
        const double t = median_time_us(
            [&] {
              ek::grouped_gemm_fwd(handle, x.as<ek::bf16>(), w.as<ek::bf16>(), out.as<ek::bf16>(),
                                   r.counts.data(), offsets.data(), local, N, H, algo,
                                   workspace.as<void>(), stream);
            },
            stream, timing);
        const double pct =
            add_row(report, {op, shape.model, param, tokens, t, -1, gflop, dense_fwd});
        if (algo == chosen && std::string(r.name) == "balanced")
          report.goal(op + " " + tag(shape, tokens) + " of dense GEMM (auto's path)", pct,
                      ">=", kGemmGoalPct, "%");
      } catch (const std::exception& e) {
        report.context(op + " " + tag(shape, tokens), std::string("unavailable: ") + e.what());
        cudaGetLastError();
      }
    }
  }
  const auto counts = balanced_counts(rows, local);
  const auto offsets = offsets_of(counts);
  for (auto algo : kAlgos) {
    const std::string suffix = std::string(algo_name(algo)) + "_balanced";
    try {
      const double t_dgrad = median_time_us(
          [&] {
            ek::grouped_gemm_dgrad(handle, out.as<ek::bf16>(), w.as<ek::bf16>(), dx.as<ek::bf16>(),
                                   counts.data(), offsets.data(), local, N, H, algo,
                                   workspace.as<void>(), stream);
          },
          stream, timing);
      add_row(report,
              {"gg_dgrad_" + suffix, shape.model, param, tokens, t_dgrad, -1, gflop, dense_dgrad});
      const double t_wgrad = median_time_us(
          [&] {
            ek::grouped_gemm_wgrad(handle, x.as<ek::bf16>(), out.as<ek::bf16>(), dw.as<ek::bf16>(),
                                   counts.data(), offsets.data(), local, N, H, false, algo,
                                   workspace.as<void>(), stream);
          },
          stream, timing);
      add_row(report,
              {"gg_wgrad_" + suffix, shape.model, param, tokens, t_wgrad, -1, gflop, dense_wgrad});
    } catch (const std::exception& e) {
      report.context("gg_grad_" + suffix + " " + tag(shape, tokens),
                     std::string("unavailable: ") + e.what());
      cudaGetLastError();
    }
  }
  cublasDestroy(handle);
}

}  // namespace

void run_compute_rows(Report& report, const Shape& shape, int tokens, int num_ranks,
                      const Timing& timing) {
  cudaStream_t stream;
  cuda_check(cudaStreamCreate(&stream), "cudaStreamCreate");
  const int E = shape.num_experts, K = shape.num_topk, H = shape.hidden, R = num_ranks;
  const size_t TK = static_cast<size_t>(tokens) * K;

  DeviceMem logits(sizeof(float) * tokens * static_cast<size_t>(E)), bias(sizeof(float) * E);
  DeviceMem topk_idx(sizeof(int) * TK), topk_w(sizeof(float) * TK);
  fill_random_f32(logits.as<float>(), logits.bytes() / 4, 11, 4.f, stream);
  fill_random_f32(bias.as<float>(), E, 12, 0.05f, stream);
  const float* bias_ptr = shape.use_bias ? bias.as<float>() : nullptr;

  // Routing.
  auto route = [&] {
    ek::launch_routing(logits.as<float>(), bias_ptr, tokens, E, K, shape.num_groups,
                       shape.group_topk, shape.score_function, true, shape.scaling_factor,
                       topk_idx.as<int>(), topk_w.as<float>(), stream);
  };
  const double t_route = median_time_us(route, stream, timing);
  const double route_bytes = 4.0 * tokens * E + 8.0 * TK;
  const std::string route_param = "top" + std::to_string(K) + " g" +
                                  std::to_string(shape.num_groups) + "/" +
                                  std::to_string(shape.group_topk);
  add_row(report,
          {"routing", shape.model, route_param, tokens, t_route, route_bytes / kMB, -1,
           copy_bound_us(static_cast<size_t>(route_bytes / 2) / 16 * 16 + 16, stream, timing)});
  if (shape.model == "dsv3" && tokens == 4096)
    report.goal("routing dsv3 4096x256 top-8 of 8 groups", t_route, "<=", kRoutingGoalUs, "us");

  // Layouts (routing output from the kernel above: realistic expert load). They move well under
  // 2 MB, so next to the copy bound (itself latency-bound at that size) each also gets a row
  // against the launch floor: an empty kernel timed the same way in this run.
  const double t_floor = median_time_us([&] { launch_empty_kernel(stream); }, stream, timing);
  add_row(report, {"launch_floor", shape.model, "empty kernel", tokens, t_floor, -1, -1, -1});
  auto floor_row = [&](const std::string& op, const std::string& param, double time_us,
                       double bytes) {
    add_row(report,
            {op, shape.model, param + " /launch", tokens, time_us, bytes / kMB, -1, t_floor});
  };
  // Bytes of each layout: its input read once and each output written once (topk_idx 4*TK; the
  // copy bound moves the same total, half read and half written). A layout that reads topk_idx
  // twice pays for it; it is not credited with the second read.
  DeviceMem per_expert(sizeof(int) * E), per_rank(sizeof(int) * R),
      in_rank(tokens * static_cast<size_t>(R));
  const double t_dl = median_time_us(
      [&] {
        ek::launch_dispatch_layout(topk_idx.as<int>(), tokens, K, E, R, per_expert.as<int>(),
                                   per_rank.as<int>(), in_rank.as<uint8_t>(), stream);
      },
      stream, timing);
  const double dl_bytes = 4.0 * TK + 1.0 * tokens * R + 4.0 * (E + R);
  memory_row(report, "dispatch_layout", shape, tokens, "ep" + std::to_string(R), t_dl, dl_bytes,
             stream, timing);
  floor_row("dispatch_layout", "ep" + std::to_string(R), t_dl, dl_bytes);

  const int64_t max_rows = ek::alltoall_layout_max_rows(tokens, K, E, 1);
  DeviceMem permuted_row(sizeof(int) * TK), row_src(sizeof(int) * max_rows),
      offsets(sizeof(int) * (E + 1)), workspace(ek::layout_workspace_bytes(tokens, E));
  const double t_al = median_time_us(
      [&] {
        ek::launch_alltoall_layout(topk_idx.as<int>(), nullptr, 0, tokens, K, E, 1, max_rows,
                                   permuted_row.as<int>(), row_src.as<int>(), offsets.as<int>(),
                                   per_expert.as<int>(), workspace.as<void>(), stream);
      },
      stream, timing);
  // topk_idx, permuted_row, row_src_token[max_rows], expert_offsets[E + 1], counts[E].
  const double al_bytes = 8.0 * TK + 4.0 * max_rows + 4.0 * (2 * E + 1);
  memory_row(report, "alltoall_layout", shape, tokens, "e" + std::to_string(E), t_al, al_bytes,
             stream, timing);
  floor_row("alltoall_layout", "e" + std::to_string(E), t_al, al_bytes);

  DeviceMem slots(sizeof(int) * tokens * static_cast<size_t>(R));
  const double t_fl = median_time_us(
      [&] {
        ek::launch_flex_layout(topk_idx.as<int>(), tokens, K, E, R, slots.as<int>(),
                               per_rank.as<int>(), workspace.as<void>(), stream);
      },
      stream, timing);
  const double fl_bytes = 4.0 * TK + 4.0 * tokens * R + 4.0 * R;
  memory_row(report, "flex_layout", shape, tokens, "ep" + std::to_string(R), t_fl, fl_bytes, stream,
             timing);
  floor_row("flex_layout", "ep" + std::to_string(R), t_fl, fl_bytes);

  // Permute / unpermute (alltoall send side: one copy per selected expert).
  DeviceMem x(sizeof(ek::bf16) * tokens * static_cast<size_t>(H));
  DeviceMem rows(sizeof(ek::bf16) * TK * H), y(sizeof(ek::bf16) * tokens * static_cast<size_t>(H));
  fill_random_bf16(x.as<ek::bf16>(), x.bytes() / 2, 13, 1.f, stream);
  const double row_bytes = 2.0 * H;
  const double t_perm = median_time_us(
      [&] {
        ek::launch_permute(x.as<ek::bf16>(), tokens, H, row_src.as<int>(), static_cast<int64_t>(TK),
                           rows.as<ek::bf16>(), stream);
      },
      stream, timing);
  memory_row(report, "permute", shape, tokens, "h" + std::to_string(H), t_perm,
             2.0 * TK * row_bytes, stream, timing);
  const double t_unperm = median_time_us(
      [&] {
        ek::launch_unpermute(rows.as<ek::bf16>(), static_cast<int64_t>(TK), H,
                             permuted_row.as<int>(), topk_w.as<float>(), tokens, K,
                             y.as<ek::bf16>(), stream);
      },
      stream, timing);
  memory_row(report, "unpermute", shape, tokens, "h" + std::to_string(H), t_unperm,
             TK * row_bytes + tokens * row_bytes + 8.0 * TK, stream, timing);

  // SwiGLU over the expert rows a rank holds under balanced routing (tokens * top-k).
  const int F = shape.ffn;
  DeviceMem fc1(sizeof(ek::bf16) * TK * 2 * F), act(sizeof(ek::bf16) * TK * F), dfc1(fc1.bytes());
  fill_random_bf16(fc1.as<ek::bf16>(), fc1.bytes() / 2, 14, 2.f, stream);
  fill_random_bf16(act.as<ek::bf16>(), act.bytes() / 2, 15, 1.f, stream);
  const double t_sf = median_time_us(
      [&] {
        ek::launch_swiglu_fwd(fc1.as<ek::bf16>(), static_cast<int64_t>(TK), F, act.as<ek::bf16>(),
                              stream);
      },
      stream, timing);
  memory_row(report, "swiglu_fwd", shape, tokens, "ffn" + std::to_string(F), t_sf, 2.0 * TK * 3 * F,
             stream, timing);
  const double t_sb = median_time_us(
      [&] {
        ek::launch_swiglu_bwd(fc1.as<ek::bf16>(), act.as<ek::bf16>(), static_cast<int64_t>(TK), F,
                              dfc1.as<ek::bf16>(), stream);
      },
      stream, timing);
  memory_row(report, "swiglu_bwd", shape, tokens, "ffn" + std::to_string(F), t_sb, 2.0 * TK * 5 * F,
             stream, timing);

  gemm_rows(report, shape, tokens, num_ranks, stream, timing);
  cuda_check(cudaStreamSynchronize(stream), "compute rows");
  cudaStreamDestroy(stream);
}

}  // namespace epo::bench::kernels
