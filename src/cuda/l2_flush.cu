// The L2 flush (l2_flush.h): one read of a buffer of 4x L2, spread over every SM.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/cuda_check.h"
#include "core/device.h"
#include "cuda/l2_flush.h"

namespace flashlab::cuda {

namespace {

// Reads p[0, n) as 16-byte words. The loads feed a value that is stored (into the buffer's first
// word, whose content never matters) only when it equals a constant, so the compiler must keep
// them; in practice the store never happens and the sweep writes nothing.
__global__ void read_sweep(const uint4* p, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}

}  // namespace

int64_t l2_flush_bytes() {
  return 4 * std::max<int64_t>(device_info().l2_bytes, 1 << 20);
}

L2Flush::L2Flush() : bytes_(static_cast<size_t>(l2_flush_bytes())) {
  FLASHLAB_CUDA_CHECK(cudaMalloc(&buffer_, bytes()));
  // Written once, so the sweep reads initialised memory (and what it reads never matters).
  FLASHLAB_CUDA_CHECK(cudaMemset(buffer_, 0x5A, bytes()));
  FLASHLAB_CUDA_CHECK(cudaDeviceSynchronize());
}

L2Flush::~L2Flush() {
  if (buffer_) cudaFree(buffer_);  // never throws from a destructor
}

void L2Flush::sweep(cudaStream_t stream) const {
  const unsigned grid = 8 * static_cast<unsigned>(std::max(device_info().sms, 1));
  read_sweep<<<grid, 256, 0, stream>>>(static_cast<const uint4*>(buffer_), bytes_ / 16,
                                       static_cast<unsigned*>(buffer_));
  FLASHLAB_CHECK_LAUNCH();
}

}  // namespace flashlab::cuda
