// NumPy .npy files (format version 1.0, little endian), so a student can load what a run saw and
// produced: np.load("dump/naive.dQ.npy").
//
// Element types: fp64 as <f8, fp32 as <f4, fp16 as <f2; bf16 has no NumPy dtype, so its values
// (exactly representable in fp32) are written as <f4.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/problem.h"

namespace flashlab {

// The NumPy type string a tensor of this storage dtype is written as ("<f8", "<f4", "<f2").
std::string npy_descr(DType t);

// The whole file as bytes: header + values converted to `t`'s element type.
std::string npy_bytes(const HostTensor& values, const std::vector<int64_t>& shape, DType t);

// An int32 array (<i4), 1-D unless a shape is given: the cumulative offsets of a packed batch, as
// FA's cu_seqlens; a paged cache's block table [B, pages_per_seq].
std::string npy_int32_bytes(const std::vector<int32_t>& values, std::vector<int64_t> shape = {});

// File size of such an array, header included.
int64_t npy_file_bytes(int64_t elems, const std::vector<int64_t>& shape, DType t);

// What read_npy found: shape, descr and the values widened to double. For tests and tools.
struct NpyArray {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  std::vector<double> values;
};
// Throws std::runtime_error when the bytes are not a v1.0 little-endian <f8/<f4/<f2/<i4 array.
NpyArray parse_npy(const std::string& bytes);

}  // namespace flashlab
