// split-kv — the decoding forward on tensor cores: the keys split across thread blocks, each
// split's partial O and LSE merged by the log-sum-exp rule, a K/V head's query heads in one tile,
// K and V from a contiguous or a paged cache.
//
// What changes from `tiled`: a thread block is no longer a (query head, Q block) but a (K/V head,
// block of 16 packed rows, split of the keys) (schedule.h, shared with the CPU twin). At Nq = 1
// the group's query heads are the tile's rows, so K and V are read once per K/V head; the splits
// put B Hkv heads on all the SMs. Decoding is bound by reading the cache, so the block is built
// to keep HBM busy: every key tile is in flight before it is needed.
//
//   block (split j, row block, K/V head kh), 4 warps:
//
//     Q: 16 packed rows x d, in registers (A fragments) for the whole loop; at d = 256 read from
//        shared memory at every k16 step instead (O alone is 128 registers a thread there)
//     key tiles of split j (64 keys each; cp.async, 4 stages at d = 64, 3 at d = 128 and 256):
//        K tile  [ keys 0-15 | keys 16-31 | keys 32-47 | keys 48-63 ]
//                   warp 0      warp 1       warp 2       warp 3
//        each warp: S = Q K_w^T (16 x 16), online softmax over its keys, O_w += P V_w (16 x d)
//     the warps' (m, l, O) merged through shared memory (the same rule as the combine)
//     one split:  O, LSE straight to the outputs
//     S splits:   the split's partial O (fp32, divided by its l) and LSE to the workspace, then
//                 one count on its rows' counter; the split that counts last merges them:
//
//   merge (S > 1): one warp per packed row reads its S partials in split order and writes
//     LSE = log sum_j exp(LSE_j),  O = sum_j exp(LSE_j - LSE) O_j       (deterministic)
//   done by the last split, inside the split pass (no second launch); by a combine kernel when
//   there are more workers' rows than counters (--splits forced on a large batch).
//
// A paged cache, the pool [pages, Hkv, P, d] (core/paged.h): a page holds this head's P keys as
// one run, so a tile of pages of 64 keys or more is one run found by one block-table read; with
// smaller pages each 16-byte copy finds its key's page (the table's entries stay in L1).
// The pool's slots past Nk are never read (they hold NaN in the lab's inputs); rows past the
// group's last are computed on zero-filled Q and never written.
//
// The split count: schedule.h's rule, planned with this kernel's tile (16 packed rows, 64 keys)
// and the device's SM count; LaunchOptions::kv_splits (--splits) forces it.
//
// Limits: fp16 and bf16, head dims 64, 128 and 256 (d = 256 takes 200 KiB of shared memory a
// block: an sm_90 GPU's, not an sm_80 one's), fp32 accumulation, forward only; a dense batch
// (a packed batch is refused: its sequences would each need a schedule of their own); at most
// 65535 row blocks (H/Hkv Nq <= 1048560 packed rows), B <= 65535 and splits Hkv < 2^31; Nq,
// Nk <= 2^30.
// mma.sync runs on sm_80 and later.
#include <cuda_runtime.h>

#include <bit>
#include <cstdint>
#include <string>

#include "common/band.h"
#include "common/dispatch.cuh"
#include "common/shape_check.h"
#include "core/device.h"
#include "core/device_api.h"
#include "schedule.h"
#include "split_launch.h"

