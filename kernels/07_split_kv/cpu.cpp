// split-kv: the decoding forward. A generated token is one query row (Nq = 1; up to 64 for
// speculative decoding or a chunk of a prompt) against a long K/V cache, so the FA2 forward's
// grid of (head, Q block) has one block per head and leaves most of the GPU idle, while the cost
// is reading K and V once. This rung cuts the keys instead (schedule.h):
//
//   per (batch, K/V head kh, row block of the group's packed rows, split j):
//     Q rows of every query head of kh's group                 (K, V read once for the group)
//     for key blocks b of split j:                            (blocks no row sees: skipped)
//       S = scale Q K_b^T, masked per packed row (its query row R / group)
//       online softmax: m, l, O as in tiled
//     S = 1: O = O / l, LSE = m + log l, written straight to the outputs
//     S > 1: the split's partial O_j = O / l and LSE_j = m + log l, to the workspace
//
//   combine (S > 1), per packed row:                         (the splits in order: deterministic)
//     LSE = log sum_j exp(LSE_j)           (with max_j LSE_j taken out first)
//     O   = sum_j exp(LSE_j - LSE) O_j     (the online softmax's rescaling, across splits)
//   (On the GPU the split that finishes last among a row block's splits does this merge, in the
//   same order, inside the split pass; here it runs once every split is done. The counts are the
//   same: each partial written once and read once.)
//
// A split that sees no key of a row has LSE_j = -inf and weighs 0; a row no split sees gets
// O = 0, LSE = -inf. K and V come from a contiguous [B, Hkv, Nk, d] or a paged cache
// (core/paged.h): a tile's keys are found page by page through the block table.
#include <cmath>
#include <limits>
#include <vector>

#include "common/cpu/fwd.h"
#include "common/cpu/tiles.h"
#include "core/dtype.h"
#include "core/paged.h"
#include "core/version.h"
#include "schedule.h"

