// The NCCL communicator of a tensor-parallel job and its all-gather
// (cuda_nccl.h). Compiled only with NCCL; it has not run on a GPU here
// (docs/cuda.md says what is built and what is not).
extern "C" {
#include "internal.h"
#include "ops/comm.h"
}
#include "ops/cuda/cuda_nccl.h"

#if PW_HAVE_NCCL
#include <nccl.h>

static ncclComm_t nccl_comm;
static bool nccl_ready;

static pw_status nccl_fail(const char *what, ncclResult_t r) {
    return pw_error(PW_ERR_CUDA, "NCCL %s failed: %s", what, ncclGetErrorString(r));
}

static pw_status nccl_init(void) {
    if (nccl_ready) return PW_OK;
    ncclUniqueId id;
    if (pw_comm_rank() == 0) {
        ncclResult_t r = ncclGetUniqueId(&id);
        if (r != ncclSuccess) return nccl_fail("ncclGetUniqueId", r);
    }
    PW_TRY(pw_comm_bcast(&id, sizeof id));
    ncclResult_t r = ncclCommInitRank(&nccl_comm, pw_comm_size(), id, pw_comm_rank());
    if (r != ncclSuccess) return nccl_fail("ncclCommInitRank", r);
    nccl_ready = true;
    return PW_OK;
}

pw_status pw_cuda_nccl_allgather(const float *send, float *recv, size_t count,
                                 cudaStream_t stream) {
    PW_TRY(nccl_init());
    ncclResult_t r = ncclAllGather(send, recv, count, ncclFloat, nccl_comm, stream);
    return r == ncclSuccess ? PW_OK : nccl_fail("ncclAllGather", r);
}
#endif
