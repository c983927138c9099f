// A packed batch, one sequence at a time. Within sequence b a packed problem is exactly a dense
// problem of its own (B = 1, Nq = lens_q[b], Nk = lens_k[b], every mask aligned to it), so the
// CPU side computes it that way: each sequence's rows are gathered from the token-major tensors
// into the dense layout, the dense computation runs (the fp64 reference, a version's CPU twin,
// which walks the very block schedule its CUDA kernel walks for that sequence), and the outputs
// are scattered back. Counters add up over the sequences. The CUDA kernels, by contrast, run the
// whole batch in one launch, each block finding its sequence from the offsets.
//
//   packed Q [total_q, H, d]:  token t = q_start(b) + r holds row r of every head of sequence b
//   dense  Q [1, H, len, d]:   the same rows, head-major, as every twin reads them
//
// Sequences of length 0: one with no query rows is not run (its dK, dV are 0); one with no keys
// is not run either (its O and dQ are 0, its LSE -inf: the rows see no key).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/problem.h"
#include "core/version.h"

namespace flashlab {

// One sequence of a packed batch, as a walk over the batch meets it.
struct Sequence {
  int64_t b = 0;           // its index in the batch
  int64_t q0 = 0, k0 = 0;  // its first query token and first key token (cu_seqlens_q[b], _k[b])
  int64_t p0 = 0;          // where its [H, len_q, len_k] starts in a packed forward's P
  Problem problem;         // the sequence as a dense problem of its own: B = 1, its lengths

  int64_t len_q() const { return problem.shape.Nq; }
  int64_t len_k() const { return problem.shape.Nk; }
  // Nothing to compute: no query rows, or no keys for them to see.
  bool empty() const { return len_q() == 0 || len_k() == 0; }
};

// The packed problem's settings as a dense problem of one sequence: everything but the lengths
// (B = 1; Nq and Nk are the longest lengths until a walk sets them).
Problem one_sequence_settings(const Problem& p);

// Calls fn(const Sequence&) for sequences 0 .. B-1, in order. The offsets are running sums and the
// dense problem is the settings copied once, so a walk over B sequences takes B steps; summing each
// sequence's offsets afresh, or copying the B lengths into each sequence's problem, takes B^2.
template <class Fn>
void for_each_sequence(const Problem& p, Fn&& fn) {
  const Shape& s = p.shape;
  Sequence q;
  q.problem = one_sequence_settings(p);
  for (q.b = 0; q.b < s.B; ++q.b) {
    q.problem.shape.Nq = s.lens_q[q.b];
    q.problem.shape.Nk = s.lens_k[q.b];
    fn(static_cast<const Sequence&>(q));
    q.q0 += q.len_q();
    q.k0 += q.len_k();
    q.p0 += s.H * q.len_q() * q.len_k();
  }
}

// Sequence b alone, its offsets summed over the sequences before it: for a single look (a test, one
// finite difference); a walk over the batch uses for_each_sequence.
Sequence sequence_at(const Problem& p, int64_t b);

// FlashAttention's cu_seqlens: B + 1 offsets, offsets[b] the first token of sequence b and
// offsets[B] the total, int32 as FA's API takes them (a packed batch holds fewer than 2^31 tokens:
// run/validate.h).
std::vector<int32_t> cu_seqlens(const std::vector<int64_t>& lens);

// Rows [start, start + len) of a token-major tensor [tokens, heads, d] as a dense [heads, len, d]
// (d = 1 for LSE-like tensors stored [heads, tokens]: use the *_lse pair below).
HostTensor gather_rows(const HostTensor& packed, int64_t start, int64_t len, int64_t heads,
                       int64_t d);
void scatter_rows(const HostTensor& dense, int64_t start, int64_t len, int64_t heads, int64_t d,
                  HostTensor& packed);
// LSE and D: packed [heads, total], dense [heads, len].
HostTensor gather_lse(const HostTensor& packed, int64_t total, int64_t start, int64_t len,
                      int64_t heads);
void scatter_lse(const HostTensor& dense, int64_t total, int64_t start, int64_t len, int64_t heads,
                 HostTensor& packed);

// Elements of P of a packed forward (naive, the reference): each sequence's [H, len_q, len_k], one
// after another (Sequence::p0 is where one starts).
int64_t packed_p_elems(const Shape& s);

// The inputs of one sequence, gathered (a tensor the packed inputs lack stays empty: a dry run has
// none).
Inputs sequence_inputs(const Problem& p, const Inputs& in, const Sequence& q);

using ForwardFn = std::function<void(const Problem&, const Inputs&, Forward&)>;
using BackwardFn = std::function<void(const Problem&, const Inputs&, const Forward&, Gradients&)>;

// Runs fn on every sequence and writes the packed O, LSE and (when fn keeps one) P into out.
void forward_by_sequence(const Problem& p, const Inputs& in, Forward& out, const ForwardFn& fn);
// Runs fn on every sequence, with that sequence's O, LSE (and P), and writes the packed dQ, dK,
// dV into out.
void backward_by_sequence(const Problem& p, const Inputs& in, const Forward& fwd, Gradients& out,
                          const BackwardFn& fn);

// A version's CPU twin on any problem: a dense one as it is, a packed batch sequence by sequence
// (its counters summed over the sequences). Every caller of a twin goes through these two.
void cpu_forward(const VersionEntry& v, const Problem& p, const Inputs& in, const CpuOptions& o,
                 Forward& out, Counters& c);
void cpu_backward(const VersionEntry& v, const Problem& p, const Inputs& in, const Forward& fwd,
                  const CpuOptions& o, Gradients& out, Counters& c);

// A version's workspace by its formula; a packed batch's is its sequences' summed (the layout a
// one-launch kernel gives per-token buffers), never the padded batch's.
int64_t workspace_bytes(const VersionEntry& v, const Problem& p, const CpuOptions& o);

}  // namespace flashlab
