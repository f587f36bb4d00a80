// The schedule runner.
#include "executor/runner.hpp"

#include "executor/gpu_check.hpp"
#include "executor/layer_ops.hpp"
#include "model/error.hpp"

namespace epo::exec {

using model::Direction;
using model::OpKind;

Runner::Runner(Group& group, const model::Schedule& schedule, bool delay_wgrad)
    : g_(group), sched_(schedule), delay_wgrad_(delay_wgrad) {
  for (const auto& op : sched_.ops)
    if (op.kind == OpKind::mlp_wgrad || op.kind == OpKind::pre_dispatch_wgrad)
      wgrad_ops_.insert({static_cast<int>(op.kind), op.microbatch, op.layer});
  for (RankState* rs : g_.ranks) {
    ScopedOp scope(rs->rank(), "create events");
    EPO_CHECK_CUDA(cudaSetDevice(rs->setup().device));
    while (rs->op_start.size() < sched_.ops.size()) rs->op_start.emplace_back();
    while (rs->op_end.size() < sched_.ops.size()) rs->op_end.emplace_back();
  }
  while (g_.mid.size() < g_.ranks.size()) g_.mid.push_back(std::make_unique<Event>());
}

cudaStream_t Runner::lane_stream(const RankState& rs, model::Lane lane) const {
  switch (lane) {
    case model::Lane::compute: return rs.compute();
    case model::Lane::comm: return rs.comm();
    default: return rs.grad();
  }
}

void Runner::run_step() {
  for (RankState* rs : g_.ranks) {
    ScopedOp scope(rs->rank(), "step start");
    rs->zero_grads();
    EPO_CHECK_CUDA(cudaEventRecord(rs->origin.get(), rs->compute()));
    EPO_CHECK_CUDA(cudaStreamWaitEvent(rs->comm(), rs->origin.get(), 0));
    EPO_CHECK_CUDA(cudaStreamWaitEvent(rs->grad(), rs->origin.get(), 0));
  }
  for (int i = 0; i < static_cast<int>(sched_.ops.size()); ++i) issue(i);
  for (RankState* rs : g_.ranks) {
    ScopedOp scope(rs->rank(), "step end");
    EPO_CHECK_CUDA(cudaStreamSynchronize(rs->compute()));
    EPO_CHECK_CUDA(cudaStreamSynchronize(rs->comm()));
    EPO_CHECK_CUDA(cudaStreamSynchronize(rs->grad()));
    check_flex(*rs);
  }
}

void Runner::issue(int i) {
  const model::ScheduleOp& op = sched_.ops[i];
  const std::string name = std::string(model::op_name(op)) + " mb " +
                           std::to_string(op.microbatch) + " layer " + std::to_string(op.layer);
  ScopedOp scope(g_.ranks.front()->rank(), name);
  for (RankState* rs : g_.ranks) {
    ScopedOp rank_scope(rs->rank(), name);
    cudaStream_t st = lane_stream(*rs, op.lane);
    if (op.host_blocks)  // the host waits for the op's GPU predecessors before issuing it
      for (int w = 0; w < op.num_waits; ++w)
        EPO_CHECK_CUDA(cudaEventSynchronize(rs->op_end[op.waits[w]].get()));
    for (int w = 0; w < op.num_waits; ++w)
      EPO_CHECK_CUDA(cudaStreamWaitEvent(st, rs->op_end[op.waits[w]].get(), 0));
    EPO_CHECK_CUDA(cudaEventRecord(rs->op_start[i].get(), st));
  }
  try {
    issue_body(op, i);
  } catch (const ::epo::Error&) {
    throw;
  } catch (const std::exception& e) {
    throw EPO_RUNTIME_ERROR(where_now(), ": ", e.what());
  }
  for (RankState* rs : g_.ranks) {
    ScopedOp rank_scope(rs->rank(), name);
    EPO_CHECK_CUDA(cudaEventRecord(rs->op_end[i].get(), lane_stream(*rs, op.lane)));
  }
}

void Runner::issue_body(const model::ScheduleOp& op, int i) {
  const bool fwd = op.dir == Direction::forward;
  const int mb = op.microbatch, l = op.layer;
  auto each = [&](auto&& f) {
    for (RankState* rs : g_.ranks) {
      ScopedOp scope(rs->rank(), op_context().op);
      f(*rs);
    }
  };
  auto inline_wgrad = [&](OpKind kind) {
    return !delay_wgrad_ || !wgrad_ops_.count({static_cast<int>(kind), mb, l});
  };
  switch (op.kind) {
    case OpKind::embedding:
      each([&](RankState& rs) { fwd ? embedding_fwd(rs, mb) : embedding_bwd(rs, mb); });
      return;
    case OpKind::lm_head_loss:
      each([&](RankState& rs) { fwd ? lm_head_fwd(rs, mb) : lm_head_bwd(rs, mb); });
      return;
    case OpKind::pre_dispatch: {
      const bool w = inline_wgrad(OpKind::pre_dispatch_wgrad);
      each([&](RankState& rs) {
        fwd ? pre_dispatch_fwd(rs, mb, l) : pre_dispatch_bwd(rs, mb, l, w);
      });
      return;
    }
    case OpKind::mlp: {
      const bool w = inline_wgrad(OpKind::mlp_wgrad);
      each([&](RankState& rs) { fwd ? mlp_fwd(rs, mb, l) : mlp_bwd(rs, mb, l, w); });
      return;
    }
    case OpKind::dispatch:
      fwd ? dispatch_fwd(g_, i, mb, l) : dispatch_bwd(g_, i, mb, l);
      return;
    case OpKind::combine:
      fwd ? combine_fwd(g_, i, mb, l) : combine_bwd(g_, i, mb, l);
      return;
    case OpKind::mlp_wgrad:
      each([&](RankState& rs) { mlp_wgrad(rs, mb, l); });
      return;
    case OpKind::pre_dispatch_wgrad:
      each([&](RankState& rs) { pre_dispatch_wgrad(rs, mb, l); });
      return;
    case OpKind::dp_grad_reduce:
      grad_reduce(g_, l);
      return;
    default:
      throw EPO_RUNTIME_ERROR(where_now(), ": op kind ", model::to_string(op.kind),
                              " is not executed (PP=1 without MTP only)");
  }
}

void Runner::collect(std::vector<OpRecord>& out, int step, bool overlapped) const {
  for (RankState* rs : g_.ranks) {
    ScopedOp scope(rs->rank(), "read timings");
    for (int i = 0; i < static_cast<int>(sched_.ops.size()); ++i) {
      const auto& op = sched_.ops[i];
      float start_ms = 0, end_ms = 0;
      cudaEvent_t origin = g_.shared_device ? g_.ranks.front()->origin.get() : rs->origin.get();
      EPO_CHECK_CUDA(cudaEventElapsedTime(&start_ms, origin, rs->op_start[i].get()));
      EPO_CHECK_CUDA(cudaEventElapsedTime(&end_ms, origin, rs->op_end[i].get()));
      OpRecord r;
      r.rank = rs->rank();
      r.step = step;
      r.overlapped = overlapped;
      r.kind = op.kind;
      r.dir = op.dir;
      r.lane = op.lane;
      r.name = model::op_name(op);
      r.microbatch = op.microbatch;
      r.layer = op.layer;
      r.start_us = 1000.0 * start_ms;
      r.end_us = 1000.0 * end_ms;
      out.push_back(r);
    }
  }
}

}  // namespace epo::exec
