#include "calibration/fitters.hpp"

#include "calibration/fit_detail.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/cost.hpp"
#include "model/error.hpp"

namespace epo::calib {

using model::HardwareProfile;
using namespace detail;

double& profile_field(HardwareProfile& hw, const std::string& name) {
  if (name == "gemm_efficiency") return hw.gemm_efficiency;
  if (name == "gemm_half_dim") return hw.gemm_half_dim;
  if (name == "hbm_efficiency") return hw.hbm_efficiency;
  if (name == "kernel_launch_us") return hw.kernel_launch_us;
  if (name == "gemm_call_us") return hw.gemm_call_us;
  if (name == "grouped_gemm_efficiency") return hw.grouped_gemm_efficiency;
  if (name == "grouped_call_us") return hw.grouped_call_us;
  if (name == "host_sync_us") return hw.host_sync_us;
  if (name == "comm_gbps_per_sm") return hw.comm_gbps_per_sm;
  if (name == "nvlink_efficiency") return hw.nvlink_efficiency;
  if (name == "nccl_efficiency") return hw.nccl_efficiency;
  if (name == "nccl_latency_us") return hw.nccl_latency_us;
  if (name == "local_copy_gbps_per_sm") return hw.local_copy_gbps_per_sm;
  if (name == "local_copy_max_gbps") return hw.local_copy_max_gbps;
  if (name == "contention_coeff") return hw.contention_coeff;
  if (name == "contention_exp") return hw.contention_exp;
  if (name == "nvl_contention_coeff") return hw.nvl_contention_coeff;
  if (name == "nvl_contention_exp") return hw.nvl_contention_exp;
  if (name == "vr_tail_coeff") return hw.vr_tail_coeff;
  throw EPO_RUNTIME_ERROR("no fitted profile field named '", name, "'");
}

void apply_fit(HardwareProfile& hw, const Fit& fit) {
  for (const auto& f : fit.fields)
    if (f.accepted()) profile_field(hw, f.name) = f.value;
}

namespace {

Fit fit_mean(const char* name, const char* field, const std::vector<double>& xs,
             const HardwareProfile& hw, double max_us) {
  Fit f = make_fit(name, "mean of the samples", "us", hw, {field});
  f.source = std::to_string(xs.size()) + " " + name + " samples";
  for (size_t i = 0; i < xs.size(); ++i) {
    f.labels.push_back("#" + std::to_string(i));
    f.measured.push_back(xs[i]);
  }
  // Each sample is already the median of many timed repetitions (executor/microbench.hpp), so
  // one is enough for a value; its spread over several samples is the quality.
  if (xs.empty()) {
    f.fields[0].refusal = std::string("too few points: no ") + name + " sample";
    return f;
  }
  double mean = 0;
  for (double x : xs) mean += x;
  mean /= static_cast<double>(xs.size());
  f.fields[0].value = mean;
  if (mean > max_us)
    refuse(f.fields[0], fmt("%.4g us is above the plausible %.4g us", mean, max_us));
  evaluate(f, [&](const std::vector<double>& p, size_t) { return p[0]; });
  return f;
}

/// A point of a bandwidth-limited transfer: t = fixed + bytes / min(sms * per_sm, cap).
struct BwPoint {
  double bytes = 0, sms = 0, fixed_us = 0, time_us = 0;
};

double bw_time(const BwPoint& q, double per_sm_gbps, double cap_gbps) {
  return q.fixed_us + q.bytes / (std::min(q.sms * per_sm_gbps, cap_gbps) * 1e3);
}

/// Fits (per_sm_gbps, efficiency) of t = fixed + bytes / min(sms * per_sm, peak * efficiency *
/// cap_scale) and judges each: a parameter needs at least two points limited by it.
void fit_bandwidth(Fit& f, const std::vector<BwPoint>& pts, double peak_gbps, double cap_scale,
                   double max_per_sm) {
  NonlinearProblem pb;
  pb.lower = Eigen::Vector2d(0.1, 1e-4);
  pb.upper = Eigen::Vector2d(1e5, 10.0);
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(pts.size());
    for (size_t i = 0; i < pts.size(); ++i)
      r(i) = bw_time(pts[i], p(0), peak_gbps * p(1) * cap_scale) / pts[i].time_us - 1.0;
    return r;
  };
  const auto res = levenberg_marquardt(pb, Eigen::Vector2d(f.fields[0].base, f.fields[1].base));
  f.fields[0].value = res.params(0);
  f.fields[1].value = res.params(1);
  int per_sm_limited = 0, cap_limited = 0;
  for (const auto& q : pts)
    (q.sms * res.params(0) < peak_gbps * res.params(1) * cap_scale ? per_sm_limited
                                                                   : cap_limited)++;
  if (per_sm_limited < 2)
    refuse(f.fields[0],
           "only " + std::to_string(per_sm_limited) +
               " sample(s) limited by the SMs held; need at least 2 (sweep fewer SMs)");
  if (cap_limited < 2)
    refuse(f.fields[1],
           "only " + std::to_string(cap_limited) +
               " sample(s) limited by the bandwidth cap; need at least 2 (sweep more SMs)");
  if (res.params(1) > 1.0)
    refuse(f.fields[1], fmt("%.4g > 1: bandwidth above the datasheet peak of %.4g GB/s",
                            res.params(1), peak_gbps));
  if (res.params(0) > max_per_sm)
    refuse(f.fields[0],
           fmt("%.4g GB/s per SM is above the plausible %.4g", res.params(0), max_per_sm));
  evaluate(f, [&](const std::vector<double>& p, size_t i) {
    return bw_time(pts[i], p[0], peak_gbps * p[1] * cap_scale);
  });
}

std::string bytes_label(double bytes) {
  if (bytes >= 1 << 30) return fmt("%.3gGiB", bytes / (1 << 30));
  if (bytes >= 1 << 20) return fmt("%.3gMiB", bytes / (1 << 20));
  return fmt("%.3gKiB", bytes / 1024);
}

}  // namespace

