// NCCL, opened at run time. The build needs only nccl.h (CMake looks for it beside the CUDA
// toolkit's headers; without it the ring's GPU side says "built without NCCL"); the library is
// found when the ring first runs, so one binary runs wherever a libnccl.so.2 can be found:
//
//   1. FLASHLAB_NCCL_LIB, when set: the file it names, and nothing else
//   2. "libnccl.so.2" by the loader's own search (LD_LIBRARY_PATH, the ld.so cache)
//   3. the CUDA toolkit's lib folders, then the nvidia-nccl Python wheel's lib folder under the
//      usual site-packages and dist-packages folders (system, user, $VIRTUAL_ENV, $CONDA_PREFIX)
//
// NVLink multicast (NVLS) stays off: NCCL_NVLS_ENABLE is set to 0 in this process's environment
// before the first NCCL call, whatever it was. Nothing here creates multicast objects.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#ifdef FLASHLAB_HAVE_NCCL
#include <nccl.h>

namespace flashlab::cuda::FLASHLAB_FOLDER {

// The NCCL functions the ring calls, from the library that was opened.
struct NcclApi {
  std::string path;  // the file opened
  int version = 0;   // ncclGetVersion's code: 22803 for 2.28.3
  ncclResult_t (*GetVersion)(int*);
  const char* (*GetErrorString)(ncclResult_t);
  const char* (*GetLastError)(ncclComm_t);
  ncclResult_t (*CommInitAll)(ncclComm_t*, int, const int*);
  ncclResult_t (*CommFinalize)(ncclComm_t);
  ncclResult_t (*CommDestroy)(ncclComm_t);
  ncclResult_t (*CommAbort)(ncclComm_t);
  ncclResult_t (*GroupStart)();
  ncclResult_t (*GroupEnd)();
  ncclResult_t (*Send)(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*Recv)(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
};

// The library, opened on the first call (thread-safe); null when it cannot be, with the reason in
// one sentence in *why.
const NcclApi* nccl_api(std::string* why);

// nccl_api() or a std::runtime_error with its reason.
const NcclApi& nccl();

inline void nccl_check(ncclResult_t r, const char* what, const char* file, int line) {
  if (r != ncclSuccess && r != ncclInProgress)
    throw std::runtime_error(std::string("NCCL error in ") + what + " (" + file + ":" +
                             std::to_string(line) + "): " + nccl().GetErrorString(r) + "; " +
                             nccl().GetLastError(nullptr));
}

}  // namespace flashlab::cuda::FLASHLAB_FOLDER

// Every NCCL call is checked, as every CUDA call is (FLASHLAB_CUDA_CHECK): a failure throws with
// the call, the file and line, and NCCL's own message.
#define FLASHLAB_NCCL_CHECK(expr) \
  ::flashlab::cuda::FLASHLAB_FOLDER::nccl_check((expr), #expr, __FILE__, __LINE__)

#endif  // FLASHLAB_HAVE_NCCL
