// Fake NCCL: cliques of ranks in one process, collectives matched by their order and run on host memory.
#include "fake_nccl.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace fs::cuda::test {

namespace {

FakeNccl* active_fake = nullptr;

FakeNccl& active() {
  if (!active_fake) throw std::logic_error("fake NCCL called with no FakeNccl alive");
  return *active_fake;
}

NcclTable make_table() {
  NcclTable t;
  t.get_version = [](int* version) {
    *version = 22707;
    return ncclSuccess;
  };
  t.get_unique_id = [](ncclUniqueId* id) { return active().unique_id(id); };
  t.comm_init_rank = [](ncclComm_t* comm, int ranks, ncclUniqueId id, int rank) {
    return active().init_rank(comm, ranks, id, rank);
  };
  t.comm_init_all = [](ncclComm_t* comms, int devices, const int*) { return active().init_all(comms, devices); };
  t.comm_destroy = [](ncclComm_t comm) { return active().destroy(comm, nccl_symbol::comm_destroy); };
  t.comm_abort = [](ncclComm_t comm) { return active().destroy(comm, nccl_symbol::comm_abort); };
  t.comm_get_async_error = [](ncclComm_t comm, ncclResult_t* error) { return active().async_error(comm, error); };
  t.get_error_string = [](ncclResult_t result) -> const char* {
    switch (result) {
      case ncclSuccess: return "no error";
      case ncclUnhandledCudaError: return "unhandled cuda error";
      case ncclInternalError: return "internal error";
      case ncclInvalidUsage: return "invalid usage";
      case ncclRemoteError: return "remote process exited or there was a network error";
      default: return "unknown result code";
    }
  };
  t.group_start = [] { return ncclSuccess; };
  t.group_end = [] { return ncclSuccess; };
  t.all_reduce = [](const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                    ncclComm_t comm, CUstream) {
    if (op != ncclSum) return ncclInvalidArgument;
    return active().collective(nccl_symbol::all_reduce, comm, send, recv, count, type);
  };
  t.all_gather = [](const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclComm_t comm, CUstream) {
    return active().collective(nccl_symbol::all_gather, comm, send, recv, count, type);
  };
  return t;
}

}  // namespace

// One round: the k-th collective of every rank of a clique.
struct Round {
  std::string symbol;
  std::size_t count = 0;
  std::vector<const void*> send;
  std::vector<void*> recv;
  int arrived = 0;
  bool done = false;
  ncclResult_t failure = ncclSuccess;
};

struct FakeNccl::Clique {
  int ranks = 0;
  std::map<std::size_t, Round> rounds;
};

FakeNccl::FakeNccl() : table_(make_table()) {
  if (active_fake) throw std::logic_error("only one FakeNccl may exist at a time");
  active_fake = this;
  installed_ = std::make_unique<ScopedNcclTable>(table_);
}

FakeNccl::~FakeNccl() {
  installed_.reset();
  active_fake = nullptr;
}

void FakeNccl::set_peer_wait(std::chrono::milliseconds wait) {
  std::lock_guard lock(mutex_);
  peer_wait_ = wait;
}

void FakeNccl::fail_next_collective(int rank, ncclResult_t result) {
  std::lock_guard lock(mutex_);
  failures_[rank] = result;
}

void FakeNccl::hang_next_collective(int rank) {
  std::lock_guard lock(mutex_);
  hangs_[rank] = true;
}

void FakeNccl::set_async_error(int rank, ncclResult_t result) {
  std::lock_guard lock(mutex_);
  for (auto& [handle, comm] : comms_)
    if (comm->rank == rank) comm->async_error = result;
}

std::vector<std::string> FakeNccl::calls(int rank) const {
  std::lock_guard lock(mutex_);
  auto it = calls_.find(rank);
  return it == calls_.end() ? std::vector<std::string>{} : it->second;
}

std::size_t FakeNccl::live_comms() const {
  std::lock_guard lock(mutex_);
  return comms_.size();
}

void FakeNccl::record(int rank, std::string call) { calls_[rank].push_back(std::move(call)); }

FakeNccl::Comm* FakeNccl::find(ncclComm_t comm) {
  auto it = comms_.find(comm);
  return it == comms_.end() ? nullptr : it->second.get();
}

ncclResult_t FakeNccl::unique_id(ncclUniqueId* id) {
  std::lock_guard lock(mutex_);
  std::memset(id, 0, sizeof(*id));
  std::snprintf(id->internal, sizeof(id->internal), "fake-nccl-%zu", cliques_by_id_.size());
  auto clique = std::make_unique<Clique>();
  cliques_by_id_[id->internal] = clique.get();
  cliques_.push_back(std::move(clique));
  return ncclSuccess;
}