void refit_accepted(Fit& f, const NonlinearProblem& pb) {
  std::vector<int> free_idx;
  Eigen::VectorXd full(static_cast<Eigen::Index>(f.fields.size()));
  for (size_t i = 0; i < f.fields.size(); ++i) {
    full(i) = f.fields[i].accepted() ? f.fields[i].value : f.fields[i].base;
    if (f.fields[i].accepted()) free_idx.push_back(static_cast<int>(i));
  }
  if (free_idx.empty() || free_idx.size() == f.fields.size()) return;
  NonlinearProblem sub;
  const auto n = static_cast<Eigen::Index>(free_idx.size());
  sub.lower.resize(n);
  sub.upper.resize(n);
  Eigen::VectorXd start(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    sub.lower(j) = pb.lower(free_idx[j]);
    sub.upper(j) = pb.upper(free_idx[j]);
    start(j) = full(free_idx[j]);
  }
  sub.jacobian_step = pb.jacobian_step;
  sub.residuals = [&](const Eigen::VectorXd& q) {
    Eigen::VectorXd p = full;
    for (Eigen::Index j = 0; j < n; ++j) p(free_idx[j]) = q(j);
    return pb.residuals(p);
  };
  const auto res = levenberg_marquardt(sub, start);
  for (Eigen::Index j = 0; j < n; ++j) f.fields[free_idx[j]].value = res.params(j);
}

Fit fit_launch(const HardwareProfile& hw, const Samples& s) {
  return fit_mean("launch", "kernel_launch_us", s.launch_us, hw, 1e3);
}

Fit fit_host_sync(const HardwareProfile& hw, const Samples& s) {
  return fit_mean("host_sync", "host_sync_us", s.host_sync_us, hw, 1e4);
}