namespace flashlab::cpu {

namespace {

namespace plan = ::flashlab::FLASHLAB_FOLDER;  // schedule.h: what the twin shares with the kernel

// Query head and query row of packed row R of K/V head kh.
struct PackedRow {
  int64_t head, row;
};
PackedRow packed_row(const Shape& s, const plan::SplitSchedule& sc, int64_t kh, int64_t R) {
  return {s.first_q_of(kh) + R % sc.group, R / sc.group};
}

// Where key j of K/V head kh (flattened over the batch) starts: contiguous or in a page.
int64_t key_row(const Shape& s, const Inputs& in, int64_t kh, int64_t j) {
  if (!s.paged()) return (kh * s.Nk + j) * s.d;
  return paged_row(s, in.block_table, kh / s.kv_heads(), kh % s.kv_heads(), j);
}

// Block-table entries a tile of keys [c0, c0 + cols) reads: one per page it touches.
int64_t pages_touched(const Shape& s, int64_t c0, int64_t cols) {
  return s.paged() ? (c0 + cols - 1) / s.page_size - c0 / s.page_size + 1 : 0;
}

// S times the scale, and -inf for the keys a packed row's query row does not see.
template <class T>
void scale_and_mask_rows(T* S, int64_t rows, int64_t cols, T scale, TileMask mask, const Problem& p,
                         int64_t R0, int64_t group, int64_t c0) {
  const T neg_inf = -std::numeric_limits<T>::infinity();
  for (int64_t rr = 0; rr < rows; ++rr) {
    T* s = S + rr * cols;
    for (int64_t c = 0; c < cols; ++c) s[c] *= scale;
    if (mask == TileMask::partial) {
      const int64_t r = (R0 + rr) / group;
      const int64_t lo = std::clamp<int64_t>(p.first_key(r) - c0, 0, cols);
      const int64_t hi = std::clamp<int64_t>(p.last_key(r) - c0 + 1, lo, cols);
      for (int64_t c = 0; c < lo; ++c) s[c] = neg_inf;
      for (int64_t c = hi; c < cols; ++c) s[c] = neg_inf;
    }
  }
}

// Bytes of the twin's own buffers: each thread's tile (and, from a paged cache, its gathered K
// and V rows, and the combine's row), and with S > 1 the partials in the compute type.
int64_t scratch_bytes(const Problem& p, const CpuOptions& o) {
  const Shape& s = p.shape;
  const plan::SplitSchedule sc = plan::split_schedule(p, o.Br, o.Bc, o.splits);
  const int64_t e = compute_bytes(p.dtype), threads = thread_count(o, p);
  int64_t bytes = fwd_tile_scratch_bytes(p, o) + threads * e * s.d;
  if (s.paged()) bytes += threads * 8 * 2 * o.Bc * s.d;
  if (sc.splits > 1) bytes += e * sc.splits * s.kv_head_count() * sc.rows * (s.d + 1);
  return bytes;
}

template <class T>
void split_kv(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
              Counters& cnt) {
  const Shape& s = p.shape;
  const int64_t d = s.d, heads = s.kv_head_count();
  const plan::SplitSchedule sc = plan::split_schedule(p, o.Br, o.Bc, o.splits);
  const int64_t S = sc.splits, R = sc.rows;
  const Blocks rb{R, o.Br}, kb{s.Nk, o.Bc};
  const bool dry = o.dry_run;
  const T scale = static_cast<T>(p.softmax_scale());
  const T neg_inf = -std::numeric_limits<T>::infinity();
  prepare_forward(p, dry, out);
  // The workspace: split j's O (rows x d, divided by its own l) and LSE of every packed row.
  std::vector<T> part_o, part_lse;
  if (S > 1 && !dry) {
    part_o.resize(static_cast<size_t>(S * heads * R * d));
    part_lse.resize(static_cast<size_t>(S * heads * R));
  }
  Counters total;

#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
  {
    FwdTile<T> t(dry ? 0 : o.Br, dry ? 0 : o.Bc, dry ? 0 : d);
    std::vector<double> k_rows, v_rows;  // a paged tile's keys, gathered page by page
    if (!dry && s.paged()) {
      k_rows.resize(static_cast<size_t>(o.Bc * d));
      v_rows.resize(static_cast<size_t>(o.Bc * d));
    }
#pragma omp for collapse(3) schedule(dynamic)
    for (int64_t kh = 0; kh < heads; ++kh)
      for (int64_t m = 0; m < rb.count(); ++m)
        for (int64_t j = 0; j < S; ++j) {
          const int64_t R0 = rb.begin(m), rows = rb.size(m);
          const int64_t r_first = R0 / sc.group, r_last = (R0 + rows - 1) / sc.group;
          total.elems_read += rows * d;  // the group's Q rows
          if (!dry) {
            for (int64_t rr = 0; rr < rows; ++rr) {
              const PackedRow q = packed_row(s, sc, kh, R0 + rr);
              load_rows(t.Q.data() + rr * d, &in.Q[(q.head * s.Nq + q.row) * d], 1, d);
            }
            std::fill(t.O.begin(), t.O.end(), T(0));
            std::fill(t.m.begin(), t.m.end(), neg_inf);
            std::fill(t.l.begin(), t.l.end(), T(0));
          }
          // Blocks no row of the problem sees are in no split: skipped, counted once.
          if (j == 0) total.tiles_skipped += sc.key_blocks - sc.seen_blocks;
          for (int64_t b = sc.begin(j); b < sc.begin(j + 1); ++b) {
            const int64_t c0 = kb.begin(b), cols = kb.size(b);
            const TileMask mask = tile_mask(p, r_first, r_last - r_first + 1, c0, cols);
            if (!count_tile(total, mask)) continue;
            total.elems_read += 2 * cols * d + pages_touched(s, c0, cols);  // K_b, V_b (+ table)
            total.matmul_flops += 2 * (2 * rows * cols * d);                // Q K^T and P V
            if (dry) continue;
            const double *k = &in.K[key_row(s, in, kh, c0)], *v = &in.V[key_row(s, in, kh, c0)];
            if (s.paged()) {  // the tile's keys may lie on several pages
              for (int64_t c = 0; c < cols; ++c) {
                const int64_t at = key_row(s, in, kh, c0 + c);
                std::copy_n(&in.K[at], d, &k_rows[c * d]);
                std::copy_n(&in.V[at], d, &v_rows[c * d]);
              }
              k = k_rows.data();
              v = v_rows.data();
            }
            t.scores(k, v, rows, cols, d);
            scale_and_mask_rows(t.S.data(), rows, cols, scale, mask, p, R0, sc.group, c0);
            online_softmax_step(t, rows, cols, d);
          }
          total.elems_written += rows * d + rows;  // O and LSE, or the split's partials
          if (dry) continue;
          for (int64_t rr = 0; rr < rows; ++rr) {
            const bool saw_none = t.l[rr] == T(0);
            const T lse = saw_none ? neg_inf : t.m[rr] + std::log(t.l[rr]);
            if (S == 1) {  // as tiled writes its rows
              const PackedRow q = packed_row(s, sc, kh, R0 + rr);
              double* o_row = &out.O[(q.head * s.Nq + q.row) * d];
              for (int64_t k = 0; k < d; ++k)
                o_row[k] = saw_none
                               ? 0.0
                               : round_to(p.dtype, static_cast<double>(t.O[rr * d + k] / t.l[rr]));
              out.LSE[q.head * s.Nq + q.row] =
                  saw_none ? -std::numeric_limits<double>::infinity() : static_cast<double>(lse);
              continue;
            }
            const int64_t at = (j * heads + kh) * R + R0 + rr;
            part_lse[at] = lse;
            for (int64_t k = 0; k < d; ++k)
              part_o[at * d + k] = saw_none ? T(0) : t.O[rr * d + k] / t.l[rr];
          }
        }
  }

  if (S > 1) {  // the combine pass: one worker per (K/V head, row block)
#pragma omp parallel num_threads(thread_count(o, p)) reduction(+ : total)
    {
      std::vector<T> acc(dry ? 0 : d);
#pragma omp for collapse(2) schedule(static)
      for (int64_t kh = 0; kh < heads; ++kh)
        for (int64_t m = 0; m < rb.count(); ++m) {
          const int64_t R0 = rb.begin(m), rows = rb.size(m);
          total.elems_read += S * (rows * d + rows);  // every split's partial O and LSE
          total.elems_written += rows * d + rows;     // O and LSE
          if (dry) continue;
          for (int64_t rr = 0; rr < rows; ++rr) {
            const PackedRow q = packed_row(s, sc, kh, R0 + rr);
            const auto part = [&](int64_t j) { return (j * heads + kh) * R + R0 + rr; };
            T most = neg_inf;
            for (int64_t j = 0; j < S; ++j) most = std::max(most, part_lse[part(j)]);
            double* o_row = &out.O[(q.head * s.Nq + q.row) * d];
            if (most == neg_inf) {  // no split saw a key of this row
              std::fill(o_row, o_row + d, 0.0);
              out.LSE[q.head * s.Nq + q.row] = -std::numeric_limits<double>::infinity();
              continue;
            }
            T sum = 0;
            for (int64_t j = 0; j < S; ++j) sum += std::exp(part_lse[part(j)] - most);
            const T lse = most + std::log(sum);
            std::fill(acc.begin(), acc.end(), T(0));
            for (int64_t j = 0; j < S; ++j) {
              const T w = std::exp(part_lse[part(j)] - lse);  // 0 for a split that saw none
              const T* o_j = &part_o[part(j) * d];
              for (int64_t k = 0; k < d; ++k) acc[k] += w * o_j[k];
            }
            for (int64_t k = 0; k < d; ++k)
              o_row[k] = round_to(p.dtype, static_cast<double>(acc[k]));
            out.LSE[q.head * s.Nq + q.row] = static_cast<double>(lse);
          }
        }
    }
  }
  cnt += total;
}

void split_kv_forward(const Problem& p, const Inputs& in, const CpuOptions& o, Forward& out,
                      Counters& cnt) {
  check_problem(p, o, "split_kv_forward");
  if (!o.dry_run) {
    check_inputs(p, in, "split_kv_forward");
    if (p.shape.paged()) check_block_table(p.shape, in.block_table, "split_kv_forward");
  }
  with_compute_type(p.dtype, [&](auto zero) { split_kv<decltype(zero)>(p, in, o, out, cnt); });
}

// The device workspace: each split's partial O and LSE in fp32, for every query row of every
// head; none with one split, which writes O and LSE itself.
int64_t workspace(const Problem& p, const CpuOptions& o) {
  const plan::SplitSchedule sc = plan::split_schedule(p, o.Br, o.Bc, o.splits);
  const Shape& s = p.shape;
  return sc.splits > 1 ? sc.splits * s.B * s.H * s.Nq * (s.d + 1) * 4 : 0;
}

int64_t splits(const Problem& p, const CpuOptions& o) {
  return plan::split_schedule(p, o.Br, o.Bc, o.splits).splits;
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "split-kv",
    .pass = Pass::fwd,
    .idea = "decoding: the keys split across workers, each split's partial O and LSE merged by "
            "the log-sum-exp rule; a K/V head's query heads share one tile; a paged K/V cache",
    .deterministic = true,
    .workspace = "S*B*H*Nq*(d+1)*4 (each split's partial O and LSE, fp32; S = the splits, none "
                 "when S = 1)",
    .workspace_bytes = cpu::workspace,
    .cpu_forward = cpu::split_kv_forward,
    .cpu_backward = nullptr,
    .cpu_scratch_bytes = cpu::scratch_bytes,
    .axes = kGroupedHeads | kWindow | kPaged,
    .kv_splits = cpu::splits,
});
