#include "synthetic.hpp"

#include <algorithm>
#include <cmath>

namespace epo::calib::test {

model::HardwareProfile truth_profile() {
  model::HardwareProfile hw;
  hw.name = "truth";
  hw.num_sms = 132;
  hw.bf16_tflops = 989.4;
  hw.fp8_tflops = 1978.9;
  hw.hbm_bytes = 141e9;
  hw.hbm_gbps = 4800;
  hw.nvlink_gbps = 450;
  hw.net_gbps = 50;
  hw.nvlink_latency_us = 3;
  hw.net_latency_us = 6;
  hw.gemm_efficiency = 0.74;
  hw.gemm_half_dim = 150;
  hw.grouped_gemm_efficiency = 0.6;
  hw.grouped_call_us = 80;
  hw.hbm_efficiency = 0.86;
  hw.kernel_launch_us = 3.1;
  hw.host_sync_us = 11.5;
  hw.local_copy_gbps_per_sm = 21;
  hw.local_copy_max_gbps = 1800;
  hw.comm_gbps_per_sm = 39;
  hw.nvlink_efficiency = 0.77;
  hw.nccl_efficiency = 0.69;
  hw.nccl_latency_us = 17;
  hw.contention_coeff = 0.08;
  hw.contention_exp = 0.5;
  hw.nvl_contention_coeff = 0.04;
  hw.nvl_contention_exp = 0.45;
  return hw;
}

Samples synthetic_samples(const model::HardwareProfile& t, double noise, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  auto n = [&](double x) { return x * (1.0 + u(gen)); };
  Samples s;
  // GEMM: eff = e * prod_d (d/(d+h)) / (8192/(8192+h))^3, capped at e; back-to-back samples:
  // time per call = max(flops / rate (these shapes are all compute-bound), calls * launch).
  auto f = [&](double x) { return x / (x + t.gemm_half_dim); };
  auto eff_of = [&](double m, double nn, double k) {
    return std::min(t.gemm_efficiency,
                    t.gemm_efficiency * f(m) * f(nn) * f(k) / std::pow(f(8192), 3));
  };
  auto gemm_us = [&](double m, double nn, double k, double count) {
    return std::max(2 * m * nn * k * count / (t.bf16_tflops * eff_of(m, nn, k) * 1e6),
                    count * t.kernel_launch_us);
  };
  for (double m : {512.0, 2048.0, 8192.0, 16384.0})
    for (double k : {1024.0, 4096.0}) {
      GemmSample g;
      g.m = m, g.n = 4096, g.k = k;
      g.time_us = n(gemm_us(m, 4096, k, 1));
      s.gemm.push_back(g);
    }
  for (double tpe : {512.0, 1024.0, 2048.0, 8192.0}) {
    GemmSample g;
    g.m = tpe, g.n = 1536, g.k = 2048, g.count = 8, g.grouped = true;
    g.time_us = n(gemm_us(tpe, 1536, 2048, 8));
    s.gemm.push_back(g);
  }
  // Grouped launches of 32 experts: the tiles run like one GEMM of all rows at
  // grouped_gemm_efficiency of its rate, or as fast as HBM delivers every expert's weights; one
  // call per launch.
  for (double tpe : {16.0, 64.0, 256.0, 1024.0, 4096.0}) {
    GemmSample g;
    g.m = tpe, g.n = 1536, g.k = 2048, g.count = 32, g.grouped = true, g.grouped_launch = true;
    const double rate = t.bf16_tflops * eff_of(tpe * 32, 1536, 2048) * t.grouped_gemm_efficiency;
    const double bytes = (tpe * 2048 + 2048 * 1536 + tpe * 1536) * 2.0 * 32;
    const double work = std::max(2 * tpe * 1536 * 2048 * 32 / (rate * 1e6),
                                 bytes / (t.hbm_gbps * t.hbm_efficiency * 1e3));
    g.time_us = n(std::max(work, t.grouped_call_us));
    s.gemm.push_back(g);
  }
  // Copies: payload / rate + launch; the rate of b blocks (at most 4 per SM) adds per-block rates
  // harmonically towards local_copy_max_gbps, capped by HBM (each byte read and written).
  const double cap = t.hbm_gbps * t.hbm_efficiency / 2;
  auto copy_gbps = [&](double blocks) {
    const double b = std::min(blocks, 4.0 * t.num_sms);
    return std::min(1.0 / (1.0 / (b * t.local_copy_gbps_per_sm) + 1.0 / t.local_copy_max_gbps),
                    cap);
  };
  for (int sms : {4, 8, 16, 32, 64, 132}) {
    const double bytes = 1 << 30;
    s.copy.push_back({bytes, sms, n(bytes / (copy_gbps(sms) * 1e3) + t.kernel_launch_us)});
  }
  // Local transport: every one of ep ranks copies all of its bytes_per_rank at once, each with
  // `sms` blocks.
  for (int ep : {2, 4, 8})
    for (int sms : {8, 66, 132}) {
      const double bpr = 32.0 * (1 << 20);
      s.transport.push_back({TransportKind::local, ep, bpr, sms,
                             n(ep * bpr / (copy_gbps(ep * sms) * 1e3) + ep * t.kernel_launch_us)});
    }
  // Whole-GPU copies: each byte read and written at hbm_gbps * hbm_efficiency.
  for (double mib : {256.0, 1024.0}) {
    const double bytes = mib * (1 << 20);
    s.hbm.push_back({bytes, n(2.0 * bytes / (t.hbm_gbps * t.hbm_efficiency * 1e3))});
  }
  // NCCL: latency + remote bytes / (nvlink * eff).
  for (double mib : {1.0, 4.0, 16.0, 64.0, 256.0, 1024.0})
    for (int ep : {2, 4}) {
      const double bpr = mib * (1 << 20);
      s.transport.push_back({TransportKind::nccl, ep, bpr, 0,
                             n(t.nccl_latency_us +
                               bpr * (ep - 1.0) / ep / (t.nvlink_gbps * t.nccl_efficiency * 1e3))});
    }
  // Flex over NVLink: nvlink latency + launch + remote bytes / min(sms * per_sm, nvlink * eff).
  for (int sms : {2, 4, 6, 16, 32, 64}) {
    const double bpr = 512.0 * (1 << 20);
    const double bw = std::min(sms * t.comm_gbps_per_sm, t.nvlink_gbps * t.nvlink_efficiency);
    s.transport.push_back({TransportKind::flex, 2, bpr, sms,
                           n(t.nvlink_latency_us + t.kernel_launch_us + bpr / 2 / (bw * 1e3))});
  }
  // Contention: GEMMs at rate 1 - a c^b while a comm of length C runs inside them:
  // together = C + (G - rate * C).
  for (int c : {4, 8, 16, 32, 64, 132}) {
    for (auto [link, a, b] :
         {std::make_tuple(ContentionLink::local, t.contention_coeff, t.contention_exp),
          std::make_tuple(ContentionLink::nvlink, t.nvl_contention_coeff, t.nvl_contention_exp)}) {
      const double gemm = 16000, comm = 2000 + 20000.0 / c;
      const double rate = n(1.0 - a * std::pow(c, b));
      s.contention.push_back({c, link, gemm, comm, comm + gemm - rate * comm});
    }
  }
  for (int i = 0; i < 6; ++i) {
    s.launch_us.push_back(n(t.kernel_launch_us));
    s.host_sync_us.push_back(n(t.host_sync_us));
  }
  return s;
}

}  // namespace epo::calib::test