Fit fit_hbm(const HardwareProfile& hw, const Samples& s) {
  Fit f =
      make_fit("hbm", "t = 2 * bytes / (hbm_gbps * hbm_efficiency) (whole-GPU copy, back to back)",
               "us", hw, {"hbm_efficiency"});
  std::vector<HbmSample> pts;
  for (const auto& h : s.hbm)
    if (h.bytes >= kHbmResidentBytes) pts.push_back(h);
  f.source =
      std::to_string(pts.size()) + " hbm samples of at least " + bytes_label(kHbmResidentBytes);
  double sum = 0;
  for (const auto& h : pts) {
    f.labels.push_back("memcpy " + bytes_label(h.bytes));
    f.measured.push_back(h.time_us);
    sum += 2.0 * h.bytes / (h.time_us * 1e3 * hw.hbm_gbps);
  }
  if (pts.empty()) {
    f.fields[0].refusal = "too few points: no hbm sample of at least " +
                          bytes_label(kHbmResidentBytes) + " (samples of an older bench)";
    return f;
  }
  f.fields[0].value = sum / static_cast<double>(pts.size());
  if (f.fields[0].value > 1.0)
    refuse(f.fields[0], fmt("%.4g > 1: bandwidth above the datasheet peak of %.4g GB/s",
                            f.fields[0].value, hw.hbm_gbps));
  evaluate(f, [&](const std::vector<double>& p, size_t i) {
    return 2.0 * pts[i].bytes / (hw.hbm_gbps * p[0] * 1e3);
  });
  return f;
}

Fit fit_copy(const HardwareProfile& hw, const Samples& s) {
  Fit f = make_fit("copy",
                   "t = launches + bytes / min(1 / (1 / (blocks * local_copy_gbps_per_sm) + 1 / "
                   "local_copy_max_gbps), hbm_gbps * hbm_efficiency / 2); blocks = sms (copy) or "
                   "ep * sms (local transport), at most 4 per SM; launches = kernel_launch_us "
                   "(copy) or ep * kernel_launch_us (local transport)",
                   "us", hw, {"local_copy_gbps_per_sm", "local_copy_max_gbps"});
  // Unset (0) means the HBM copy rate: start from, and keep on refusal, what it stands for.
  f.fields[1].base = f.fields[1].value = hw.local_copy_max_cost_gbps();
  // Only transfers whose data cannot stay in L2 (smaller ones run from the cache, at about twice
  // the per-block rate, and would bend the HBM curve the exchanges between ranks follow).
  struct Point {
    double bytes, blocks, fixed_us, time_us;
  };
  std::vector<Point> pts;
  int copies = 0, local = 0, small = 0;
  for (const auto& c : s.copy) {
    if (c.bytes < kHbmResidentBytes) {
      ++small;
      continue;
    }
    pts.push_back({c.bytes, static_cast<double>(c.sms), hw.kernel_launch_us, c.time_us});
    f.labels.push_back("copy " + bytes_label(c.bytes) + " sms=" + std::to_string(c.sms));
    ++copies;
  }
  for (const auto& t : s.transport) {
    if (t.kind != TransportKind::local) continue;
    // All ep virtual ranks copy at once, each with t.sms blocks; the benchmark copies every part,
    // the rank's own included (executor/microbench.cu), so ep * bytes_per_rank move. One host
    // thread launches every rank's copy (model::Builder::exchange), one after another.
    const double bytes = t.bytes_per_rank * t.ep;
    if (bytes < kHbmResidentBytes) {
      ++small;
      continue;
    }
    pts.push_back({bytes, double(t.ep) * t.sms, t.ep * hw.kernel_launch_us, t.time_us});
    f.labels.push_back("local ep=" + std::to_string(t.ep) + " " + bytes_label(t.bytes_per_rank) +
                       " sms=" + std::to_string(t.sms));
    ++local;
  }
  for (const auto& q : pts) f.measured.push_back(q.time_us);
  f.source = std::to_string(copies) + " copy + " + std::to_string(local) +
             " local transport samples of at least " + bytes_label(kHbmResidentBytes) + " (" +
             std::to_string(small) + " smaller left out)";
  if (refuse_if_too_few(f, static_cast<int>(pts.size()), "copy/local transport")) return f;
  auto model_time = [&](double per_block, double max_gbps, const Point& q) {
    HardwareProfile x = hw;
    x.local_copy_gbps_per_sm = per_block;
    x.local_copy_max_gbps = max_gbps;
    return q.fixed_us + q.bytes / (model::local_copy_gbps(x, q.blocks) * 1e3);
  };
  NonlinearProblem pb;
  pb.lower = Eigen::Vector2d(0.1, 1.0);
  pb.upper = Eigen::Vector2d(1e4, 1e6);
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(pts.size());
    for (size_t i = 0; i < pts.size(); ++i)
      r(i) = model_time(p(0), p(1), pts[i]) / pts[i].time_us - 1.0;
    return r;
  };
  const auto res = levenberg_marquardt(pb, Eigen::Vector2d(f.fields[0].base, f.fields[1].base));
  const double per_block = res.params(0), max_gbps = res.params(1);
  f.fields[0].value = per_block;
  f.fields[1].value = max_gbps;
  // Each parameter needs two points whose byte time it carries at least a third of.
  int block_limited = 0, max_limited = 0;
  for (const auto& q : pts) {
    const double a = 1.0 / (q.blocks * per_block), b = 1.0 / max_gbps;
    block_limited += a >= (a + b) / 3;
    max_limited += b >= (a + b) / 3;
  }
  if (block_limited < 2)
    refuse(f.fields[0], "only " + std::to_string(block_limited) +
                            " sample(s) limited by the blocks held; need at least 2 (sweep fewer "
                            "SMs)");
  if (max_limited < 2)
    refuse(f.fields[1], "only " + std::to_string(max_limited) +
                            " sample(s) near the curve's asymptote; need at least 2 (sweep more "
                            "SMs or ranks)");
  if (per_block > 1e3)
    refuse(f.fields[0], fmt("%.4g GB/s per block is above the plausible %.4g", per_block, 1e3));
  if (max_gbps > hw.hbm_gbps)
    refuse(f.fields[1],
           fmt("%.4g GB/s of payload is above the HBM peak of %.4g GB/s", max_gbps, hw.hbm_gbps));
  refit_accepted(f, pb);
  evaluate(f,
           [&](const std::vector<double>& p, size_t i) { return model_time(p[0], p[1], pts[i]); });
  return f;
}

