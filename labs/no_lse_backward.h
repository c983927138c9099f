// The no-lse lab's own backward without a stored LSE (the chapter's exercise 3, answered): every Q
// block re-runs the online softmax over the K blocks it sees to rebuild LSE, then atomic-dq's
// backward runs on it. Same signature as a version's CPU backward; the lab counts it in a dry run.
// A student's own answer is the starter kernels/exercises/ex3_no_lse (`lab no-lse --versions`).
#pragma once

#include "core/problem.h"

namespace flashlab::lab {

void no_lse_backward(const Problem&, const Inputs&, const Forward&, const CpuOptions&, Gradients&,
                     Counters&);

}  // namespace flashlab::lab
