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

CUtensorMap tensor_map_3d(const void* base, Elem16 type, int64_t cols, int64_t rows, int64_t heads,
                          int box_rows) {
  CUtensorMap map{};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads)};
  // Strides of dimensions 1 and 2 in bytes (dimension 0 is contiguous).
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(cols * 2),
                                 static_cast<cuuint64_t>(rows * cols * 2)};
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

}  // namespace flashlab::cuda::sm90