Fit fit_gemm(const HardwareProfile& hw, const Samples& s) {
  Fit f = make_fit("gemm",
                   "t = max(max(flops / (peak * eff(m,n,k)), bytes / hbm), calls * call); "
                   "eff = gemm_efficiency * prod f(d)/f(8192), f(x) = x/(x+gemm_half_dim), "
                   "call = gemm_call_us (one library call per GEMM, per expert when grouped)",
                   "us", hw, {"gemm_efficiency", "gemm_half_dim", "gemm_call_us"});
  // Unset (0) means the kernel launch cost: start from, and keep on refusal, what it stands for.
  f.fields[2].base = f.fields[2].value = hw.gemm_call_cost_us();
  // Grouped launches have their own rate and call cost (fit_grouped_launch).
  std::vector<GemmSample> gemm;
  for (const auto& g : s.gemm)
    if (!g.grouped_launch) gemm.push_back(g);
  int grouped = 0, small = 0;
  double max_rate = 0;
  for (const auto& g : gemm) {
    f.measured.push_back(g.time_us);
    f.labels.push_back(g.grouped ? fmt("grouped %gx[%g,%g,%g]", g.count, g.m, g.n, g.k)
                                 : fmt("gemm %gx%gx%g", g.m, g.n, g.k));
    grouped += g.grouped;
    if (std::min({g.m, g.n, g.k}) < 4096) ++small;
    max_rate = std::max(max_rate, 2.0 * g.m * g.n * g.k * g.count / (g.time_us * 1e6));
  }
  f.source = std::to_string(gemm.size() - grouped) + " gemm + " + std::to_string(grouped) +
             " grouped_gemm samples";
  if (refuse_if_too_few(f, static_cast<int>(gemm.size()), "gemm/grouped_gemm")) return f;
  auto model_time = [&](double e, double h, double call, const GemmSample& g) {
    HardwareProfile x = hw;
    x.gemm_efficiency = e;
    x.gemm_half_dim = h;
    const double work = model::gemm_work_us(x, g.m, g.n, g.k, g.count, false);
    // Samples are back-to-back runs (executor/microbench.cu): the host's calls overlap the work.
    return std::max(work, std::max(1.0, g.count) * call);
  };
  NonlinearProblem pb;
  pb.lower = Eigen::Vector3d(1e-4, 0.0, 0.0);
  pb.upper = Eigen::Vector3d(10.0, 1e5, 1e3);
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(gemm.size());
    for (size_t i = 0; i < gemm.size(); ++i)
      r(i) = model_time(p(0), p(1), p(2), gemm[i]) / gemm[i].time_us - 1.0;
    return r;
  };
  const double call0 = hw.gemm_call_cost_us();
  const auto res = levenberg_marquardt(
      pb, Eigen::Vector3d(f.fields[0].base, f.fields[1].base, call0));
  f.fields[0].value = res.params(0);
  f.fields[1].value = res.params(1);
  f.fields[2].value = res.params(2);
  if (max_rate > hw.bf16_tflops)
    refuse(f.fields[0], fmt("a sample runs at %.4g TFLOP/s, above the datasheet peak %.4g: "
                            "check the samples",
                            max_rate, hw.bf16_tflops));
  if (res.params(0) > 1.0)
    refuse(f.fields[0], fmt("%.4g > 1: a GEMM rate above the datasheet peak of %.4g TFLOP/s",
                            res.params(0), hw.bf16_tflops));
  if (small < 2)
    refuse(f.fields[1],
           "only " + std::to_string(small) +
               " sample(s) with a dimension below 4096; the fall-off is not determined");
  else if (res.params(1) >= 1e5 * 0.999)
    refuse(f.fields[1], fmt("%.4g runs to the bound of the search", res.params(1)));
  refit_accepted(f, pb);
  if (f.fields[0].accepted() && f.fields[0].value > 1.0)
    refuse(f.fields[0], fmt("%.4g > 1: a GEMM rate above the datasheet peak of %.4g TFLOP/s",
                            f.fields[0].value, hw.bf16_tflops));
  evaluate(f, [&](const std::vector<double>& p, size_t i) {
    return model_time(p[0], p[1], p[2] > 0 ? p[2] : call0, gemm[i]);
  });
  return f;
}

