/* The tensor-parallel collective of the CUDA kernel set: an all-gather over
 * NCCL on the kernel's stream (docs/cuda.md, "Tensor parallelism with
 * NCCL"). Built only when CMake found NCCL (pw_config.h: PW_HAVE_NCCL). */
#ifndef PW_OPS_CUDA_CUDA_NCCL_H
#define PW_OPS_CUDA_CUDA_NCCL_H

#include "piecewise.h"
#include "pw_config.h"

#include <cuda_runtime.h>
#include <stddef.h>

#if PW_HAVE_NCCL
/* Every rank's `count` floats at `send`, gathered in rank order into
 * recv [ranks][count] on `stream` (ncclAllGather: inside a stream capture
 * it becomes a graph node, so FULL and PIECEWISE graphs hold it). The
 * process's NCCL communicator is created on the first call, which must not
 * be under capture: rank 0's ncclUniqueId goes to the others over MPI
 * (pw_comm_bcast), then ncclCommInitRank on the current device. */
pw_status pw_cuda_nccl_allgather(const float *send, float *recv, size_t count,
                                 cudaStream_t stream);
#endif

#endif
