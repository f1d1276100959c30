// NCCL, emulated on the CPU for the MESHTRAIN_CUDA_ON_CPU build (docs/gpu.md): the API that
// parallel/nccl_comm.cu uses, with NCCL's published names, values and signatures, implemented over
// MPI with one process per rank, as on a cluster. How it behaves (nccl.cpp):
//   - ncclGetUniqueId makes an id holding a random nonce and the MPI_COMM_WORLD rank of its maker;
//     ncclCommInitRank meets the maker (which must be a member) on reserved MPI_COMM_WORLD tags,
//     which answers with the member list, and builds the communicator with MPI_Comm_create_group
//     (collective over the members only). Two members on one device of one host are refused with
//     ncclInvalidUsage, as NCCL refuses them. A one-rank communicator needs no MPI.
//   - Every operation is work queued on its stream with Release::now (peers wait for it); its MPI
//     calls run on the stream's worker thread (so MPI must provide MPI_THREAD_MULTIPLE), through
//     host bounce buffers, in the order the operations were issued on the communicator, whatever
//     the stream.
//   - Collectives: all-reduce, all-gather, reduce-scatter, broadcast, with NCCL's in-place forms;
//     reductions are applied in rank order in the element type (bf16 and f16 through f32, rounded
//     back after each step).
//   - ncclGroupStart/End collects the calls of the calling thread; at the outermost End each
//     communicator's calls are issued as one work: its collectives in order, then all its sends
//     posted, then its receives, then all waited for, so exchanges cannot deadlock. Messages
//     between two ranks match in call order (NCCL has no tags); a receive whose byte count differs
//     from its matching send's is a device fault naming both.
//   - ncclCommAbort never waits: queued and in-flight operations of the communicator stop.
#pragma once
#include <cstddef>

#include "kernels/cuda_on_cpu/runtime_api.h"

#define NCCL_UNIQUE_ID_BYTES 128

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

struct ncclComm;
typedef struct ncclComm* ncclComm_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclNumTypes = 10
} ncclDataType_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5
} ncclRedOp_t;

const char* ncclGetErrorString(ncclResult_t result);
// The last refusal's reason on this thread (NCCL's is per communicator; the emulation also prints
// it to stderr when it refuses).
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetVersion(int* version);

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
