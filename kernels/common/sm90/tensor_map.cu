// The driver's tensor-map encoder, reached through the runtime's entry-point query so that the
// CUDA runtime can stay statically linked (no link against libcuda).
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "common/sm90/tensor_map.h"
#include "core/cuda_check.h"

namespace flashlab::cuda::sm90 {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status{};
    FLASHLAB_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                         cudaEnableDefault, &status));
    if (status != cudaDriverEntryPointSuccess || !p)
      throw std::runtime_error("the CUDA driver has no cuTensorMapEncodeTiled (driver too old?)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

namespace {

// (cols, rows, heads) with the given byte strides of rows and heads.
CUtensorMap encode_3d(const void* base, Elem16 type, int64_t cols, int64_t rows, int64_t heads,
                      int64_t row_bytes, int64_t head_bytes, int box_rows) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads)};
  // Strides of dimensions 1 and 2 in bytes (dimension 0 is contiguous).
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(row_bytes),
                                 static_cast<cuuint64_t>(head_bytes)};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encoder()(
      &map,
      type == Elem16::f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3,
      const_cast<void*>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) +
                             ") for a [" + std::to_string(heads) + ", " + std::to_string(rows) +
                             ", " + std::to_string(cols) + "] tensor, box " +
                             std::to_string(box_rows) + " x 64");
  return map;
}

}  // namespace

CUtensorMap tensor_map_3d(const void* base, Elem16 type, int64_t cols, int64_t rows, int64_t heads,
                          int box_rows) {
  return encode_3d(base, type, cols, rows, heads, cols * 2, rows * cols * 2, box_rows);
}

CUtensorMap tensor_map_packed(const void* base, Elem16 type, int64_t cols, int64_t rows,
                              int64_t heads, int box_rows) {
  return encode_3d(base, type, cols, rows, heads, heads * cols * 2, cols * 2, box_rows);
}

CUtensorMap tensor_map_bytes_3d(const void* base, int64_t cols, int64_t rows, int64_t heads,
                                int box_cols, int box_rows) {
  if ((box_cols != 64 && box_cols != 128) || cols % 16 != 0)
    throw std::runtime_error("a byte tensor map needs boxes 64 or 128 bytes wide and rows of a "
                             "multiple of 16 bytes (got box " + std::to_string(box_cols) +
                             ", rows of " + std::to_string(cols) + ")");
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(cols),
                                 static_cast<cuuint64_t>(rows * cols)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows),
                             1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encoder()(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, const_cast<void*>(base), dims, strides, box,
      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      box_cols == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw std::runtime_error("cuTensorMapEncodeTiled failed (CUresult " + std::to_string(r) +
                             ") for a [" + std::to_string(heads) + ", " + std::to_string(rows) +
                             ", " + std::to_string(cols) + "] byte tensor, box " +
                             std::to_string(box_rows) + " x " + std::to_string(box_cols));
  return map;
}

}  // namespace flashlab::cuda::sm90
