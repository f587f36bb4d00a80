#pragma once
// The op list of one training step for one pipeline rank, in host issue order: Megatron's
// combined-1F1B schedule (github.com/NVIDIA/Megatron-LM: megatron/core/pipeline_parallel/
// combined_1f1b.py, megatron/core/models/common/model_chunk_schedule_plan.py) or, for the
// baseline, the same ops in plain (interleaved) 1F1B order. Built once and walked by both the simulator and the
// GPU executor, so it holds only structure: what runs, on which stream, after what. No durations.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/cost.hpp"

namespace epo::model {

/// Hardware queue of an op. `compute` and `comm` are Megatron's comp and comm streams;
/// `grad_reduce` is the data-parallel gradient reduce (DDP's NCCL stream).
enum class Lane : std::uint8_t { compute = 0, comm = 1, grad_reduce = 2 };
constexpr int kNumLanes = 3;
const char* to_string(Lane lane);

/// Pipeline point-to-point role of a pp_send_recv op.
enum class PpRole : std::uint8_t { none, send, recv };

/// Most local ops one op waits for (stream FIFO predecessor, micro-batch event predecessor, and
/// for the end-of-step gradient reduce the last op of a second stream).
constexpr int kMaxWaits = 3;

struct ScheduleOp {
  OpKind kind = OpKind::pre_dispatch;
  Direction dir = Direction::forward;
  StreamKind stream = StreamKind::compute;  ///< compute lane: compute; comm and grad_reduce: comm
  Lane lane = Lane::compute;
  PpRole pp_role = PpRole::none;
  bool host_blocks = false;  ///< the host waits for this op's GPU predecessors before issuing it
  /// With host_blocks: the one earlier op (index into ops) the host's synchronisation waits for;
  /// -1 = every predecessor. Megatron's alltoall dispatcher copies its token counts on a side
  /// stream after the router (its micro-batch plan's previous op) and waits for that copy alone,
  /// not for the communication stream.
  std::int32_t host_wait = -1;
  bool is_moe = false;       ///< layer op of an MoE layer (dense layers have no dispatch/combine)
  bool is_mtp = false;       ///< layer op of the MTP layer
  int microbatch = -1;       ///< -1 for the end-of-step gradient reduce
  int chunk = -1;            ///< model chunk on this rank (virtual stage), 0..vpp-1; -1 if none
  int layer = -1;            ///< global decoder layer index (MTP layer: num_layers); -1 if none
  int step = -1;             ///< index into Schedule::steps
  int layer_step = -1;       ///< which layer step of its step (one TransformerLayerSchedulePlan.run)
  int num_waits = 0;
  std::int32_t waits[kMaxWaits] = {-1, -1, -1};  ///< earlier ops of this rank (indices into ops)
  int peer_rank = -1;            ///< send: destination rank; recv: source rank
  std::int32_t peer_op = -1;     ///< recv: the matching send's index on peer_rank (build_pipeline)
  float grad_fraction = 0.0f;    ///< grad_reduce ops: share of the step's gradient reduce
};

/// One schedule step: forward of (f_microbatch, f_chunk) and/or backward of (b_microbatch,
/// b_chunk); -1 marks the missing side (F-only or B-only step).
struct ScheduleStep {
  int f_microbatch = -1, f_chunk = -1;
  int b_microbatch = -1, b_chunk = -1;
  int first_op = 0;  ///< ops [first_op, end_op) belong to this step
  int end_op = 0;
};

struct Schedule {
  int pp_rank = 0;
  int pp_size = 1;
  int vpp = 1;
  int num_microbatches = 1;
  bool overlapped = false;
  int num_warmup = 0;                   ///< F-only warm-up steps (Megatron's count for this rank)
  std::vector<int> layers_per_chunk;    ///< decoder layers of each chunk of this rank (no MTP)
  std::vector<int> first_layer_of_chunk;  ///< global index of each chunk's first decoder layer
  std::vector<ScheduleOp> ops;          ///< host issue order
  std::vector<ScheduleStep> steps;
};

/// All pipeline ranks of one step, with recv ops linked to their sends (peer_op filled).
struct PipelineSchedule {
  std::vector<Schedule> ranks;
  std::size_t num_ops() const;
};

/// Ops of one pipeline rank (0 <= pp_rank < pp) for the configuration. `overlapped` selects the
/// combined-1F1B schedule; false gives plain 1F1B (pp>1, vpp=1), interleaved 1F1B (vpp>1) or
/// forward-then-backward per micro-batch (pp=1). Recv ops name their peer rank; peer_op stays -1.
Schedule build_schedule(const Config& cfg, int pp_rank, bool overlapped);
/// Every pipeline rank, with each recv linked to the send it waits for.
PipelineSchedule build_pipeline(const Config& cfg, bool overlapped);

/// Megatron's warm-up micro-batch count for one rank (get_pp_rank_microbatches): interleaved
/// (vpp>1, or overlap on with pp>1) (pp-rank-1)*2 + (vpp-1)*group (+1 with overlap), capped at
/// M*vpp; plain 1F1B (vpp=1, overlap off) min(pp-rank-1, M); pp=1: 1 with overlap, else 0.
int megatron_num_warmup(int pp, int vpp, int num_microbatches, int pp_rank, bool overlap,
                        int group);

/// Micro-batch and model chunk of the k-th forward (or backward) virtual micro-batch of a rank,
/// from Megatron's schedule table (groups of `group` micro-batches per virtual stage).
struct VirtualMicrobatch {
  int microbatch = 0;
  int chunk = 0;
};
VirtualMicrobatch megatron_virtual_microbatch(int k, bool forward, int num_microbatches, int vpp,
                                              int group);

/// Decoder layers of every virtual stage (index chunk*pp + rank), num_layers in total. Even when
/// pp*vpp divides num_layers; otherwise the first and last stages (which also carry embedding,
/// LM head and MTP) hold one layer fewer, alternating inwards, as Megatron's uneven pipeline
/// layouts (--decoder-first/last-pipeline-num-layers) do.
std::vector<int> layers_per_virtual_stage(int num_layers, int pp, int vpp);
/// Decoder layers of each virtual stage (index chunk * pp + rank) as the configuration places
/// them: its pipeline layout, first/last-stage counts or embedding/loss accounting
/// (pipeline_placement), else layers_per_virtual_stage. Throws an input error as Megatron would.
std::vector<int> virtual_stage_layers(const Config& cfg);

/// A model chunk (one virtual stage of one rank) as a step sees it.
struct ChunkShape {
  int first_layer = 0;       ///< global index of its first decoder layer (decides dense vs MoE)
  int num_layers = 0;        ///< decoder layers (the MTP layer not counted)
  bool mtp = false;          ///< also holds the MTP layer (last stage, mtp_num_layers = 1)
  bool first_stage = false;  ///< embedding here; no forward recv, no backward send
  bool last_stage = false;   ///< LM head + loss here; no forward send, no backward recv
};
/// Shape of chunk `chunk` of rank `pp_rank`; stage_layers from virtual_stage_layers().
ChunkShape chunk_shape(const Config& cfg, const std::vector<int>& stage_layers, int pp_rank,
                       int chunk);

/// One step outside a full schedule (for steady-state evaluation): forward of micro-batch
/// f_microbatch through chunk `f` and/or backward of b_microbatch through `b` (-1 = no side).
struct SyntheticStep {
  int f_microbatch = -1;
  ChunkShape f;
  int b_microbatch = -1;
  ChunkShape b;
  bool b_last_microbatch = false;  ///< emit the gradient-reduce ops after its layers
};
/// Ops of `steps` issued back to back on one rank into `out` (cleared, capacity kept), in the
/// same order build_schedule uses. Recv ops wait for no peer. `total_layers` sets the gradient
/// share of each reduce op.
void build_steps(const Config& cfg, bool overlapped, const SyntheticStep* steps, int num_steps,
                 int total_layers, Schedule& out);

/// Schedule node name of an op as Megatron's nodes are named with the direction, e.g.
/// "pre_dispatch.fwd", "dispatch.bwd", "mlp_wgrad", "pp_recv.fwd", "dp_grad_reduce".
const char* op_name(const ScheduleOp& op);

/// Peak number of layer activations (one layer of one micro-batch each) alive on one rank when the
/// schedule's ops are issued in order: +1 at each layer's forward pre_dispatch, -1 at its
/// backward pre_dispatch. Divide by layers per chunk for chunk-micro-batches in flight.
int activation_peak_layers(const Schedule& schedule);

}  // namespace epo::model
