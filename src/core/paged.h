// A paged K/V cache, the layout serving engines keep while they generate text: K and V live in a
// pool of fixed-size pages, and a block table says which page of the pool holds each sequence's
// i-th page, so a sequence grows a page at a time wherever the pool has one free.
//
//   pool K [num_pages, Hkv, page_size, d]      block_table [B, pages_per_seq]   (int32)
//
//   sequence b, key j, K/V head h  ->  page block_table[b][j / page_size], head h, slot j % page_size
//
//        block_table[0] = [5, 2, 7]       pool:  page 0 | page 1 | page 2 | ... | page 7
//        sequence 0's keys 0..P-1 are in page 5, keys P..2P-1 in page 2, the rest in page 7,
//        whose slots past Nk hold no key
//
// A page holds each K/V head's page_size keys as one run of page_size * d values, as the
// contiguous layout [B, Hkv, Nk, d] holds them (a page is a slice of its key axis), so a worker
// that reads one head streams whole runs. The other order, [num_pages, page_size, Hkv, d], puts a
// key's heads side by side and leaves one head's keys in pieces of d values, Hkv d apart: on the
// H200 split-kv read that pool 1.15-1.99x slower than a contiguous cache (docs/perf.md).
//
// The generator (core/rng.h) draws K and V in the contiguous layout [B, Hkv, Nk, d], exactly the
// numbers a contiguous problem of the same seed gets, and lays them out in pages shuffled by the
// seed (every page away from its place in order; the same table on every machine); the slots past
// each sequence's last key hold NaN, so a kernel that reads one shows it. The fp64 reference
// gathers K and V back to the contiguous layout and computes there; gradients of K and V are laid
// out in the pool again, 0 in those slots.
#pragma once

#include <cstdint>
#include <vector>

#include "core/problem.h"

namespace flashlab {

// The block table's stream of a seed (Q, K, V, dO are 1..4).
inline constexpr uint64_t kBlockTableStream = 5;

// Where the d values of key j of K/V head kvh of sequence b start in the pool.
inline int64_t paged_row(const Shape& s, const std::vector<int32_t>& table, int64_t b, int64_t kvh,
                         int64_t j) {
  const int64_t page = table[static_cast<size_t>(b * s.pages_per_seq() + j / s.page_size)];
  return ((page * s.kv_heads() + kvh) * s.page_size + j % s.page_size) * s.d;
}

// The other way: pool row `row` (an element's index / d) is slot `slot` of K/V head `kvh` of
// page `page`.
struct PoolRow {
  int64_t page, kvh, slot;
};
inline PoolRow pool_row(const Shape& s, int64_t row) {
  return {row / (s.kv_heads() * s.page_size), row / s.page_size % s.kv_heads(),
          row % s.page_size};
}

// A block table whose pages are a random cycle of the pool (Sattolo's shuffle: no page stays in
// its place when the pool has two or more), drawn from the seed's own stream.
std::vector<int32_t> shuffled_block_table(const Shape& s, uint64_t seed);

// The table has B * pages_per_seq entries, each a page of the pool, no page given twice: else
// std::invalid_argument naming `who`.
void check_block_table(const Shape& s, const std::vector<int32_t>& table, const char* who);

// Contiguous [B, Hkv, Nk, d] -> the pool, the slots that hold no key set to `unused`; and back.
// An empty tensor stays empty (a dry run has none).
HostTensor to_pages(const Shape& s, const HostTensor& contiguous, const std::vector<int32_t>& table,
                    double unused);
HostTensor from_pages(const Shape& s, const HostTensor& pool, const std::vector<int32_t>& table);

// The same problem with contiguous K and V (page_size 0).
Problem contiguous_problem(const Problem& p);
// The inputs of contiguous_problem(p): K and V gathered from the pool, no block table.
Inputs contiguous_inputs(const Problem& p, const Inputs& in);

// The key a slot of the pool holds: false when no key (a slot past its sequence's last key, or a
// page no sequence uses); else its sequence b and its place j.
bool key_of_slot(const Shape& s, const std::vector<int32_t>& table, int64_t page, int64_t slot,
                 int64_t& b, int64_t& j);

}  // namespace flashlab
