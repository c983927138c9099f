// `run --dump DIR`: what the run saw and produced, as .npy files a student can load in NumPy or
// PyTorch, with an index.json that says what each file is.
//
//   DIR/Q.npy K.npy V.npy dO.npy           inputs, [B,H,N,d], in the storage dtype (bf16 as <f4)
//   DIR/reference.{O,LSE,dQ,dK,dV}.npy     the fp64 reference (<f8)
//   DIR/<version>.{O,LSE}.npy              versions with a forward  (LSE [B,H,Nq], <f4; fp64: <f8)
//   DIR/<version>.{dQ,dK,dV}.npy           versions with a backward
//   DIR/index.json                         file -> tensor, version, shape, descr
#pragma once

#include <string>

#include "run/config.h"
#include "run/runner.h"

namespace flashlab {

// Before the run: DIR must be writable (or creatable) and its disk must hold the dump.
void check_dump_target(const RunConfig& c);

// After the run: creates DIR and writes every file atomically.
void write_dump(const RunConfig& c, const RunOutcome& r);

}  // namespace flashlab