namespace flashlab::cuda {

namespace {

namespace split_fwd = FLASHLAB_FOLDER::split_fwd;
namespace plan = ::flashlab::FLASHLAB_FOLDER;

static_assert(kMaxKvSplits <= 32 * split_fwd::kMaxSplitsPerLane,
              "the merge keeps every split's LSE in one warp's registers");
constexpr int64_t kMaxRowsPerHead = int64_t{65535} * split_fwd::kBr;

std::string split_check(const Problem& p) {
  std::string why =
      shape_check(p, "split-kv", {.head_dims = {64, 128, 256}, .max_rows = int64_t{1} << 30});
  if (why.empty() && p.shape.group() * p.shape.Nq > kMaxRowsPerHead)
    why = "split-kv on CUDA takes at most " + std::to_string(kMaxRowsPerHead) +
          " packed rows per K/V head (H/Hkv x Nq); it is for few query rows";
  return why;
}

// The schedule the kernels walk: the twin's rule with this kernel's tile and the device's SMs
// (the twin's stand-in count where no device answers).
plan::SplitSchedule schedule(const Problem& p, const LaunchOptions& launch) {
  const DeviceInfo& dev = device_info();
  const int64_t sms = dev.present && dev.sms > 0 ? dev.sms : plan::kStandInSms;
  return plan::split_schedule(p, split_fwd::kBr, split_fwd::kBc, launch.kv_splits, sms);
}

int64_t split_count(const Problem& p, const LaunchOptions& launch) {
  return schedule(p, launch).splits;
}

// Each split's partial O and LSE in fp32 for every packed row: S B Hkv (H/Hkv Nq) (d + 1) 4
// bytes, as the registry's formula says; none with one split.
size_t split_workspace(const Problem& p, const LaunchOptions& launch) {
  const plan::SplitSchedule sc = schedule(p, launch);
  if (sc.splits == 1) return 0;
  return static_cast<size_t>(sc.splits * p.shape.kv_head_count() * sc.rows * (p.shape.d + 1) * 4);
}

void split_forward(const DeviceTensors& t) {
  const Problem& p = t.problem;
  const Shape& s = p.shape;
  const plan::SplitSchedule sc = schedule(p, t.launch);
  split_fwd::SplitParams sp;
  sp.q = t.Q;
  sp.k = t.K;
  sp.v = t.V;
  sp.o = t.O;
  sp.lse = t.LSE;
  sp.block_table = t.block_table;
  sp.H = static_cast<int>(s.H);
  sp.Hkv = static_cast<int>(s.kv_heads());
  sp.group = static_cast<int>(s.group());
  sp.Nq = static_cast<int>(s.Nq);
  sp.Nk = static_cast<int>(s.Nk);
  sp.rows = static_cast<int>(sc.rows);
  sp.page_size = static_cast<int>(s.page_size);
  if (s.paged())  // a power of two (run/validate.cpp)
    sp.page_shift = std::countr_zero(static_cast<uint64_t>(s.page_size));
  sp.pages_per_seq = static_cast<int>(s.pages_per_seq());
  sp.splits = static_cast<int>(sc.splits);
  sp.first_block = static_cast<int>(sc.first_block);
  sp.seen_blocks = static_cast<int>(sc.seen_blocks);
  const Band band = band_of(p);  // common/band.h: an unbounded side already covers every key
  sp.lo_shift = band.offset - band.left;
  sp.hi_shift = band.offset + band.right;
  sp.scale_log2 = static_cast<float>(p.softmax_scale() * 1.4426950408889634);
  const int kv_heads = static_cast<int>(s.kv_head_count());
  if (sc.splits > 1) {
    sp.part_o = static_cast<float*>(t.workspace);
    sp.part_lse = sp.part_o + sc.splits * kv_heads * sc.rows * s.d;
  }
  const int row_blocks = static_cast<int>(sc.row_blocks);
  sp.merge_in_place = sc.splits > 1 && sc.units <= split_fwd::kArrivalSlots;
  auto st = static_cast<cudaStream_t>(t.stream);
  dispatch_dtype_head_dims<64, 128, 256>(p, [&]<class T, int kD>() {
    if (s.paged())
      split_fwd::launch_split<T, kD, true>(sp, row_blocks, kv_heads, st);
    else
      split_fwd::launch_split<T, kD, false>(sp, row_blocks, kv_heads, st);
    if (sc.splits > 1 && !sp.merge_in_place) split_fwd::launch_combine<T, kD>(sp, kv_heads, st);
  });
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = split_check,
                       .workspace_bytes = split_workspace,
                       .forward = split_forward,
                       .axes = kGroupedHeads | kWindow | kPaged,
                       .kv_splits = split_count});
