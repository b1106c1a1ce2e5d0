#pragma once
// The NCCL 2.x types and constants the engine uses, declared with nccl.h's layouts so no NCCL header is needed.
#include <cstddef>

namespace fs::cuda {

using ncclComm_t = struct ncclComm*;
using ncclResult_t = int;
using ncclDataType_t = int;
using ncclRedOp_t = int;

inline constexpr std::size_t NCCL_UNIQUE_ID_BYTES = 128;
// The rendezvous token of one communicator clique, passed by value to ncclCommInitRank.
struct ncclUniqueId {
  char internal[NCCL_UNIQUE_ID_BYTES];
};
static_assert(sizeof(ncclUniqueId) == 128, "layout must match nccl.h");

inline constexpr ncclResult_t ncclSuccess = 0;
inline constexpr ncclResult_t ncclUnhandledCudaError = 1;
inline constexpr ncclResult_t ncclSystemError = 2;
inline constexpr ncclResult_t ncclInternalError = 3;
inline constexpr ncclResult_t ncclInvalidArgument = 4;
inline constexpr ncclResult_t ncclInvalidUsage = 5;
inline constexpr ncclResult_t ncclRemoteError = 6;
inline constexpr ncclResult_t ncclInProgress = 7;

inline constexpr ncclDataType_t ncclFloat32 = 7;
inline constexpr ncclRedOp_t ncclSum = 0;

}  // namespace fs::cuda