ncclResult_t FakeNccl::init_rank(ncclComm_t* comm, int ranks, const ncclUniqueId& id, int rank) {
  std::lock_guard lock(mutex_);
  auto found = cliques_by_id_.find(std::string(id.internal, strnlen(id.internal, sizeof(id.internal))));
  if (found == cliques_by_id_.end() || ranks < 1 || rank < 0 || rank >= ranks) return ncclInvalidArgument;
  Clique* clique = found->second;
  if (clique->ranks != 0 && clique->ranks != ranks) return ncclInvalidUsage;
  clique->ranks = ranks;
  auto made = std::make_unique<Comm>(Comm{clique, rank});
  *comm = reinterpret_cast<ncclComm_t>(made.get());
  comms_[*comm] = std::move(made);
  record(rank, nccl_symbol::comm_init_rank);
  return ncclSuccess;
}

ncclResult_t FakeNccl::init_all(ncclComm_t* comms, int devices) {
  std::lock_guard lock(mutex_);
  if (devices < 1) return ncclInvalidArgument;
  cliques_.push_back(std::make_unique<Clique>());
  Clique* clique = cliques_.back().get();
  clique->ranks = devices;
  for (int r = 0; r < devices; ++r) {
    auto comm = std::make_unique<Comm>(Comm{clique, r});
    comms[r] = reinterpret_cast<ncclComm_t>(comm.get());
    comms_[comms[r]] = std::move(comm);
    record(r, nccl_symbol::comm_init_all);
  }
  return ncclSuccess;
}

ncclResult_t FakeNccl::destroy(ncclComm_t comm, const char* symbol) {
  std::lock_guard lock(mutex_);
  Comm* c = find(comm);
  if (!c) return ncclInvalidArgument;
  record(c->rank, symbol);
  auto node = comms_.extract(comm);
  node.mapped()->closed = true;
  closed_comms_.push_back(std::move(node.mapped()));
  arrived_.notify_all();
  return ncclSuccess;
}

ncclResult_t FakeNccl::async_error(ncclComm_t comm, ncclResult_t* error) {
  std::lock_guard lock(mutex_);
  Comm* c = find(comm);
  if (!c) return ncclInvalidArgument;
  *error = c->async_error;
  return ncclSuccess;
}

ncclResult_t FakeNccl::collective(const char* symbol, ncclComm_t comm, const void* send, void* recv, std::size_t count,
                                  ncclDataType_t type) {
  std::unique_lock lock(mutex_);
  Comm* c = find(comm);
  if (!c) return ncclInvalidArgument;
  if (type != ncclFloat32) return ncclInvalidArgument;
  const int rank = c->rank;
  record(rank, std::string(symbol) + " " + std::to_string(count));
  if (hangs_.erase(rank)) {
    if (!arrived_.wait_for(lock, peer_wait_, [&] { return c->closed; })) return ncclInternalError;
    return ncclSuccess;
  }
  Clique& clique = *c->clique;
  Round& round = clique.rounds[c->next_round++];
  if (round.arrived == 0) {
    round.symbol = symbol;
    round.count = count;
    round.send.assign(std::size_t(clique.ranks), nullptr);
    round.recv.assign(std::size_t(clique.ranks), nullptr);
  } else if (round.symbol != symbol || round.count != count) {
    round.failure = ncclInvalidUsage;
    arrived_.notify_all();
  }
  round.send[std::size_t(rank)] = send;
  round.recv[std::size_t(rank)] = recv;
  ++round.arrived;
  if (auto failure = failures_.find(rank); failure != failures_.end()) {
    round.failure = failure->second;
    c->async_error = failure->second;
    failures_.erase(failure);
    arrived_.notify_all();
    return c->async_error;
  }
  if (round.arrived == clique.ranks && round.failure == ncclSuccess) {
    const std::size_t bytes = count * sizeof(float);
    if (round.symbol == nccl_symbol::all_gather) {
      std::vector<unsigned char> all(bytes * std::size_t(clique.ranks));
      for (int r = 0; r < clique.ranks; ++r)
        std::memcpy(all.data() + bytes * std::size_t(r), round.send[std::size_t(r)], bytes);
      for (void* out : round.recv) std::memcpy(out, all.data(), all.size());
    } else {
      std::vector<float> sum(count, 0.0f);
      for (const void* in : round.send)
        for (std::size_t i = 0; i < count; ++i) sum[i] += static_cast<const float*>(in)[i];
      for (void* out : round.recv) std::memcpy(out, sum.data(), bytes);
    }
    round.done = true;
    arrived_.notify_all();
  }
  if (!arrived_.wait_for(lock, peer_wait_, [&] { return round.done || round.failure != ncclSuccess || c->closed; }))
    return ncclInternalError;
  if (round.failure == ncclSuccess) return ncclSuccess;
  c->async_error = round.failure == ncclInvalidUsage ? ncclInvalidUsage : ncclRemoteError;
  return c->async_error;
}

}  // namespace fs::cuda::test
