// hopper — FlashAttention written the Hopper way (FA3's ideas on sm_90a): the host side of the
// rung, which launches its forward, its backward (hopper and hopper-deterministic) and the
// forward's ablation. The kernels live in fwd_kernel.cuh and bwd_kernel.cuh.
//
// What the forward changes from `tiled`: the same online softmax over the same tiles, but every
// part of the work is handed to the unit of the chip built for it, and the parts overlap.
//   1. Tiles arrive by the bulk tensor copy engine (TMA): one thread asks for a 128 x 128 tile,
//      the engine computes the addresses, swizzles, zero-fills past the end, and signals an
//      mbarrier when the bytes have landed. K and V each have a ring of stages.
//   2. The products are warpgroup MMAs (wgmma): 128 threads issue one 64 x N x 16 product that
//      runs asynchronously; S = Q K^T reads Q and K straight from shared memory, O += P V takes P
//      from the registers that hold S.
//   3. Warp specialisation: a producer warpgroup (one thread of it, in fact) only issues copies
//      and gives its registers to the consumer warpgroups (setmaxnreg): 24 / 240 with the two
//      consumer warpgroups of d = 128, 24 / 160 with the three of d = 64.
//   4. Pingpong: the consumer warpgroups take turns on the tensor cores (named barriers), so
//      one's softmax runs while another's products do (not at d = 128 under the causal mask,
//      where the turns cost more than they hide: fwd_params.h).
//   5. Inside a warpgroup, the softmax of block j runs while S = Q K_{j+1}^T is already issued.
//   6. O leaves through shared memory by a bulk tensor store; causal blocks with the most keys
//      start first; one block per SM walks many tiles (persistent).
//
// The picture (d = 128; Br = 128 query rows per block, Bc = 128 keys per tile, 2 stages):
//
//   producer warpgroup     consumer warpgroup 0 (rows 0-63)    consumer warpgroup 1 (rows 64-127)
//   (1 thread, 24 regs)    (240 regs)                          (240 regs)
//   Q ─TMA─▶ sQ[n%2]       wait K_j, V_j-1                      softmax(S_j-1) ...
//   K_j ─TMA─▶ sK[s]       ══ S_j = Q K_j^T, O += P V_j-1 ══▶  (its turn waits on named barrier)
//   V_j ─TMA─▶ sV[s]       softmax(S_j) ...                     ══ S_j, P V_j-1 ══▶
//     ▲  full[s] ▼         release K_j, V_j-1 (empty[s]) ──┐    softmax(S_j) ...
//     └── empty[s] ◀──────────────────────────────────────┘
//   epilogue: O / l ─▶ sO rows of the warpgroup ─TMA store─▶ O;  LSE from registers
//   sQ[n%2]: the block's n-th tile's Q, so that the next tile's Q lands while this one's products
//   run; sK[s], sV[s]: s = g mod 2, g counting the block's K/V blocks over all its tiles.
//
// Each idea can be switched off at compile time (FwdIdeas in fwd_params.h); `flashlab lab hopper`
// times the rung against each variant on the GPU in front of you.
//
// The backward is atomic-dq's outer-K pass with the same machinery: a producer warp loads, a
// second one adds the dQ partials into the fp32 accumulator by bulk reduce-adds (in a fixed order
// for hopper-deterministic), two consumer warpgroups at 240 registers compute (bwd_kernel.cuh
// draws the roles, README.md the pipeline); at d = 256 the consumer warpgroups split the head dim
// and compute dK and dV alone, and a second pass computes dQ (bwd_dq_pass.cuh). The preprocess
// (D, LSE2) and the convert pass are the FA2 backward's (common/fa2_bwd).
//
// Packed batches (common/packed.h): the copies of the forward and of the backward are clipped at
// each sequence's end by tensor maps per sequence, made on the device from host-encoded templates
// by tensormap.replace into the workspace (seq_maps.cuh: the fences, the order); the forward's
// tiles and the backward's blocks are numbered per sequence, most keys first. At most
// kMaxPackedSeqs sequences.
//
// Limits: sm_90a only (an H100/H200: wgmma and setmaxnreg exist nowhere else; the build needs
// -gencode=arch=compute_90a,code=sm_90a); fp16 and bf16 storage, fp32 accumulation; head dims
// 64, 128 and 256, forward and backward; B*H <= 65535; positive scale; Nq, Nk <= 2^30 and
// Nq*d, Nk*d < 2^31 (kRungLimits below). Within those any Nq, Nk: the copy engine clips tiles at
// a head's last row, so ragged tails are masked, not assumed away.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <string>