Fit fit_grouped_launch(const HardwareProfile& hw, const Samples& s) {
  Fit f = make_fit("grouped_launch",
                   "t = max(max(flops / (peak * eff(m*count,n,k) * grouped_gemm_efficiency), "
                   "bytes / hbm), calls * call); calls = ceil(count / 128), "
                   "call = grouped_call_us (model::Builder::grouped_gemm)",
                   "us", hw, {"grouped_gemm_efficiency", "grouped_call_us"});
  f.fields[1].base = f.fields[1].value = hw.grouped_call_cost_us();
  std::vector<GemmSample> gs;
  for (const auto& g : s.gemm)
    if (g.grouped_launch) gs.push_back(g);
  for (const auto& g : gs) {
    f.measured.push_back(g.time_us);
    f.labels.push_back(fmt("grouped launch %gx[%g,%g,%g]", g.count, g.m, g.n, g.k));
  }
  f.source = std::to_string(gs.size()) + " grouped_gemm samples of the grouped launch";
  if (refuse_if_too_few(f, static_cast<int>(gs.size()), "grouped-launch grouped_gemm")) return f;
  auto model_time = [&](double eff, double call, const GemmSample& g) {
    HardwareProfile x = hw;
    x.grouped_gemm_efficiency = eff;
    const double work = model::gemm_work_us(x, g.m, g.n, g.k, g.count, false, true);
    const double calls = std::ceil(g.count / model::kGroupedLaunchBatch);
    return std::max(work, calls * call);
  };
  NonlinearProblem pb;
  pb.lower = Eigen::Vector2d(1e-3, 0.0);
  pb.upper = Eigen::Vector2d(10.0, 1e4);
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(gs.size());
    for (size_t i = 0; i < gs.size(); ++i) r(i) = model_time(p(0), p(1), gs[i]) / gs[i].time_us - 1.0;
    return r;
  };
  // Start the call cost at the fastest sample: a smaller start sits below every sample's work,
  // where the time does not depend on it and the search cannot move.
  double fastest = gs.front().time_us;
  for (const auto& g : gs) fastest = std::min(fastest, g.time_us);
  const auto res = levenberg_marquardt(
      pb, Eigen::Vector2d(f.fields[0].base, std::max(f.fields[1].base, fastest)));
  f.fields[0].value = res.params(0);
  f.fields[1].value = res.params(1);
  if (res.params(0) > 1.0)
    refuse(f.fields[0], fmt("%.4g > 1: a grouped launch faster than one GEMM of all its rows",
                            res.params(0)));
  refit_accepted(f, pb);
  evaluate(f, [&](const std::vector<double>& p, size_t i) { return model_time(p[0], p[1], gs[i]); });
  return f;
}

