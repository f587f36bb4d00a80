// Calibration microbenchmarks across GPUs of one host (one host thread drives every GPU): NCCL
// alltoall and the SM-limited peer store kernel (the flex data path) over message size and SMs,
// and GEMM slowdown beside a peer store kernel over NVLink (bench/bench_kernels_flex_nvlink).
#include <algorithm>
#include <functional>
#include <memory>

#include "executor/exec_kernels.hpp"
#include "executor/gemm.hpp"
#include "executor/gpu_check.hpp"
#include "executor/gpu_resources.hpp"
#include "executor/microbench_detail.hpp"

namespace epo::exec::detail {

namespace {

struct Gpu {
  int device = 0;
  std::unique_ptr<Stream> s1, s2;
  std::unique_ptr<DeviceBuffer> send, recv;
  std::unique_ptr<Event> a, b, fork, join;
};

/// Median over iters of the longest per-GPU time of fn(), which enqueues on every GPU's s1.
double time_all(std::vector<Gpu>& gpus, const std::function<void()>& fn, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    for (auto& g : gpus) {
      EPO_CHECK_CUDA(cudaSetDevice(g.device));
      EPO_CHECK_CUDA(cudaEventRecord(g.a->get(), g.s1->get()));
    }
    fn();
    double worst = 0;
    for (auto& g : gpus) {
      EPO_CHECK_CUDA(cudaSetDevice(g.device));
      EPO_CHECK_CUDA(cudaEventRecord(g.b->get(), g.s1->get()));
    }
    for (auto& g : gpus) {
      EPO_CHECK_CUDA(cudaSetDevice(g.device));
      EPO_CHECK_CUDA(cudaEventSynchronize(g.b->get()));
      float ms = 0;
      EPO_CHECK_CUDA(cudaEventElapsedTime(&ms, g.a->get(), g.b->get()));
      worst = std::max(worst, 1000.0 * ms);
    }
    t.push_back(worst);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

void bench_multi_gpu(const BenchOptions& o, const std::vector<long long>& bytes,
                     const std::vector<int>& sms, nlohmann::json& samples,
                     nlohmann::json& unmeasured) {
  int present = 0;
  EPO_CHECK_CUDA(cudaGetDeviceCount(&present));
  const int G = std::min(o.num_gpus, present - o.device);
  if (G < 2) {
    const std::string why = "needs >= 2 GPUs (num_gpus = " + std::to_string(o.num_gpus) +
                            ", present from device " + std::to_string(o.device) + ": " +
                            std::to_string(present - o.device) + ")";
    for (const char* what : {"transport nccl", "transport flex", "contention nvlink"})
      unmeasured.push_back(std::string(what) + ": " + why);
    return;
  }
  const int w = std::max(0, o.warmup), n = std::max(1, o.iters);
  const long long max_bytes = *std::max_element(bytes.begin(), bytes.end());
  std::vector<Gpu> gpus(G);
  for (int i = 0; i < G; ++i) {
    Gpu& g = gpus[i];
    g.device = o.device + i;
    ScopedOp scope(g.device, "multi-GPU benchmark setup");
    EPO_CHECK_CUDA(cudaSetDevice(g.device));
    for (int j = 0; j < G; ++j)
      if (j != i) {
        const cudaError_t st = cudaDeviceEnablePeerAccess(o.device + j, 0);
        if (st != cudaErrorPeerAccessAlreadyEnabled) EPO_CHECK_CUDA(st);
        cudaGetLastError();
      }
    g.s1 = std::make_unique<Stream>(0);
    g.s2 = std::make_unique<Stream>(0);
    g.send = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(max_bytes), "send buffer");
    g.recv = std::make_unique<DeviceBuffer>(static_cast<std::size_t>(max_bytes), "receive buffer");
    g.a = std::make_unique<Event>();
    g.b = std::make_unique<Event>();
    g.fork = std::make_unique<Event>();
    g.join = std::make_unique<Event>();
  }
  // NCCL alltoall over the G GPUs.
  {
    std::vector<ncclComm_t> comms(G);
    std::vector<int> devs(G);
    for (int i = 0; i < G; ++i) devs[i] = gpus[i].device;
    EPO_CHECK_NCCL(nullptr, ncclCommInitAll(comms.data(), G, devs.data()));
    try {
      for (long long nb : bytes) {
        const size_t count = static_cast<size_t>(nb / 2 / G);
        const double t = time_all(gpus, [&] {
          EPO_CHECK_NCCL(comms[0], ncclGroupStart());
          for (int i = 0; i < G; ++i)
            EPO_CHECK_NCCL(comms[i], ncclAlltoAll(gpus[i].send->get(), gpus[i].recv->get(), count,
                                                  ncclBfloat16, comms[i], gpus[i].s1->get()));
          EPO_CHECK_NCCL(comms[0], ncclGroupEnd());
        }, w, n);
        samples.push_back({{"bench", "transport"}, {"kind", "nccl"}, {"ep", G},
                           {"bytes_per_rank", nb}, {"sms", 0}, {"time_us", t}});
      }
    } catch (...) {
      for (auto c : comms) ncclCommAbort(c);
      throw;
    }
    for (auto c : comms) EPO_NCCL_NOTHROW(ncclCommDestroy(c));
  }
  // Peer store kernel: every GPU writes bytes/G to each peer with `sm` blocks.
  auto store = [&](long long nb, int sm, bool second_stream) {
    const std::int64_t part = nb / G / 16 * 16;
    for (int i = 0; i < G; ++i) {
      EPO_CHECK_CUDA(cudaSetDevice(gpus[i].device));
      CopySegments seg;
      for (int j = 0; j < G; ++j) {
        seg.src[seg.count] = static_cast<char*>(gpus[i].send->get()) + j * part;
        seg.dst[seg.count] = static_cast<char*>(gpus[j].recv->get()) + i * part;
        seg.bytes[seg.count] = part;
        ++seg.count;
      }
      launch_sm_copy(seg, sm, second_stream ? gpus[i].s2->get() : gpus[i].s1->get());
    }
  };
  for (long long nb : bytes)
    for (int sm : sms) {
      const double t = time_all(gpus, [&] { store(nb, sm, false); }, w, n);
      samples.push_back({{"bench", "transport"}, {"kind", "flex"}, {"ep", G},
                         {"bytes_per_rank", nb}, {"sms", sm}, {"time_us", t}});
    }
  // Contention over NVLink: 20 GEMMs 4096^3 on each GPU, the store kernel launched first.
  const int m = 4096;
  std::vector<std::unique_ptr<DeviceBuffer>> mats;
  std::vector<std::unique_ptr<CublasHandle>> handles;
  for (auto& g : gpus) {
    EPO_CHECK_CUDA(cudaSetDevice(g.device));
    for (int k = 0; k < 3; ++k)
      mats.push_back(std::make_unique<DeviceBuffer>(2ULL * m * m, "contention matrix"));
    handles.push_back(std::make_unique<CublasHandle>());
  }
  auto gemms = [&] {
    for (int i = 0; i < G; ++i) {
      EPO_CHECK_CUDA(cudaSetDevice(gpus[i].device));
      for (int r = 0; r < 20; ++r)
        gemm(handles[i]->get(), gpus[i].s1->get(), m, m, m,
             {static_cast<bf16*>(mats[3 * i]->get()), m},
             {static_cast<bf16*>(mats[3 * i + 1]->get()), m}, mats[3 * i + 2]->get(), m, 1.0f,
             0.0f);
    }
  };
  for (int sm : sms) {
    const double gemm_alone = time_all(gpus, gemms, w, n);
    const double comm_alone = time_all(gpus, [&] { store(max_bytes, sm, false); }, w, n);
    const double together = time_all(gpus, [&] {
      for (auto& g : gpus) {
        EPO_CHECK_CUDA(cudaSetDevice(g.device));
        EPO_CHECK_CUDA(cudaEventRecord(g.fork->get(), g.s1->get()));
        EPO_CHECK_CUDA(cudaStreamWaitEvent(g.s2->get(), g.fork->get(), 0));
      }
      store(max_bytes, sm, true);
      gemms();
      for (auto& g : gpus) {
        EPO_CHECK_CUDA(cudaSetDevice(g.device));
        EPO_CHECK_CUDA(cudaEventRecord(g.join->get(), g.s2->get()));
        EPO_CHECK_CUDA(cudaStreamWaitEvent(g.s1->get(), g.join->get(), 0));
      }
    }, w, n);
    samples.push_back({{"bench", "contention"}, {"comm_sms", sm}, {"link", "nvlink"},
                       {"gemm_alone_us", gemm_alone}, {"comm_alone_us", comm_alone},
                       {"together_us", together}});
  }
  EPO_CHECK_CUDA(cudaSetDevice(o.device));
}

}  // namespace epo::exec::detail
