// The transfer fits: HBM streaming rate, SM-limited copies and the local transport between
// virtual ranks, NCCL's alltoall and flex over NVLink (bandwidth against the SMs held).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "calibration/fit_detail.hpp"
#include "calibration/fitters.hpp"
#include "model/cost.hpp"

namespace epo::calib {

using model::HardwareProfile;
using namespace detail;

namespace {

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