Fit fit_nccl(const HardwareProfile& hw, const Samples& s) {
  Fit f =
      make_fit("nccl", "t = nccl_latency_us + bytes * (ep-1)/ep / (nvlink_gbps * nccl_efficiency)",
               "us", hw, {"nccl_latency_us", "nccl_efficiency"});
  std::vector<const TransportSample*> pts;
  for (const auto& t : s.transport)
    if (t.kind == TransportKind::nccl) pts.push_back(&t);
  for (const auto* t : pts) {
    f.measured.push_back(t->time_us);
    f.labels.push_back("nccl ep=" + std::to_string(t->ep) + " " + bytes_label(t->bytes_per_rank));
  }
  f.source = std::to_string(pts.size()) + " nccl transport samples";
  if (refuse_if_too_few(f, static_cast<int>(pts.size()), "nccl transport")) return f;
  Eigen::MatrixXd a(pts.size(), 2);
  Eigen::VectorXd y(pts.size());
  for (size_t i = 0; i < pts.size(); ++i) {
    const double remote = pts[i]->bytes_per_rank * (pts[i]->ep - 1.0) / pts[i]->ep;
    a(i, 0) = 1.0;
    a(i, 1) = remote / (hw.nvlink_gbps * 1e3);
    y(i) = pts[i]->time_us;
  }
  const Eigen::VectorXd c = relative_linear_fit(a, y);
  f.fields[0].value = c(0);
  f.fields[1].value = c(1) > 0 ? 1.0 / c(1) : 0.0;
  if (c(0) < 0) refuse(f.fields[0], fmt("%.4g us: a negative latency", c(0)));
  if (c(1) <= 0)
    refuse(f.fields[1], "time does not grow with the message size");
  else if (1.0 / c(1) > 1.0)
    refuse(f.fields[1],
           fmt("%.4g > 1: bandwidth above NVLink's %.4g GB/s", 1.0 / c(1), hw.nvlink_gbps));
  NonlinearProblem pb;
  pb.lower = Eigen::Vector2d(-1e4, 1e-4);
  pb.upper = Eigen::Vector2d(1e4, 10.0);
  pb.residuals = [&](const Eigen::VectorXd& p) {
    Eigen::VectorXd r(pts.size());
    for (size_t i = 0; i < pts.size(); ++i) r(i) = (p(0) + a(i, 1) / p(1)) / y(i) - 1.0;
    return r;
  };
  refit_accepted(f, pb);
  if (f.fields[1].accepted() && f.fields[1].value > 1.0)
    refuse(f.fields[1],
           fmt("%.4g > 1: bandwidth above NVLink's %.4g GB/s", f.fields[1].value, hw.nvlink_gbps));
  evaluate(f, [&](const std::vector<double>& p, size_t i) { return p[0] + a(i, 1) / p[1]; });
  return f;
}

Fit fit_flex(const HardwareProfile& hw, const Samples& s) {
  Fit f = make_fit("flex",
                   "t = nvlink_latency + launch + bytes*(ep-1)/ep / min(sms * comm_gbps_per_sm, "
                   "nvlink_gbps * nvlink_efficiency)",
                   "us", hw, {"comm_gbps_per_sm", "nvlink_efficiency"});
  std::vector<BwPoint> pts;
  for (const auto& t : s.transport) {
    if (t.kind != TransportKind::flex) continue;
    pts.push_back({t.bytes_per_rank * (t.ep - 1.0) / t.ep, static_cast<double>(t.sms),
                   hw.nvlink_latency_us + hw.kernel_launch_us, t.time_us});
    f.labels.push_back("flex ep=" + std::to_string(t.ep) + " " + bytes_label(t.bytes_per_rank) +
                       " sms=" + std::to_string(t.sms));
    f.measured.push_back(t.time_us);
  }
  f.source = std::to_string(pts.size()) + " flex transport samples";
  if (refuse_if_too_few(f, static_cast<int>(pts.size()), "flex transport")) return f;
  fit_bandwidth(f, pts, hw.nvlink_gbps, 1.0, 1e3);
  return f;
}

}  // namespace epo::calib
