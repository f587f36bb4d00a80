// One process's share of a multi-process `epo run` over MPI (see run_mpi.hpp): the checks every
// process makes together, the NCCL unique id, barriers, flex peer tables over CUDA IPC, the
// abort path and the gather of results to world rank 0.
#include "executor/run_mpi.hpp"

#include <cuda.h>  // CUdeviceptr, CUresult: cuMemGetAddressRange through the runtime's entry point
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <utility>

#include "executor/gpu_check.hpp"
#include "executor/mpi_world.hpp"
#include "executor/process_layout.hpp"
#include "model/error.hpp"

namespace epo::exec {

namespace {

/// Each process runs `step`; when any fails every process fails: world rank 0 throws the
/// failures (each once, with the processes that hit it), the others ReportedElsewhere.
void together(const MpiWorld& w, const std::function<void()>& step) {
  std::string mine;
  try {
    step();
  } catch (const ::epo::Error& e) {
    mine = std::string(1, static_cast<char>(e.exit_code())) + e.what();
  } catch (const std::exception& e) {
    mine = std::string(1, '\1') + e.what();
  }
  const auto all = w.allgather(mine);
  int code = 0;
  std::vector<std::pair<std::string, std::vector<int>>> failures;  // message, processes
  for (int p = 0; p < static_cast<int>(all.size()); ++p) {
    if (all[p].empty()) continue;
    if (code == 0) code = all[p][0];
    const std::string text = all[p].substr(1);
    auto it = failures.begin();
    while (it != failures.end() && it->first != text) ++it;
    if (it == failures.end())
      failures.push_back({text, {p}});
    else
      it->second.push_back(p);
  }
  if (code == 0) return;
  if (w.rank() != 0) throw ReportedElsewhere(code);
  std::string text;
  for (const auto& [message, procs] : failures) {
    if (!text.empty()) text += "; ";
    if (procs.size() == all.size() && all.size() > 1) {
      text += message + " (every process)";
      continue;
    }
    text += procs.size() == 1 ? "process " : "processes ";
    for (std::size_t i = 0; i < procs.size(); ++i)
      text += (i ? "," : "") + std::to_string(procs[i]);
    text += ": " + message;
  }
  throw ::epo::Error(static_cast<ErrorKind>(code), text, __FILE__, __LINE__);
}

using AddressRangeFn = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);

/// cuMemGetAddressRange without linking the driver library (the program must still start, and
/// say what is missing, on a machine without a GPU driver).
AddressRangeFn address_range_fn() {
  static const AddressRangeFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    EPO_CHECK_CUDA(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000,
                                                    cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || !p)
      throw EPO_RUNTIME_ERROR(
          "the CUDA driver has no cuMemGetAddressRange (needed to share flex "
          "buffers between processes)");
    return reinterpret_cast<AddressRangeFn>(p);
  }();
  return fn;
}

constexpr int kFlexFields = 8;
static_assert(sizeof(kernels::FlexBuffers) == kFlexFields * sizeof(void*),
              "kernels::FlexBuffers changed: export and rebase its new fields below");

/// One rank's flex buffers as another process on its node can map them: the IPC handle of the
/// allocation they are carved from and each field's offset in it.
struct FlexExport {
  std::int32_t rank = -1;
  std::int32_t device = -1;
  cudaIpcMemHandle_t handle{};
  std::uint64_t offsets[2][kFlexFields] = {};  // [fwd, bwd][field]
};

void offsets_of(const kernels::FlexBuffers& b, CUdeviceptr base, std::size_t size,
                std::uint64_t* out) {
  const void* fields[kFlexFields] = {b.recv_x,       b.recv_topk_idx, b.recv_topk_weights,
                                     b.recv_count,   b.recv_flag,     b.combine_x,
                                     b.combine_flag, b.done_counter};
  for (int i = 0; i < kFlexFields; ++i) {
    const auto at = reinterpret_cast<CUdeviceptr>(fields[i]);
    if (!fields[i] || at < base || at >= base + size)
      throw EPO_RUNTIME_ERROR(where_now(),
                              ": the flex buffers are not carved from one device "
                              "allocation, so another process cannot map them with one IPC handle");
    out[i] = at - base;
  }
}

