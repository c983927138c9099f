// `run --check sample`: the outputs compared with the fp64 reference on a few (batch, K/V head)
// slices instead of the whole problem, so that a shape whose full reference would not fit the
// host's memory or time (a batch of long decoding caches, a million-key cache) is still measured
// and still checked. Decoding attention is independent per (batch, K/V head): a slice is the
// dense problem of one K/V head and the H / Hkv query heads of its group, with every key of that
// head (gathered from its pages for a paged cache), so its reference is exactly the full
// reference's rows for those heads.
//
// The slices are stacked as one dense problem of B = (slices) sequences, H / Hkv query heads over
// one K/V head each: its fp64 reference, its error budget (run/budget.h) and its comparison are
// the whole run's, on fewer rows. Forward outputs only (O, LSE): a backward's dK and dV gather
// every query head of a group, which slices could hold, but the whole batch's dQ could not be
// checked by them; `--check sample` is refused for versions with a backward.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"

namespace flashlab {

struct CheckSlice {
  int64_t b = 0, kv_head = 0;
};

// The first and the last (batch, K/V head) and one in the middle, each once.
std::vector<CheckSlice> sample_slices(const Shape& s);

// The stacked problem of the slices: B = slices, H = H / Hkv over Hkv = 1, contiguous K and V;
// the rest (Nq, Nk, d, masks, scale, dtype) as p.
Problem sliced_problem(const Problem& p, const std::vector<CheckSlice>& slices);

// Its inputs, gathered from the full problem's (Q, dO rows of the group's heads; K, V of the
// slice's head, page by page for a paged cache).
Inputs sliced_inputs(const Problem& p, const Inputs& in, const std::vector<CheckSlice>& slices);

// The slices' rows of a full forward's O and LSE, in the stacked problem's layout.
Forward sliced_forward(const Problem& p, const Forward& f, const std::vector<CheckSlice>& slices);

// "(b 0, K/V head 0), (b 3, K/V head 4)".
std::string slices_text(const std::vector<CheckSlice>& slices);

}  // namespace flashlab
