// Communicators of the tensor-parallel ranks and their fixed-order all-reduce.
#include "backends/cuda/host/tensor_parallel_group.h"

#include <string>
#include <utility>

#include "backends/cuda/host/nccl_table.h"
#include "core/error.h"

namespace fs::cuda {

namespace {

std::string device_list(const std::vector<int>& devices) {
  std::string text;
  for (int d : devices) text += (text.empty() ? "" : ",") + std::to_string(d);
  return text;
}

std::string rank_name(int rank, int ranks) { return "rank " + std::to_string(rank) + " of " + std::to_string(ranks); }

}  // namespace

TensorParallelGroup::TensorParallelGroup(std::vector<int> devices, RankSumLaunch rank_sum)
    : devices_(std::move(devices)), rank_sum_(std::move(rank_sum)) {
  if (devices_.empty()) throw Error("a tensor-parallel group needs at least one device");
  std::vector<ncclComm_t> comms(devices_.size(), nullptr);
  check_nccl(nccl().comm_init_all(comms.data(), int(devices_.size()), devices_.data()), nccl_symbol::comm_init_all,
             "devices " + device_list(devices_));
  comms_ = std::move(comms);
}

TensorParallelGroup::~TensorParallelGroup() {
  for (ncclComm_t comm : comms_) {
    if (failed_) nccl().comm_abort(comm);
    else nccl().comm_destroy(comm);
  }
}

void TensorParallelGroup::all_reduce(int rank, float* buffer, float* gathered, std::size_t n, CUstream stream) const {
  if (rank < 0 || rank >= ranks()) throw Error("tensor-parallel rank " + std::to_string(rank) + " out of range");
  check_rank(nccl().all_gather(buffer, gathered, n, ncclFloat32, comms_[std::size_t(rank)], stream),
             nccl_symbol::all_gather, rank);
  rank_sum_(gathered, ranks(), n, buffer, stream);
}

void TensorParallelGroup::all_gather(int rank, const float* send, float* gathered, std::size_t n,
                                     CUstream stream) const {
  if (rank < 0 || rank >= ranks()) throw Error("tensor-parallel rank " + std::to_string(rank) + " out of range");
  check_rank(nccl().all_gather(send, gathered, n, ncclFloat32, comms_[std::size_t(rank)], stream),
             nccl_symbol::all_gather, rank);
}

void TensorParallelGroup::check(int rank) const {
  ncclResult_t error = ncclSuccess;
  check_rank(nccl().comm_get_async_error(comms_[std::size_t(rank)], &error), nccl_symbol::comm_get_async_error, rank);
  check_rank(error, "NCCL communicator", rank);
}

void TensorParallelGroup::check_rank(ncclResult_t result, const char* call, int rank) const {
  if (result != ncclSuccess) failed_ = true;
  check_nccl(result, call, rank_name(rank, ranks()));
}

}  // namespace fs::cuda
