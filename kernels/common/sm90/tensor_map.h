// Tensor maps for the bulk tensor copy engine, made on the host (see sm90/tma.cuh for their use).
//
// Every tensor of the lab is [B*H, N, d] of 16-bit elements, and every Hopper tile is a box of
// `box_rows` rows by 64 columns (128 bytes, the width of the 128-byte swizzle), so a tile of d
// columns is d / 64 boxes. The map is 3-d (columns, rows, heads) rather than 2-d (columns, all
// rows) so that a box reaching past a head's last row is clipped there (zeros on loads, nothing
// written on stores) instead of running into the next head: ragged tails cost no code.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace flashlab::cuda::sm90 {

enum class Elem16 { f16, bf16 };

// Throws std::runtime_error (with the driver's message) when the driver cannot encode the map.
CUtensorMap tensor_map_3d(const void* base, Elem16 type, int64_t cols, int64_t rows, int64_t heads,
                          int box_rows);

// The same boxes over a packed batch's token-major tensor [rows, heads, cols] (common/packed.h):
// dimensions (columns, rows, heads) still, with a row stride of heads * cols elements and a head
// stride of cols. A template: the forward replaces its base and row extent per sequence on the
// device (06_hopper/seq_maps.cuh), so that boxes are clipped at each sequence's end.
CUtensorMap tensor_map_packed(const void* base, Elem16 type, int64_t cols, int64_t rows,
                              int64_t heads, int box_rows);

// A [heads, rows, cols] tensor of bytes (FP8 codes) in boxes of box_cols x box_rows, box_cols 64
// or 128: the box's rows are then exactly one span of the 64- or 128-byte swizzle, which the map
// applies. cols (the row stride in bytes) must be a multiple of 16.
CUtensorMap tensor_map_bytes_3d(const void* base, int64_t cols, int64_t rows, int64_t heads,
                                int box_cols, int box_rows);

}  // namespace flashlab::cuda::sm90
