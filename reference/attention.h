// The ground truth every version is measured against, in fp64, and the "straightforward"
// computation in the storage dtype that sets each version's error budget.
#pragma once

#include <cstdint>

#include "core/problem.h"

namespace flashlab::reference {

// Standard attention, fp64, on the (already rounded) inputs: O, LSE and, when keep_P, P.
// Rows that see no key: O = 0, LSE = -inf, P row = 0.
Forward forward(const Problem& p, const Inputs& in, bool keep_P);

// The textbook backward from stored P (fwd.P must be filled): dV = P^T dO, dP = dO V^T,
// dS = P * (dP - rowsum(P * dP)), dQ = scale dS K, dK = scale dS^T Q.
Gradients backward(const Problem& p, const Inputs& in, const Forward& fwd);

// The same backward with D left out of dS (dS = P * dP): dQ = scale (P * dP) K and
// dK = scale (P * dP)^T Q are the size of the two halves that cancel in dS = P * dP - P * D. Where
// every query row sees at most one key (P = 1, so D = dP), the exact dQ and dK are zero, and an error is
// measured against these instead (run/budget.h). dV is the reference's own.
Gradients cancelled_terms(const Problem& p, const Inputs& in, const Forward& fwd);

// What a plain implementation in the storage dtype gets: matmuls accumulate in fp32, and every
// matrix a kernel stores in the dtype (P and dS before their products; O, dQ, dK, dV) is rounded
// to it. fp32: everything in float. fp64: same as forward/backward above. Used for error budgets.
// fp8 (forward only): the plain FP8 forward -- Q, K, V rounded to e4m3 with one scale per tensor
// (its largest magnitude on 448), S in fp32, a softmax in fp32, P = exp(S - m) times 2^8 rounded
// to e4m3 and divided by 2^8 l, P V in fp32, O rounded to bf16 (FA3's "baseline FP8").
// keep_P: also return P (what lowp_backward reads); a forward-only run's budget needs none.
Forward lowp_forward(const Problem& p, const Inputs& in, bool keep_P = true);
Gradients lowp_backward(const Problem& p, const Inputs& in, const Forward& lowp_fwd);

// Host bytes forward() / lowp_forward() and backward() / lowp_backward() hold at their peak, their
// outputs included (backward: not the forward's P it reads), for the memory check before a run.
// `acc_bytes` is the size of the arithmetic's elements: 8 for the fp64 reference, and for the lowp
// computation of fp64 problems; 4 for the lowp computation of every other dtype.
int64_t forward_peak_bytes(const Problem& p, int acc_bytes, bool keep_P);
int64_t backward_peak_bytes(const Problem& p, int acc_bytes);

// Central finite difference of the loss L = sum(O * dO) with respect to one element of Q, K or V
// (which = 'Q', 'K' or 'V'; index is the flat offset into that tensor), in fp64.
double finite_difference(const Problem& p, const Inputs& in, char which, int64_t index, double eps);

// rowsum(O * dO) and rowsum(P * dP) for every query row (the identity D of the chapter, 16.1).
HostTensor rowsum_o_do(const Problem& p, const Inputs& in, const Forward& fwd);
HostTensor rowsum_p_dp(const Problem& p, const Inputs& in, const Forward& fwd);

}  // namespace flashlab::reference
