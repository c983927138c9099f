// The ring's geometry and schedule, shared by the CPU twin, its tests and the GPU side (cuda.cu),
// so that all of them cut the sequence and walk the steps the same way by construction.
//
// The sequence (N rows: Nq query rows, and the same cut of the Nk keys) is cut into 2R chunks;
// chunk c holds rows [c N / 2R, (c + 1) N / 2R) (floors), so chunks differ by at most one row and
// the longer ones are spread evenly. Each rank holds two chunks:
//
//   zigzag      rank r: chunks r and 2R - 1 - r     (an early chunk and a late one)
//   contiguous  rank r: chunks 2r and 2r + 1        (rows [r N / R, (r + 1) N / R))
//
//   R = 4, 8 chunks:   0   1   2   3   4   5   6   7
//   zigzag           r0  r1  r2  r3  r3  r2  r1  r0
//   contiguous       r0  r0  r1  r1  r2  r2  r3  r3
//
// Under the causal mask a chunk sees itself and the chunks before it, so rank r's zigzag pair
// sees (r + 1) + (2R - r) = 2R + 1 chunk-pairs' worth of keys whatever r is, where contiguous
// rank r sees 4r + 3: rank 0 idles while rank R - 1 works.
//
// Step t = 0 .. R - 1: rank r holds the K/V shard of rank (r - t) mod R, computes its own Q shard
// against it, and (t < R - 1) passes it on to rank r + 1. In the backward the shard's dK, dV
// accumulators travel with it and, after the last step, go home to their owner (rank r + 1).
#pragma once

#include <cstdint>

namespace flashlab::FLASHLAB_FOLDER {

enum class Sharding { zigzag, contiguous };

// Rows [begin, end) of chunk c of 2R over a length n.
struct Chunk {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};
inline Chunk chunk(int64_t n, int ranks, int64_t c) {
  const int64_t parts = 2 * static_cast<int64_t>(ranks);
  return {c * n / parts, (c + 1) * n / parts};
}

// The two chunks of rank r, in the order the rank stores them (its shard's rows, one after the
// other: first chunk, then second).
struct Shard {
  Chunk first, second;
  int64_t size() const { return first.size() + second.size(); }
  // The shard's local row of global row g (g in the shard).
  int64_t local(int64_t g) const {
    return g < first.end && g >= first.begin ? g - first.begin : first.size() + g - second.begin;
  }
};
inline Shard shard(int64_t n, int ranks, int r, Sharding s) {
  const int64_t a = s == Sharding::zigzag ? r : 2 * r;
  const int64_t b = s == Sharding::zigzag ? 2 * ranks - 1 - r : 2 * r + 1;
  return {chunk(n, ranks, a), chunk(n, ranks, b)};
}

// The global index of chunk `which` (0: the first, 1: the second) of rank r's shard.
inline int64_t chunk_index(int ranks, int r, int which, Sharding s) {
  if (s == Sharding::zigzag) return which == 0 ? r : 2 * static_cast<int64_t>(ranks) - 1 - r;
  return 2 * static_cast<int64_t>(r) + which;
}

// The GPU side computes a step as pairs (a chunk of the rank's queries, a chunk of the shard it
// holds), each pair one launch of a single-GPU kernel on the two chunks as a problem of their own.
// With Nq = Nk and no window (what the GPU side takes) query chunk a and key chunk b cut the same
// rows, and under the causal mask (query i sees key j <= i) the pair is one of three blocks:
//
//   full       a > b, or no causal mask: every query row sees every key        (plain attention)
//   diagonal   a = b: the chunk against itself, the square causal mask          (causal attention)
//   skipped    a < b: no query row sees any key                                 (not launched)
enum class PairKind { full, diagonal, skipped };
inline PairKind pair_kind(int64_t q_chunk, int64_t k_chunk, bool causal) {
  if (!causal || q_chunk > k_chunk) return PairKind::full;
  return q_chunk == k_chunk ? PairKind::diagonal : PairKind::skipped;
}

// The rank whose K/V shard rank r holds at step t.
inline int source_of(int r, int t, int ranks) {
  return ((r - t) % ranks + ranks) % ranks;
}

// The closed forms of the bytes each rank sends (elements of one key row: B * Hkv * d; e_kv the
// bytes of a stored K or V element, e_acc of a dK or dV accumulator element; nk_next the keys of
// rank r + 1's shard):
//
//   forward   steps 0 .. R-2 send the shards of ranks r, r-1, ..., r-R+2: every shard but rank
//             r+1's, which is the one rank r receives last
//               fwd(r) = 2 B Hkv d e_kv (Nk - nk_next)
//   backward  the same K, V, and after every step the dK, dV of the shard it holds, the last
//             one (rank r+1's) going home
//               bwd(r) = 2 B Hkv d [e_kv (Nk - nk_next) + e_acc Nk]
//   R = 1: nothing is sent.
inline int64_t fwd_closed_form(int64_t key_row_elems, int64_t Nk, int64_t nk_next, int64_t e_kv,
                               int ranks) {
  return ranks == 1 ? 0 : 2 * key_row_elems * e_kv * (Nk - nk_next);
}
inline int64_t bwd_closed_form(int64_t key_row_elems, int64_t Nk, int64_t nk_next, int64_t e_kv,
                               int64_t e_acc, int ranks) {
  return ranks == 1 ? 0 : 2 * key_row_elems * (e_kv * (Nk - nk_next) + e_acc * Nk);
}

}  // namespace flashlab::FLASHLAB_FOLDER
