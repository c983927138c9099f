// `run --dump DIR`: what the run saw and produced, as .npy files a student can load in NumPy or
// PyTorch, with an index.json that says what each file is.
//
//   DIR/Q.npy K.npy V.npy dO.npy           inputs, [B,H,N,d], in the storage dtype (bf16 as <f4)
//   DIR/reference.{O,LSE,dQ,dK,dV}.npy     the fp64 reference (<f8); O and LSE only when no
//                                          version has a backward (run/config.h)
//   DIR/<version>.{O,LSE}.npy              versions with a forward  (LSE [B,H,Nq], <f4; fp64: <f8)
//   DIR/<version>.{dQ,dK,dV}.npy           versions with a backward
//   DIR/cu_seqlens_{q,k}.npy               a packed batch's offsets (int32 [B + 1]); its tensors
//                                          are [tokens, heads, d], LSE [H, tokens]
//   DIR/block_table.npy cache_seqlens.npy  a paged cache's block table (int32 [B, pages per
//                                          sequence]) and keys per sequence (int32 [B]); K, V,
//                                          dK, dV are then its pool [pages, Hkv, page_size, d]
//   DIR/index.json                         file -> tensor, version, shape, descr
//
// DIR holds exactly these files: it is written whole into a temporary directory beside it and
// renamed into place, replacing an earlier dump that was there (any other non-empty directory is
// refused).
#pragma once

#include <string>

#include "run/config.h"
#include "run/runner.h"
#include "util/files.h"

namespace flashlab {

inline constexpr const char* kDumpSchema = "flashlab.dump/v1";

// Before the run: the dump's directory (new, empty, or an earlier dump) and the disk it needs.
// Throws UsageError.
OutputTarget check_dump_target(const RunConfig& c);

// True when `dir` holds an earlier dump and nothing else: its index.json and the files it lists.
bool is_earlier_dump(const std::filesystem::path& dir);

// After the run: writes every file into the staged directory; `files.commit()` puts it in place.
void stage_dump(const RunConfig& c, const RunOutcome& r, const OutputTarget& t, OutputSet& files);

}  // namespace flashlab
