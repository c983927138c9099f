// template: the starting point of a new version (`flashlab new NAME` copies this folder to
// kernels/NN_NAME/ and sets the id). Say here, in a few lines, the one idea the rung adds and draw
// its schedule, as the other rungs' cpu.cpp do.
//
// A version folder declares itself and nothing else lists it:
//   - FLASHLAB_VERSION({...}) at the end of this file is its registry entry;
//   - the CPU twin below walks the same block schedule as the CUDA kernel, in plain loops over
//     tiles (kernels/common/cpu/tiles.h, cpu/bwd.h have the pieces), and counts FLOPs and traffic;
//   - everything else in the folder stays file-local (the anonymous namespace) or, shared between
//     the folder's files, in namespace flashlab::cpu::FLASHLAB_FOLDER.
// Until the twin is written, `flashlab run --versions NAME` says where it stops (exit 1).
#include "common/cpu/bwd.h"
#include "core/version.h"

namespace flashlab::cpu {

namespace {

// The backward: read Q, K, V, dO from `in` and O, LSE from `fwd` (the tiled forward's), write dQ,
// dK, dV into `g` and count into `cnt`. With o.dry_run, walk the schedule and count only.
void backward(const Problem& p, const Inputs& in, const Forward& fwd, const CpuOptions& o,
              Gradients& g, Counters& cnt) {
  check_problem(p, o, "template backward");
  if (!o.dry_run) check_backward(p, in, fwd, "template backward");
  prepare_gradients(p, o.dry_run, g);
  (void)cnt;
  FLASHLAB_TODO("the CPU twin of this version's backward");
}

// Extra memory in bytes (the device workspace the CUDA side allocates, by the same formula).
int64_t workspace_bytes(const Problem& p, const CpuOptions&) {
  return p.shape.lse_elems() * 4;  // D = rowsum(O * dO), fp32
}

// Host bytes the twin allocates besides its outputs, at the size of its compute type, each
// thread's tiles included: the memory check before a run adds them up (run/host_memory.h).
int64_t scratch_bytes(const Problem& p, const CpuOptions& o) {
  return outer_k_scratch_bytes(p, o);  // say what yours allocates
}

}  // namespace

}  // namespace flashlab::cpu

FLASHLAB_VERSION({
    .id = "template",
    .pass = Pass::bwd,
    .idea = "a new rung: say in one line what it changes from the rung before",
    .deterministic = true,
    .workspace = "B*H*Nq*4 (D)",
    .workspace_bytes = cpu::workspace_bytes,
    .cpu_forward = nullptr,
    .cpu_backward = cpu::backward,
    .cpu_scratch_bytes = cpu::scratch_bytes,
});