kernels::FlexBuffers buffers_at(char* base, const std::uint64_t* off) {
  kernels::FlexBuffers b;
  int i = 0;
  auto put = [&](auto& field) {
    field = reinterpret_cast<std::remove_reference_t<decltype(field)>>(base + off[i++]);
  };
  put(b.recv_x);
  put(b.recv_topk_idx);
  put(b.recv_topk_weights);
  put(b.recv_count);
  put(b.recv_flag);
  put(b.combine_x);
  put(b.combine_flag);
  put(b.done_counter);
  return b;
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(const model::Config& cfg, const RunOptions& options) : w_(MpiWorld::get()) {
    gpus_per_process_ = options.gpus_per_process > 0 ? options.gpus_per_process : 1;
    const bool flex = cfg.opt.dispatcher == model::Dispatcher::flex;
    const ProcessPlace& place = w_.place();
    together(w_, [&] {
      check_process_plan(place, gpus_per_process_, cfg.par.ep, flex, cfg.virtual_ranks > 0);
      int visible = 0;
      const cudaError_t st = cudaGetDeviceCount(&visible);
      if (st != cudaSuccess)
        throw EPO_RUNTIME_ERROR("no usable CUDA device: cudaGetDeviceCount: ",
                                cudaGetErrorString(st));
      devices_ = process_devices(place, gpus_per_process_, visible);
    });
    first_rank_ = first_ep_rank(place, gpus_per_process_);
    // Two ranks of a node on one GPU (launchers that give every process the same device list).
    std::string mine;
    std::vector<std::pair<int, std::string>> node;
    together(w_, [&] {
      for (int i = 0; i < gpus_per_process_; ++i) {
        char bus[32] = {};
        EPO_CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, devices_[i]));
        mine += std::to_string(first_rank_ + i) + " " + bus + "\n";
      }
    });
    together(w_, [&] {
      for (const std::string& text : w_.node_allgather(mine)) {
        std::size_t at = 0;
        while (at < text.size()) {
          const std::size_t sp = text.find(' ', at), nl = text.find('\n', at);
          node.push_back({std::stoi(text.substr(at, sp - at)), text.substr(sp + 1, nl - sp - 1)});
          at = nl + 1;
        }
      }
      const auto shared = shared_gpus(node);
      if (!shared.empty()) throw EPO_INPUT_ERROR(shared.front());
    });
    local_.resize(static_cast<std::size_t>(gpus_per_process_));
  }

  bool root() const override { return w_.rank() == 0; }
  int first_rank() const override { return first_rank_; }
  const std::vector<int>& devices() const override { return devices_; }
  std::string describe() const override {
    const auto& p = w_.place();
    return std::to_string(p.world_size) + " MPI processes on " + std::to_string(p.num_nodes) +
           (p.num_nodes == 1 ? " node, " : " nodes, ") + std::to_string(gpus_per_process_) +
           (gpus_per_process_ == 1 ? " GPU each" : " GPUs (threads) each");
  }

  ncclUniqueId unique_id() override {
    ncclUniqueId id{};
    try {  // the others wait in the broadcast: a failure here must end them too
      if (root()) EPO_CHECK_NCCL(nullptr, ncclGetUniqueId(&id));
      w_.broadcast(&id, sizeof id, 0);
    } catch (...) {
      abort(std::current_exception());
    }
    return id;
  }

  void barrier() override { w_.barrier(); }

  void export_flex(int local, RankState& rs) override {
    ScopedOp scope(rs.rank(), "flex: exporting the buffers by CUDA IPC");
    const FlexState& f = rs.flex();
    CUdeviceptr base = 0;
    std::size_t size = 0;
    const CUresult st =
        address_range_fn()(&base, &size, reinterpret_cast<CUdeviceptr>(f.fwd.recv_x));
    if (st != CUDA_SUCCESS)
      throw EPO_RUNTIME_ERROR(where_now(), ": cuMemGetAddressRange of the flex buffers failed (",
                              static_cast<int>(st), ")");
    FlexExport e;
    e.rank = rs.rank();
    e.device = rs.setup().device;
    EPO_CHECK_CUDA(cudaIpcGetMemHandle(&e.handle, reinterpret_cast<void*>(base)));
    offsets_of(f.fwd, base, size, e.offsets[0]);
    offsets_of(f.bwd, base, size, e.offsets[1]);
    local_[static_cast<std::size_t>(local)].exported = e;
  }

  void exchange_flex() override {
    std::string mine;
    for (const Local& l : local_)
      mine.append(reinterpret_cast<const char*>(&l.exported), sizeof(FlexExport));
    node_exports_.clear();
    for (const std::string& text : w_.node_allgather(mine))
      for (std::size_t at = 0; at + sizeof(FlexExport) <= text.size(); at += sizeof(FlexExport)) {
        FlexExport e;
        std::memcpy(&e, text.data() + at, sizeof e);
        node_exports_.push_back(e);
      }
  }

  void open_flex_peers(int local, std::vector<FlexState*>& all) override {
    Local& l = local_[static_cast<std::size_t>(local)];
    for (const FlexExport& e : node_exports_) {
      if (e.rank < 0 || e.rank >= static_cast<int>(all.size()))
        throw EPO_RUNTIME_ERROR(where_now(), ": flex export of unknown EP rank ", e.rank);
      if (all[e.rank] != nullptr) continue;  // a thread of this process: peer access
      ScopedOp scope(op_context().rank, "flex: mapping EP rank " + std::to_string(e.rank) +
                                            "'s buffers (GPU " + std::to_string(e.device) +
                                            " of another process) by CUDA IPC");
      void* base = nullptr;
      EPO_CHECK_CUDA(cudaIpcOpenMemHandle(&base, e.handle, cudaIpcMemLazyEnablePeerAccess));
      l.opened.push_back(base);
      auto state = std::make_unique<FlexState>();
      state->fwd = buffers_at(static_cast<char*>(base), e.offsets[0]);
      state->bwd = buffers_at(static_cast<char*>(base), e.offsets[1]);
      all[e.rank] = state.get();
      l.states.push_back(std::move(state));
    }
    for (std::size_t r = 0; r < all.size(); ++r)
      if (!all[r])
        throw EPO_RUNTIME_ERROR(where_now(), ": flex has no buffers of EP rank ", r,
                                " (not on this node)");
  }

  void close_flex_peers(int local) override {
    Local& l = local_[static_cast<std::size_t>(local)];
    for (void* p : l.opened) EPO_CUDA_NOTHROW(cudaIpcCloseMemHandle(p));
    l.opened.clear();
    l.states.clear();
  }

  [[noreturn]] void abort(std::exception_ptr error) override {
    std::string text = "unknown error";
    int code = 1;
    try {
      std::rethrow_exception(error);
    } catch (const ::epo::Error& e) {
      text = e.what();
      code = e.exit_code();
    } catch (const std::exception& e) {
      text = e.what();
    } catch (...) {
    }
    w_.abort(text, code);
  }

  bool gather(RankResults& r) override {
    try {  // world rank 0 waits for every process's results
      const auto all = w_.gather_to_root(pack_results(r));
      if (!root()) return false;
      RankResults merged;
      merged.memory_bytes.assign(r.memory_bytes.size(), 0);
      if (!r.cap_cfg.empty()) {
        merged.cap_cfg.resize(r.cap_cfg.size());
        merged.cap_other.resize(r.cap_other.size());
      }
      for (const std::string& bytes : all) unpack_results(bytes, merged);
      r = std::move(merged);
    } catch (...) {
      abort(std::current_exception());
    }
    return true;
  }

 private:
  struct Local {  // one per thread
    FlexExport exported;
    std::vector<void*> opened;                       // IPC mappings on the thread's device
    std::vector<std::unique_ptr<FlexState>> states;  // the peers' buffers as seen from it
  };
  const MpiWorld& w_;
  int gpus_per_process_ = 1;
  int first_rank_ = 0;
  std::vector<int> devices_;
  std::vector<Local> local_;
  std::vector<FlexExport> node_exports_;
};

}  // namespace

std::unique_ptr<ProcessGroup> join_processes(const model::Config& cfg, const RunOptions& options) {
  return std::make_unique<MpiProcessGroup>(cfg, options);
}

}  // namespace epo::exec