#include "ablation.h"
#include "bwd_params.h"
#include "common/band.h"
#include "common/dispatch.cuh"
#include "common/shape_check.h"
#include "common/sm90/tensor_map.h"
#include "core/cuda_check.h"
#include "core/device.h"
#include "core/device_api.h"
#include "fwd_params.h"
#include "schedule.h"
#include "seq_maps.cuh"
#include "util/error.h"

namespace flashlab::cuda {

namespace {

namespace hopper_fwd = FLASHLAB_FOLDER::hopper_fwd;
namespace hopper_bwd = FLASHLAB_FOLDER::hopper_bwd;
namespace plan = ::flashlab::FLASHLAB_FOLDER;
using FLASHLAB_FOLDER::kMaxPackedSeqs;
using FLASHLAB_FOLDER::SeqMapsParams;

// Empty when a GPU of this compute capability can run the rung (the build has already checked
// that it made sm_90a code).
std::string hopper_unavailable(int cc_major, int cc_minor) {
  if (cc_major != 9 || cc_minor != 0)
    return "needs an sm_90 GPU (H100, H200: wgmma, setmaxnreg); this one is sm_" +
           std::to_string(cc_major) + std::to_string(cc_minor);
  return {};
}

// The forward's limits: 32-bit row indices, and a positive scale (the running maximum is taken
// over the raw scores, then scaled).
constexpr ShapeLimits kForwardLimits{
    .head_dims = {64, 128, 256}, .max_rows = int64_t{1} << 30, .positive_scale = true};
// The backward's: the forward's, and the FA2 passes it runs too (preprocess, convert) with their
// 32-bit element offsets inside a head.
constexpr ShapeLimits kBackwardLimits = [] {
  ShapeLimits l = kForwardLimits;
  l.max_head_elems = kFa2BwdLimits.max_head_elems;
  return l;
}();

// The shape, then the GPU in front of us (when there is one).
std::string hopper_check(const Problem& p, const ShapeLimits& limits) {
  const std::string why = shape_check(p, "hopper", limits);
  if (!why.empty()) return why;
  const DeviceInfo& d = device_info();
  return d.present ? hopper_unavailable(d.cc_major, d.cc_minor) : std::string();
}
std::string packed_check(const Problem& p) {
  if (p.shape.packed() && p.shape.B > kMaxPackedSeqs)
    return "hopper on CUDA takes packed batches of at most " + std::to_string(kMaxPackedSeqs) +
           " sequences (its tensor maps per sequence)";
  return {};
}
// hopper: what its forward takes (check); what its backward takes beyond that (backward_check).
std::string forward_check(const Problem& p) {
  const std::string why = hopper_check(p, kForwardLimits);
  return why.empty() ? packed_check(p) : why;
}
std::string backward_check(const Problem& p) {
  const std::string why = shape_check(p, "hopper's backward", kBackwardLimits);
  return why.empty() ? bwd_packed_check(p, "hopper") : why;
}
// hopper-deterministic (a backward alone): both.
std::string rung_check(const Problem& p) {
  const std::string why = forward_check(p);
  return why.empty() ? backward_check(p) : why;
}

// The backward's workspace, as every FA2 backward of the ladder has it (LSE2, D, one fp32 dQ
// accumulator: common/fa2_bwd/params.h; none at d = 256, where the dQ pass writes dQ itself), and
// after it the forward's tile counter (the dynamic order of causal tiles: fwd_schedule.cuh).
size_t tile_counter_offset(const Problem& p) {
  return bwd_workspace_bytes(p, plan::two_pass_backward(p.shape.d) ? 0 : 1);
}
// A packed batch's per-sequence maps (up to six: the backward's), the sequence order and the
// units' starts (seq_maps.cuh) at the end of the workspace, the maps 128-byte aligned.
size_t align_maps(size_t offset) {
  return (offset + 127) / 128 * 128;
}
size_t seq_maps_bytes(const Problem& p) {
  const size_t B = static_cast<size_t>(p.shape.B);
  return FLASHLAB_FOLDER::kMaxSeqMaps * B * sizeof(CUtensorMap) + (2 * B + 1) * sizeof(int);
}
size_t seq_maps_offset(const Problem& p) {
  return align_maps(tile_counter_offset(p) + sizeof(int));
}
size_t hopper_workspace(const Problem& p, const LaunchOptions&) {
  if (!p.shape.packed()) return tile_counter_offset(p) + sizeof(int);
  return seq_maps_offset(p) + seq_maps_bytes(p);
}

// hopper-deterministic: S fp32 dQ splits instead of one accumulator (schedule.h), and one turn
// counter per (head, Q block, split) after them; at d = 256 neither (the dQ pass). K block j adds
// into split j mod S, so a chain of turns is ceil(Tc / S) K blocks long instead of Tc; the convert
// pass sums the splits in order.
int64_t dq_splits(const Problem& p) {
  if (plan::two_pass_backward(p.shape.d)) return 0;
  return plan::deterministic_dq_splits(p.shape.Nk, outer_k_bc(static_cast<int>(p.shape.d)));
}
// The turn counters' Q blocks per query head: a dense head's, or a packed batch's with room for
// every sequence's (bwd_params.h: packed_turn_block).
int64_t turn_head_blocks(const Problem& p) {
  const int br = outer_k_br(static_cast<int>(p.shape.d));  // the kernel's Br (fa2_bwd/blocks.h)
  if (p.shape.packed()) return hopper_bwd::packed_turn_blocks(p.shape.total_q(), p.shape.B, br);
  return (p.shape.Nq + br - 1) / br;
}
int64_t turn_bytes(const Problem& p) {
  const int64_t heads = p.shape.packed() ? p.shape.H : p.shape.heads();
  return heads * turn_head_blocks(p) * dq_splits(p) * 4;
}
size_t turns_offset(const Problem& p) {
  return bwd_workspace_bytes(p, dq_splits(p));
}
size_t deterministic_maps_offset(const Problem& p) {
  return align_maps(turns_offset(p) + static_cast<size_t>(turn_bytes(p)));
}
size_t deterministic_workspace(const Problem& p, const LaunchOptions&) {
  if (!p.shape.packed()) return turns_offset(p) + static_cast<size_t>(turn_bytes(p));
  return deterministic_maps_offset(p) + seq_maps_bytes(p);
}

using hopper_fwd::FwdParams;

// The forward's tiling of the problem into tiles of Br query rows (a tile per query head and Q
// block) over K/V blocks of Bc keys: the sizes, the band, the scale, the tile count and the dense
// maps of Q, K and V (boxes of Br and Bc rows). The backward's dQ pass tiles the same way.
FwdParams tiling_params(const DeviceTensors& t, int D, int Br, int Bc) {
  const Problem& p = t.problem;
  const sm90::Elem16 e = p.dtype == DType::f16 ? sm90::Elem16::f16 : sm90::Elem16::bf16;
  const int64_t heads = p.shape.heads(), kv_heads = p.shape.kv_head_count();
  const int64_t Nq = p.shape.Nq, Nk = p.shape.Nk;
  FwdParams fp{};
  fp.q_map = sm90::tensor_map_3d(t.Q, e, D, Nq, heads, Br);
  fp.k_map = sm90::tensor_map_3d(t.K, e, D, Nk, kv_heads, Bc);
  fp.v_map = sm90::tensor_map_3d(t.V, e, D, Nk, kv_heads, Bc);
  fp.Nq = static_cast<int>(Nq);
  fp.Nk = static_cast<int>(Nk);
  fp.group = static_cast<int>(p.shape.group());
  const Band band = band_of(p);  // common/band.h
  fp.band_left = band.left;
  fp.band_right = band.right;
  fp.causal_offset = static_cast<int>(p.causal_offset());
  fp.scale_log2 = static_cast<float>(p.softmax_scale() * 1.4426950408889634);
  fp.q_blocks = static_cast<int>((Nq + Br - 1) / Br);
  fp.tiles = static_cast<int>(fp.q_blocks * heads);
  return fp;
}

// The parameters of one forward: tensor maps over this problem's buffers (they hold the device
// addresses, so they are made for every call; encoding one takes a few microseconds).
template <int D, bool kCausal>
FwdParams forward_params(const DeviceTensors& t) {
  using Tr = hopper_fwd::FwdTraits<D, kCausal>;
  const sm90::Elem16 e = t.problem.dtype == DType::f16 ? sm90::Elem16::f16 : sm90::Elem16::bf16;
  FwdParams fp = tiling_params(t, D, Tr::Br, Tr::Bc);
  // One consumer warpgroup's rows.
  fp.o_map = sm90::tensor_map_3d(t.O, e, D, t.problem.shape.Nq, t.problem.shape.heads(), 64);
  fp.q = t.Q;
  fp.k = t.K;
  fp.v = t.V;
  fp.o = t.O;
  fp.lse = t.LSE;
  fp.tile_counter = reinterpret_cast<int*>(static_cast<unsigned char*>(t.workspace) +
                                           tile_counter_offset(t.problem));
  return fp;
}

// A packed batch's maps of one sequence, made by the map kernel (seq_maps.cuh) from templates
// over the whole tensors: each over `base`, the sequence's keys or its queries, boxes of
// `box_rows` rows.
struct PackedMap {
  const void* base;
  bool of_keys;
  int box_rows;
};

// Runs the map kernel: each sequence's maps (in the order of `maps`), the sequences' order (most
// keys first) and where each one's units start (Hkv ceil(nk / unit_rows) units of keys, or H
// ceil(nq / unit_rows) of queries), into the workspace at `maps_at`. Returns what it was given,
// whose maps, order and unit_start point at the results.
SeqMapsParams packed_maps(const DeviceTensors& t, int D, std::initializer_list<PackedMap> maps,
                          bool units_of_keys, int unit_rows, size_t maps_at) {
  const Problem& p = t.problem;
  const Shape& s = p.shape;
  const sm90::Elem16 e = p.dtype == DType::f16 ? sm90::Elem16::f16 : sm90::Elem16::bf16;
  const int64_t rows_q = std::max<int64_t>(1, s.Nq), rows_k = std::max<int64_t>(1, s.Nk);
  SeqMapsParams mp{};
  for (const PackedMap& m : maps) {
    const int i = mp.n_maps++;
    const int64_t heads = m.of_keys ? s.kv_heads() : s.H;
    mp.of_keys[i] = m.of_keys;
    mp.tmpl[i] =
        sm90::tensor_map_packed(m.base, e, D, m.of_keys ? rows_k : rows_q, heads, m.box_rows);
    mp.base[i] = static_cast<const unsigned char*>(m.base);
    mp.row_bytes[i] = heads * D * 2;
  }
  mp.cu_q = t.cu_q;
  mp.cu_k = t.cu_k;
  mp.B = static_cast<int>(s.B);
  mp.unit_heads = static_cast<int>(units_of_keys ? s.kv_heads() : s.H);
  mp.unit_rows = unit_rows;
  mp.units_of_keys = units_of_keys;
  unsigned char* at = static_cast<unsigned char*>(t.workspace) + maps_at;
  mp.maps = reinterpret_cast<CUtensorMap*>(at);
  mp.order = reinterpret_cast<int*>(at + FLASHLAB_FOLDER::kMaxSeqMaps * s.B * sizeof(CUtensorMap));
  mp.unit_start = mp.order + s.B;
  FLASHLAB_FOLDER::seq_maps_kernel<<<1, 256, 0, static_cast<cudaStream_t>(t.stream)>>>(mp);
  FLASHLAB_CHECK_LAUNCH();
  return mp;
}

// A packed batch's tiles of Br query rows (the forward's and the dQ pass's), sequence by sequence
// in the map kernel's order, and the maps made for them.
void packed_tiles(const DeviceTensors& t, const SeqMapsParams& mp, int Br, FwdParams& fp) {
  const Shape& s = t.problem.shape;
  fp.cu_q = t.cu_q;
  fp.cu_k = t.cu_k;
  fp.seq_maps = mp.maps;
  fp.seq_order = mp.order;
  fp.tile_start = mp.unit_start;
  fp.B = mp.B;
  fp.total_q = static_cast<int>(s.total_q());
  fp.heads = mp.unit_heads;
  int64_t tiles = 0;
  for (int64_t b = 0; b < s.B; ++b) tiles += s.H * ((s.len_q(b) + Br - 1) / Br);
  fp.tiles = static_cast<int>(tiles);
}

// A packed batch: the template maps over the whole tensors, the per-sequence maps and the tile
// order made by the map kernel into the workspace (seq_maps.cuh), the tiles counted per
// sequence.
template <int D, bool kCausal>
FwdParams packed_forward_params(const DeviceTensors& t) {
  using Tr = hopper_fwd::FwdTraits<D, kCausal>;
  FwdParams fp = forward_params<D, kCausal>(t);
  const SeqMapsParams mp = packed_maps(
      t, D, {{t.Q, false, Tr::Br}, {t.K, true, Tr::Bc}, {t.V, true, Tr::Bc}, {t.O, false, 64}},
      false, Tr::Br, seq_maps_offset(t.problem));
  packed_tiles(t, mp, Tr::Br, fp);
  return fp;
}

template <unsigned kIdeas, class T, int D>
void forward_for(const DeviceTensors& t) {
  auto st = static_cast<cudaStream_t>(t.stream);
  if constexpr (kIdeas == hopper_fwd::kAllIdeas) {
    if (t.problem.shape.packed()) {
      constexpr unsigned kPackedIdeas = kIdeas | hopper_fwd::kPackedBatch;
      if (mask_kind_of(t.problem) == MaskKind::both)
        return hopper_fwd::launch_fwd<T, D, true, kPackedIdeas | hopper_fwd::kLeftSide>(
            packed_forward_params<D, true>(t), st);
      if (t.problem.causal || t.problem.windowed())
        return hopper_fwd::launch_fwd<T, D, true, kPackedIdeas>(packed_forward_params<D, true>(t),
                                                                st);
      return hopper_fwd::launch_fwd<T, D, false, kPackedIdeas>(packed_forward_params<D, false>(t),
                                                               st);
    }
  }
  // The banded kernel for the causal mask and windows; a window's left side is tested only by the
  // kernel built for it (fwd_params.h: kLeftSide).
  if constexpr (kIdeas == hopper_fwd::kAllIdeas) {
    if (mask_kind_of(t.problem) == MaskKind::both)
      return hopper_fwd::launch_fwd<T, D, true, kIdeas | hopper_fwd::kLeftSide>(
          forward_params<D, true>(t), st);
  }
  if (t.problem.causal || t.problem.windowed())
    hopper_fwd::launch_fwd<T, D, true, kIdeas>(forward_params<D, true>(t), st);
  else
    hopper_fwd::launch_fwd<T, D, false, kIdeas>(forward_params<D, false>(t), st);
}

void hopper_forward(const DeviceTensors& t) {
  dispatch_dtype_head_dims<64, 128, 256>(
      t.problem, [&]<class T, int kD>() { forward_for<hopper_fwd::kAllIdeas, T, kD>(t); });
}

// ---- backward ----

// A packed batch's backward: templates of the six maps over the whole tensors, and the map kernel
// (seq_maps.cuh) writing each sequence's maps, the sequences' order (most keys first) and where
// their blocks start into the workspace at `maps_at`. Returns the grid: Hkv ceil(nk / Bc) blocks
// per sequence.
template <int D>
int packed_backward_maps(const DeviceTensors& t, size_t maps_at, hopper_bwd::BwdParams& bp) {
  const Shape& s = t.problem.shape;
  using Tr = hopper_bwd::BwdTraits<D>;
  // In kSeqMaps' order. Boxes: Br query rows (Q, dO), Bc keys (K, V), 64 keys (dK, dV: a consumer
  // warpgroup's keys, or at d = 256 the whole block's, in column blocks).
  const SeqMapsParams mp = packed_maps(t, D,
                                       {{t.Q, false, Tr::Br},
                                        {t.dO, false, Tr::Br},
                                        {t.K, true, Tr::Bc},
                                        {t.V, true, Tr::Bc},
                                        {t.dK, true, 64},
                                        {t.dV, true, 64}},
                                       true, Tr::Bc, maps_at);
  bp.seq_maps = mp.maps;
  bp.seq_order = mp.order;
  bp.block_start = mp.unit_start;
  int64_t blocks = 0;
  for (int64_t b = 0; b < s.B; ++b) blocks += s.kv_heads() * ((s.len_k(b) + Tr::Bc - 1) / Tr::Bc);
  return static_cast<int>(blocks);
}

// The dQ pass at d = 256 (bwd_dq_pass.cuh), after the outer-K kernel on the same stream: the
// forward's tiling with the pass's blocks (Br query rows, Bc keys), maps of Q, K, V and dO; a
// packed batch's maps and tile order made by the map kernel at `maps_at`, over the outer-K
// kernel's, which has finished with them.
template <class T>
void dq_pass(const DeviceTensors& t, const hopper_bwd::BwdParams& bp, size_t maps_at) {
  const Problem& p = t.problem;
  using Tr = hopper_bwd::DqTraits;
  const sm90::Elem16 e = p.dtype == DType::f16 ? sm90::Elem16::f16 : sm90::Elem16::bf16;
  hopper_bwd::DqParams dp{};
  dp.f = tiling_params(t, Tr::D, Tr::Br, Tr::Bc);
  dp.dq = t.dQ;
  dp.lse2 = bp.b.LSE2;
  dp.dd = bp.b.D;
  dp.lse_head_rows = bp.lse_head_rows;
  dp.scale = bp.b.scale;
  auto st = static_cast<cudaStream_t>(t.stream);
  const bool banded = p.causal || p.windowed();
  if (!p.shape.packed()) {
    dp.do_map = sm90::tensor_map_3d(t.dO, e, Tr::D, p.shape.Nq, p.shape.heads(), Tr::Br);
    if (banded)
      hopper_bwd::launch_dq_pass<T, true, false>(dp, st);
    else
      hopper_bwd::launch_dq_pass<T, false, false>(dp, st);
    return;
  }
  // In DqMap's order.
  const SeqMapsParams mp = packed_maps(
      t, Tr::D,
      {{t.Q, false, Tr::Br}, {t.K, true, Tr::Bc}, {t.V, true, Tr::Bc}, {t.dO, false, Tr::Br}},
      false, Tr::Br, maps_at);
  packed_tiles(t, mp, Tr::Br, dp.f);
  if (banded)
    hopper_bwd::launch_dq_pass<T, true, true>(dp, st);
  else
    hopper_bwd::launch_dq_pass<T, false, true>(dp, st);
}

template <class T, int D, bool kDeterministic>
void backward_for(const DeviceTensors& t) {
  const Problem& p = t.problem;
  const Shape& s = p.shape;
  const bool packed = s.packed();
  const sm90::Elem16 e = p.dtype == DType::f16 ? sm90::Elem16::f16 : sm90::Elem16::bf16;
  const int64_t heads = s.heads(), kv_heads = s.kv_head_count();
  const int64_t Nq = s.Nq, Nk = s.Nk;
  using Tr = hopper_bwd::BwdTraits<D>;
  hopper_bwd::BwdParams bp{};
  bp.b = bwd_make_params(t);
  bp.lse_head_rows = packed ? bp.b.lse_rows : bp.b.Nq_pad;
  bp.accum_head_rows = packed ? bp.b.total_q : bp.b.Nq;
  bp.turn_head_blocks = static_cast<int>(turn_head_blocks(p));
  bp.sms = device_info().sms;
  int blocks = 0;  // a packed batch's grid (a dense one's is worked out by the launcher)
  const size_t maps_at = kDeterministic ? deterministic_maps_offset(p) : seq_maps_offset(p);
  if (packed) {
    blocks = packed_backward_maps<D>(t, maps_at, bp);
  } else {
    bp.q_map = sm90::tensor_map_3d(t.Q, e, D, Nq, heads, Tr::Br);
    bp.do_map = sm90::tensor_map_3d(t.dO, e, D, Nq, heads, Tr::Br);
    bp.k_map = sm90::tensor_map_3d(t.K, e, D, Nk, kv_heads, Tr::Bc);
    bp.v_map = sm90::tensor_map_3d(t.V, e, D, Nk, kv_heads, Tr::Bc);
    bp.dk_map = sm90::tensor_map_3d(t.dK, e, D, Nk, kv_heads, 64);  // 64 keys (as above)
    bp.dv_map = sm90::tensor_map_3d(t.dV, e, D, Nk, kv_heads, 64);
    const int64_t k_blocks = (Nk + Tr::Bc - 1) / Tr::Bc;
    bp.kv_chunk = static_cast<int>(std::max<int64_t>(1, bp.sms / k_blocks));
  }
  auto st = static_cast<cudaStream_t>(t.stream);
  if constexpr (plan::two_pass_backward(D)) {
    // dK, dV by the outer-K kernel, dQ by the dQ pass: nothing is added concurrently, so
    // hopper-deterministic runs the same kernels (bwd_dq_pass.cuh says why).
    launch_bwd_preprocess<T, D>(bp.b, t.stream);
    if (packed)
      hopper_bwd::launch_bwd<T, D, false, true>(bp, blocks, st);
    else
      hopper_bwd::launch_bwd<T, D, false, false>(bp, 0, st);
    dq_pass<T>(t, bp, maps_at);
  } else {
    if constexpr (kDeterministic) {
      // Each split's first writer of a block stores, so the splits need no zeroing; the convert
      // pass reads split s of a row only when K block s saw it (outer-K's Br and Bc, which are
      // this kernel's: bwd_params.h).
      bp.b.dq_splits = static_cast<int>(dq_splits(p));
      bp.b.dq_strided = true;
      bp.dq_turn =
          reinterpret_cast<int*>(static_cast<unsigned char*>(t.workspace) + turns_offset(p));
      FLASHLAB_CUDA_CHECK(cudaMemsetAsync(bp.dq_turn, 0, static_cast<size_t>(turn_bytes(p)), st));
    } else {
      FLASHLAB_CUDA_CHECK(cudaMemsetAsync(bp.b.dQ_accum, 0, s.q_elems() * 4, st));
    }
    launch_bwd_preprocess<T, D>(bp.b, t.stream);
    if (packed)
      hopper_bwd::launch_bwd<T, D, kDeterministic, true>(bp, blocks, st);
    else
      hopper_bwd::launch_bwd<T, D, kDeterministic, false>(bp, 0, st);
    if constexpr (kDeterministic)
      launch_bwd_convert_dq<T, D>(bp.b, DqMode::split, bp.b.dq_splits, t.stream);
    else
      launch_bwd_convert_dq<T, D>(bp.b, DqMode::atomic, 1, t.stream);
  }
}

template <bool kDeterministic>
void backward(const DeviceTensors& t) {
  dispatch_dtype_head_dims<64, 128, 256>(
      t.problem, [&]<class T, int kD>() { backward_for<T, kD, kDeterministic>(t); });
}

// The ablation's variants are forwards, and run bf16, d = 128 only (the shape the rung is tuned
// for).
std::string ablation_check(const Problem& p) {
  const std::string why = hopper_check(p, kForwardLimits);
  if (!why.empty()) return why;
  if (p.dtype != DType::bf16 || p.shape.d != 128)
    return "the hopper ablation's variants are built for bf16, d = 128 only";
  return {};
}

template <unsigned kIdeas>
void ablation_forward(const DeviceTensors& t) {
  forward_for<kIdeas, __nv_bfloat16, 128>(t);
}

template <size_t kLine, unsigned kIdeas>
AblationVariant variant() {
  const plan::AblationLine& l = plan::kAblation[kLine];
  return {l.id, l.idea, l.what,
          Version{.check = ablation_check,
                  .workspace_bytes = hopper_workspace,
                  .forward = ablation_forward<kIdeas>,
                  .unavailable = hopper_unavailable,
                  .axes = kGroupedHeads}};  // windows: the rung's own kernels (kLeftSide)
}

// One kernel per line of kAblation (ablation.h), in its order.
std::span<const AblationVariant> hopper_ablation() {
  static const AblationVariant variants[] = {
      variant<0, hopper_fwd::kAllIdeas>(),
      variant<1, hopper_fwd::kWithoutTma>(),
      variant<2, hopper_fwd::kWithoutAsyncWgmma>(),
      variant<3, hopper_fwd::kWithoutWarpSpecialization>(),
      variant<4, hopper_fwd::kWithoutPingpong>(),
      variant<5, hopper_fwd::kWithoutIntraOverlap>(),
      variant<6, hopper_fwd::kWithoutTmaEpilogue>(),
      variant<7, hopper_fwd::kWithoutHeavyFirst>(),
      variant<8, hopper_fwd::kWithoutPersistent>(),
  };
  static_assert(std::size(variants) == std::size(plan::kAblation));
  return variants;
}

}  // namespace

}  // namespace flashlab::cuda

FLASHLAB_CUDA_VERSION({.check = forward_check,
                       .workspace_bytes = hopper_workspace,
                       .forward = hopper_forward,
                       .backward = backward<false>,
                       .backward_check = backward_check,
                       .unavailable = hopper_unavailable,
                       .ablation = hopper_ablation,
                       .axes = kGroupedHeads | kWindow | kPacked});

FLASHLAB_CUDA_VARIANT(deterministic, {.check = rung_check,
                                      .workspace_bytes = deterministic_workspace,
                                      .backward = backward<true>,
                                      .unavailable = hopper_unavailable,
                                      .axes = kGroupedHeads | kWindow | kPacked});
