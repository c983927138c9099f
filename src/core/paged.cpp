#include "core/paged.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/rng.h"

namespace flashlab {

std::vector<int32_t> shuffled_block_table(const Shape& s, uint64_t seed) {
  const int64_t n = s.num_pages();
  if (n > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("a block table holds fewer than 2^31 pages");
  std::vector<int32_t> table(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) table[i] = static_cast<int32_t>(i);
  // Sattolo: each position swaps with one strictly before it, which makes one cycle through all
  // the pages, so none keeps its place in order.
  Rng rng(seed, kBlockTableStream);
  for (int64_t i = n - 1; i > 0; --i) std::swap(table[i], table[rng.below(i)]);
  return table;
}

void check_block_table(const Shape& s, const std::vector<int32_t>& table, const char* who) {
  const int64_t n = s.num_pages();
  if (static_cast<int64_t>(table.size()) != n)
    throw std::invalid_argument(std::string(who) + ": the block table has " +
                                std::to_string(table.size()) +
                                " entries, not B * pages_per_seq = " + std::to_string(n));
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (const int32_t page : table) {
    if (page < 0 || page >= n || seen[page])
      throw std::invalid_argument(std::string(who) +
                                  ": the block table names a page outside the pool, or one twice");
    seen[page] = true;
  }
}

namespace {

// Calls fn(contiguous offset, pool offset) for the first element of every key row.
template <class Fn>
void for_each_key_row(const Shape& s, const std::vector<int32_t>& table, Fn&& fn) {
  const int64_t hkv = s.kv_heads();
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t kvh = 0; kvh < hkv; ++kvh)
      for (int64_t j = 0; j < s.Nk; ++j)
        fn(((b * hkv + kvh) * s.Nk + j) * s.d, paged_row(s, table, b, kvh, j));
}

}  // namespace

HostTensor to_pages(const Shape& s, const HostTensor& contiguous, const std::vector<int32_t>& table,
                    double unused) {
  if (contiguous.empty()) return {};
  if (static_cast<int64_t>(contiguous.size()) != s.B * s.kv_heads() * s.Nk * s.d)
    throw std::invalid_argument("to_pages: the tensor is not [B, Hkv, Nk, d]");
  HostTensor pool(static_cast<size_t>(s.kv_elems()), unused);
  for_each_key_row(s, table, [&](int64_t from, int64_t to) {
    std::copy_n(contiguous.begin() + from, s.d, pool.begin() + to);
  });
  return pool;
}

HostTensor from_pages(const Shape& s, const HostTensor& pool, const std::vector<int32_t>& table) {
  if (pool.empty()) return {};
  if (static_cast<int64_t>(pool.size()) != s.kv_elems())
    throw std::invalid_argument("from_pages: the tensor is not the pool of the paged cache");
  HostTensor contiguous(static_cast<size_t>(s.B * s.kv_heads() * s.Nk * s.d));
  for_each_key_row(s, table, [&](int64_t to, int64_t from) {
    std::copy_n(pool.begin() + from, s.d, contiguous.begin() + to);
  });
  return contiguous;
}

Problem contiguous_problem(const Problem& p) {
  Problem c = p;
  c.shape.page_size = 0;
  return c;
}

Inputs contiguous_inputs(const Problem& p, const Inputs& in) {
  Inputs c;
  c.Q = in.Q;
  c.dO = in.dO;
  c.K = from_pages(p.shape, in.K, in.block_table);
  c.V = from_pages(p.shape, in.V, in.block_table);
  return c;
}

bool key_of_slot(const Shape& s, const std::vector<int32_t>& table, int64_t page, int64_t slot,
                 int64_t& b, int64_t& j) {
  const int64_t pages = s.pages_per_seq();
  for (int64_t e = 0; e < static_cast<int64_t>(table.size()); ++e) {
    if (table[e] != page) continue;
    b = e / pages;
    j = (e % pages) * s.page_size + slot;
    return j < s.Nk;
  }
  return false;
}

}  // namespace flashlab
