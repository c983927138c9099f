// The hopper rung's ablation, in words: the rung, then one variant per idea switched off. The CUDA
// side (cuda.cu) builds one kernel per line, in this order; `flashlab lab hopper` times them.
#pragma once

namespace flashlab::FLASHLAB_FOLDER {

struct AblationLine {
  const char* id;    // "hopper", "no-tma", ...
  const char* idea;  // the idea of the rung that is off ("" for the rung itself)
  const char* what;  // what the variant does instead
};

inline constexpr AblationLine kAblation[] = {
    {"hopper", "", "the rung: every idea on"},
    {"no-tma", "1",
     "tiles copied by the producer warpgroup with cp.async instead of the bulk tensor copy "
     "engine"},
    {"sync-wgmma", "2", "every wgmma group waited for as soon as it is issued"},
    {"no-warp-spec", "3",
     "no producer warpgroup and no setmaxnreg: a consumer thread issues the copies as stages are "
     "released"},
    {"no-pingpong", "4", "the consumer warpgroups issue their products whenever they are ready"},
    {"no-intra-overlap", "5", "S, softmax and P V of a block in turn, inside each warpgroup"},
    {"no-tma-epilogue", "6a",
     "O stored from registers instead of through shared memory by a bulk tensor store"},
    {"no-heavy-first", "6b",
     "causal Q blocks started in index order instead of the heaviest first"},
    {"no-persistent", "6c",
     "one block per tile instead of one block per SM walking many tiles (causal: the next tile "
     "from a counter)"},
};

}  // namespace flashlab::FLASHLAB_FOLDER
