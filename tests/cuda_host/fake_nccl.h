#pragma once
// A fake NCCL for host tests: N ranks in one process whose buffers are host memory. Each rank calls from its own
// thread; a collective blocks until every rank of the clique has made its matching call (the k-th collective of each
// rank), then runs on the host and returns. Calls are recorded per rank in order, and a rank can be made to fail its
// next collective: it returns the error and its peers' matching calls return ncclRemoteError, or to hang in it until its
// communicator is aborted. A collective waiting when its communicator is aborted returns ncclSuccess, as an aborted
// NCCL kernel ends without an error. Cliques are made whole by ncclCommInitAll, or rank by rank with ncclCommInitRank
// on an id from ncclGetUniqueId.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cuda/host/nccl_table.h"

namespace fs::cuda::test {

class FakeNccl {
 public:
  // Installs the fake as the current NCCL table until destroyed; only one may exist at a time.
  FakeNccl();
  ~FakeNccl();
  FakeNccl(const FakeNccl&) = delete;
  FakeNccl& operator=(const FakeNccl&) = delete;

  // How long a collective waits for its peers before reporting the hang as ncclInternalError (10 s unless set).
  void set_peer_wait(std::chrono::milliseconds wait);
  // Rank `rank`'s next collective returns `result` (of any clique).
  void fail_next_collective(int rank, ncclResult_t result = ncclUnhandledCudaError);
  // Rank `rank`'s next collective never meets its peers: it waits until its communicator is aborted (or the peer
  // wait passes, then ncclInternalError).
  void hang_next_collective(int rank);
  // Rank `rank`'s live communicators record `result` as their asynchronous error (ncclCommGetAsyncError).
  void set_async_error(int rank, ncclResult_t result);
  // Symbols called by rank `rank`'s communicators, in order, with the element count of collectives ("ncclAllGather 6").
  std::vector<std::string> calls(int rank) const;
  std::size_t live_comms() const;
  const NcclTable& table() const { return table_; }

  // Entry points (called through the table).
  struct Clique;
  struct Comm {
    Clique* clique;
    int rank;
    std::size_t next_round = 0;
    ncclResult_t async_error = ncclSuccess;
    bool closed = false;  // destroyed or aborted; kept alive for calls still waiting on it
  };
  ncclResult_t unique_id(ncclUniqueId* id);
  ncclResult_t init_rank(ncclComm_t* comm, int ranks, const ncclUniqueId& id, int rank);
  ncclResult_t init_all(ncclComm_t* comms, int devices);
  ncclResult_t destroy(ncclComm_t comm, const char* symbol);
  ncclResult_t async_error(ncclComm_t comm, ncclResult_t* error);
  ncclResult_t collective(const char* symbol, ncclComm_t comm, const void* send, void* recv, std::size_t count,
                          ncclDataType_t type);

 private:
  Comm* find(ncclComm_t comm);
  void record(int rank, std::string call);

  NcclTable table_;
  std::unique_ptr<ScopedNcclTable> installed_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<std::unique_ptr<Clique>> cliques_;
  std::map<std::string, Clique*> cliques_by_id_;
  std::map<ncclComm_t, std::unique_ptr<Comm>> comms_;
  std::vector<std::unique_ptr<Comm>> closed_comms_;
  std::map<int, bool> hangs_;
  std::map<int, std::vector<std::string>> calls_;
  std::map<int, ncclResult_t> failures_;
  std::chrono::milliseconds peer_wait_{10000};
};

}  // namespace fs::cuda::test
