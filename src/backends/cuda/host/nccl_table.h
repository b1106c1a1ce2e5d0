#pragma once
// The NCCL calls tensor parallelism makes, through a table filled from libnccl.so.2 (dlopen) or replaced by a fake in
// tests (ScopedNcclTable).
#include <string>

#include "backends/cuda/host/driver_types.h"
#include "backends/cuda/host/nccl_types.h"

namespace fs::cuda {

// X(member, "exported symbol", return type, parameter list)
#define FS_CUDA_NCCL_CALLS(X)                                                                                    \
  X(get_version, "ncclGetVersion", ncclResult_t, (int* version))                                                 \
  X(get_unique_id, "ncclGetUniqueId", ncclResult_t, (ncclUniqueId * id))                                         \
  X(comm_init_rank, "ncclCommInitRank", ncclResult_t, (ncclComm_t * comm, int ranks, ncclUniqueId id, int rank)) \
  X(comm_init_all, "ncclCommInitAll", ncclResult_t, (ncclComm_t * comms, int devices, const int* device_list))   \
  X(comm_destroy, "ncclCommDestroy", ncclResult_t, (ncclComm_t comm))                                            \
  X(comm_abort, "ncclCommAbort", ncclResult_t, (ncclComm_t comm))                                                \
  X(comm_get_async_error, "ncclCommGetAsyncError", ncclResult_t, (ncclComm_t comm, ncclResult_t * error))        \
  X(get_error_string, "ncclGetErrorString", const char*, (ncclResult_t result))                                  \
  X(group_start, "ncclGroupStart", ncclResult_t, ())                                                             \
  X(group_end, "ncclGroupEnd", ncclResult_t, ())                                                                 \
  X(all_reduce, "ncclAllReduce", ncclResult_t,                                                                   \
    (const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,      \
     CUstream stream))                                                                                           \
  X(all_gather, "ncclAllGather", ncclResult_t,                                                                   \
    (const void* send, void* recv, std::size_t send_count, ncclDataType_t type, ncclComm_t comm, CUstream stream))

struct NcclTable {
#define FS_CUDA_DECLARE_MEMBER(member, symbol, ret, params) ret(*member) params = nullptr;
  FS_CUDA_NCCL_CALLS(FS_CUDA_DECLARE_MEMBER)
#undef FS_CUDA_DECLARE_MEMBER
};

namespace nccl_symbol {
#define FS_CUDA_DECLARE_SYMBOL(member, symbol, ret, params) inline constexpr const char* member = symbol;
FS_CUDA_NCCL_CALLS(FS_CUDA_DECLARE_SYMBOL)
#undef FS_CUDA_DECLARE_SYMBOL
}  // namespace nccl_symbol

// Opens `library` and resolves every call; throws fs::Error naming the library or the missing symbol.
NcclTable load_nccl_table(const std::string& library = "libnccl.so.2");

// The current table: the installed one, else libnccl.so.2 loaded once on first use.
const NcclTable& nccl();

// "2.27.7" from ncclGetVersion's code (major·10000 + minor·100 + patch since 2.9).
std::string nccl_version_text(int code);

// "2.28.9", or "not available (<why>)" when libnccl.so.2 cannot be loaded; for foldserve --version.
std::string nccl_description();

// Throws fs::Error "<call> failed[ for <what>]: <NCCL's text> (n)" unless result is ncclSuccess.
void check_nccl(ncclResult_t result, const char* call, const std::string& what = {});

class ScopedNcclTable {
 public:
  explicit ScopedNcclTable(const NcclTable& table);
  ~ScopedNcclTable();
  ScopedNcclTable(const ScopedNcclTable&) = delete;
  ScopedNcclTable& operator=(const ScopedNcclTable&) = delete;

 private:
  const NcclTable* previous_;
};

}  // namespace fs::cuda
