// src/model/data_parallel.h - (internal) what Model::train does when it runs on several ranks
// (docs/distributed.md): rank 0's state copied to every rank, gradients averaged in buckets whose
// all-reduce overlaps the rest of backward, and a check that the ranks still agree.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "aether/dist/communicator.h"
#include "aether/graph/tensor.h"
#include "aether/model/model.h"
#include "aether/nn/layers.h"
#include "aether/nn/module.h"

namespace aether::model_internal {

// NCCL reduces GPU memory: a model elsewhere (`device`) gets an error naming both, not NCCL's own.
// `comm` may be nullptr (one process: nothing to check).
void check_communicator_device(const dist::Communicator* comm, Device device, const char* op);

// The parameters, then the buffers, of `net`: what every rank must hold alike.
nn::NamedTensors parameters_and_buffers(nn::Module& net);

// The tensors' values on rank 0 copied to every rank (in place through Tensor::assign).
void broadcast_from_rank0(dist::Communicator& comm, const nn::NamedTensors& tensors);

// The numbers of an epoch that early stopping reads (training and validation loss and accuracy)
// become rank 0's, so that every rank keeps the same best epoch and stops after the same one
// (ranks evaluate alike on one machine; on CPUs of other kinds the last bits may differ).
void broadcast_epoch_numbers(dist::Communicator& comm, Device device, EpochStats& st);
// Rank 0's `value` on every rank (TrainOptions::lr_schedule's learning rate before each epoch;
// Model::request_stop's request, as 0 or 1, after each epoch).
double broadcast_number(dist::Communicator& comm, Device device, double value);

// Throws aether::Error naming the first value (of `names`) that differs between rank 0 and another
// rank, and the ranks: every rank must train on the same data set size with the same options, or
// the ranks' collectives would not pair up.
// `device`: the model's, whose memory the values pass through when the communicator's buffers are
// device memory (NCCL); the same for check_ranks_agree and SyncBatchNorm.
void check_same_values(dist::Communicator& comm, Device device,
                       const std::vector<std::pair<std::string, int64_t>>& values);

// Throws aether::Error naming the ranks whose tensors differ from rank 0's (a SHA-256 of their
// bytes, all-gathered): data-parallel ranks must hold the same parameters after every step.
void check_ranks_agree(dist::Communicator& comm, Device device, const nn::NamedTensors& tensors,
                       const std::string& when);

// The gradient averaging of one step. `params` in the optimizer's order; their gradients are lazy
// (backward recorded, not run). Splits the gradients, in reverse parameter order (the order backward
// produces them), into buckets of about `bucket_bytes` (0: 25 MB, or a quarter of the gradients'
// bytes when that is less, at least 256 KB); realizes them bucket by bucket (`first` with
// the first bucket: the loss, the metrics, the buffers) and starts each bucket's all-reduce on a
// communication thread as soon as it is realized, so that communication overlaps the rest of
// backward. Every gradient becomes the sum over ranks of (gradient * grad_weight); with grad_weight
// = this rank's batch / the global batch, the mean over the global batch. The first
// `scalars.size()` tensors of `first` (one value each: the loss, the accuracy) ride in the first
// bucket and come back in `scalars` as the sum over ranks of (value * weight). *waited += the
// seconds spent waiting for the all-reduces after the last bucket was computed. Returns false when
// a reduced gradient is not finite (Inf/NaN: a float16 step to skip). With a communicator on device
// memory (NCCL), each bucket is packed on the gradients' device (one generated kernel), all-reduced
// there, and the gradients become slices of it.
// While it lives, every BatchNorm layer of `net` trains with statistics synchronized over the ranks
// of `comm` (TrainOptions::sync_batch_norm): through a split of `comm` (the graph's all-reduces pair
// up among themselves, apart from the gradient buckets' on the communication thread) registered as
// a collective group (aether/graph/collective.h). Collective: every rank constructs it alike.
class SyncBatchNorm {
 public:
  SyncBatchNorm(dist::Communicator& comm, Device device, nn::Module& net);
  ~SyncBatchNorm();  // the layers back to per-rank statistics; the group unregistered
  SyncBatchNorm(const SyncBatchNorm&) = delete;
  SyncBatchNorm& operator=(const SyncBatchNorm&) = delete;
  size_t layers() const { return layers_.size(); }

 private:
  std::shared_ptr<dist::Communicator> comm_;
  int64_t group_ = -1;
  std::vector<nn::BatchNorm*> layers_;
};

bool average_gradients(dist::Communicator& comm, const std::vector<Tensor>& params,
                       const std::vector<Tensor>& first, std::vector<double>& scalars, double weight,
                       double grad_weight, size_t bucket_bytes, double* waited);

}  // namespace aether::model_internal
