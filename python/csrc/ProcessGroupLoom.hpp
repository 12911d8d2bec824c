// ProcessGroupLoom.hpp - the "loom" backend of torch.distributed: a thin
// c10d::Backend (torch >= 2.0; a c10d::ProcessGroup on 1.13, compat.hpp)
// over Loom's C API (include/loom.h).
//
// Every call maps to one Loom call (or one Loom group) enqueued on the
// group's own host stream, so it returns at once; a request with a
// callback reports completion. The callback runs on Loom's progress thread
// and only hands the work over: futures are completed (and Python comm
// hooks run) on a thread this backend owns, or on the thread that waits in
// Work::wait() / polls Work::isCompleted() when it gets there first, never
// on Loom's progress thread.
//
// Timeouts: the group's timeout (init_process_group(timeout=...)) bounds its
// rendezvous and each call's wait for its peers, unless the user set
// LOOM_BOOTSTRAP_TIMEOUT or LOOM_TIMEOUT. A Work::wait(timeout) that
// expires raises; its call stays in flight, still bounded by the group's
// timeout. The group then aborts its communicator when it is destroyed
// instead of waiting for that call, so the process can exit.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <stdexcept>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "compat.hpp"
#include "loom.h"

namespace loom_c10d {

class ProcessGroupLoom;

class WorkLoom : public c10d::Work {
 public:
  // title: the profiler's name of the call ("loom:all_reduce"), recorded
  // from here to completion as gloo's "gloo:<op>"
  WorkLoom(ProcessGroupLoom* pg, c10d::OpType type, const char* title,
           std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
           std::function<void()> post);
  ~WorkLoom() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  // A receive's sender (recv from any source), once the work is complete.
  int sourceRank() const override;

 private:
  friend class ProcessGroupLoom;
  static void onLoomDone(void* arg, loom_result_t res);
  // Complete a work whose Loom part ended without a request (res).
  void doneNow(loom_result_t res);
  // Run post_, complete the future, mark the work complete. Called once,
  // by whoever claimed the work, with mutex_ not held.
  void finishWork();
  // With mutex_ held: whether this thread is the one to finish the work.
  bool claim();

  ProcessGroupLoom* pg_;
  std::vector<at::Tensor> outputs_;
  std::function<void()> post_;        // after Loom, before completion
  loom_request_t request_ = nullptr;
  bool loomDone_ = false;             // Loom finished (under mutex_)
  loom_result_t loomResult_ = LOOM_SUCCESS;
  bool claimed_ = false;              // someone is finishing it
  bool futureWanted_ = false;
  bool futureRead_ = false;           // finishWork took future_ (under mutex_)
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  int source_ = -1;                   // written by Loom when a receive completes
};

class ProcessGroupLoom : public compat::Base {
 public:
  // Rendezvous through store (rank 0 publishes a Loom unique id), or, with
  // a non-empty ranktable, from the rank table (of size ranks). host: the
  // store's host, when known: rank 0 listens on the interface that reaches
  // it, so a job that meets at 127.0.0.1 runs on loopback.
  ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout, const std::string& ranktable,
                   const std::string& host = std::string());
  ~ProcessGroupLoom() override;

  const std::string getBackendName() const override { return "loom"; }
  void startCoalescing() override;
#if LOOM_TORCH_BACKEND_API
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
#else
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override;
#endif
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  // As gloo's: rank 0 waits for every rank (through the store, so that it
  // names the ranks that did not arrive within the timeout), then lets
  // them go; waitAllRanks names all of them, else the first.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;
  // The group's call count, the same on every rank (every rank makes the
  // same calls); torch checks it when a subgroup is made, as gloo's.
  void setSequenceNumberForGroup() override { seq_ = 0; }
  uint64_t getSequenceNumberForGroup() override { return seq_; }
  // Every pending and later call fails at once (LOOM_ERROR_ABORTED).
  void abort();
  // Waits for pending calls (bounded by the timeout), then aborts.
  void shutdown();

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  loom_comm_t comm() const { return comm_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // Loom's message for comm's last error.
  std::string loomError() const;

 private:
  friend class WorkLoom;
  // Issue one Loom call (or group: call issues several) for work, then
  // attach the request. Throws with Loom's message when the call fails.
  c10::intrusive_ptr<c10d::Work> issue(const c10::intrusive_ptr<WorkLoom>& work,
                                       loom_stream_t stream,
                                       const std::function<loom_result_t()>& call);
  // The Loom stream for calls on t: the group's host stream, or for a
  // CUDA tensor one bound to the current CUDA stream (adapter built in).
  loom_stream_t streamFor(const at::Tensor& t);
  // Hand a work whose Loom part is done to the completion thread.
  void handOver(c10::intrusive_ptr<WorkLoom> work, bool wake);
  void completionLoop();
  loom_redop_t redop(const c10d::ReduceOp& op, const at::Tensor& t, loom_redop_t* created);
  c10::intrusive_ptr<c10d::Work> alltoallv(at::Tensor& output, at::Tensor& input,
                                           const std::vector<int64_t>& outSplits,
                                           const std::vector<int64_t>& inSplits);
  // Sparse COO allreduce (SUM), as gloo's: the ranks' indices and values are
  // gathered and summed into each rank's tensor. Runs on the caller's thread.
  c10::intrusive_ptr<c10d::Work> allreduceSparse(at::Tensor& t, const c10d::ReduceOp& op);
  // recv and recvAnysource (src LOOM_ANY_SOURCE): one tagged receive.
  c10::intrusive_ptr<c10d::Work> recvFrom(std::vector<at::Tensor>& tensors, int src, int tag,
                                          c10d::OpType type, const char* title);
  // The group work of the calls issued since startCoalescing.
  c10::intrusive_ptr<WorkLoom> endCoalescingWork();
  // Wait for the calls issued so far (before a call made on this thread).
  void drain();

  loom_comm_t comm_ = nullptr;
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  uint64_t monitoredSeq_ = 0;
  std::atomic<uint64_t> seq_{0};  // calls made (works created)
  std::atomic<bool> abandoned_{false};  // a wait timed out, or abort()
  loom_stream_t stream_ = nullptr;
  std::vector<std::pair<void*, loom_stream_t>> cudaStreams_;  // CUDA stream -> Loom's
  std::mutex issueMutex_;             // orders issue() calls
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<WorkLoom>> coalesced_;

  std::mutex doneMutex_;
  std::condition_variable doneCv_;
  std::deque<c10::intrusive_ptr<WorkLoom>> done_;
  bool stop_ = false;
  std::thread completer_;
};

// Loom's dtype for a tensor; throws a clear error for others.
loom_dtype_t loomDtype(const at::Tensor& t);

// Checks and helpers both files use; errors are "loom: ..." exceptions.
namespace detail {

[[noreturn]] inline void fail(const std::string& what) {
  throw std::runtime_error("loom: " + what);
}

inline void checkOne(const std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1)
    fail(std::string(op) + ": one tensor per process (got " + std::to_string(tensors.size()) +
         ")");
}

// Tensors Loom can read and write in place: dense, contiguous, on the CPU
// (or on a CUDA device when the CUDA adapter is built in).
inline void checkTensor(const at::Tensor& t, const char* op) {
  if (t.layout() != at::kStrided)
    fail(std::string(op) + ": only dense tensors are supported (sparse: allreduce)");
  if (!t.is_contiguous())
    fail(std::string(op) + ": the tensor must be contiguous");
#ifdef LOOM_TORCH_WITH_CUDA
  if (!t.device().is_cpu() && !t.device().is_cuda())
#else
  if (!t.device().is_cpu())
#endif
    fail(std::string(op) + ": tensors on " + t.device().str() +
         " are not supported (CPU tensors; CUDA tensors where Loom's CUDA adapter is "
         "built in)");
  (void)loomDtype(t);
}

// Elements in Loom's dtype: a complex number is two of its real type.
inline uint64_t count(const at::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * (t.is_complex() ? 2 : 1);
}

// Do the tensors sit one after another in memory (so one buffer holds them)?
inline bool adjacent(const std::vector<at::Tensor>& ts) {
  for (size_t i = 1; i < ts.size(); i++)
    if (static_cast<const char*>(ts[i - 1].data_ptr()) + ts[i - 1].nbytes() !=
        ts[i].data_ptr())
      return false;
  return true;
}

inline void checkSame(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op) {
  for (const auto& t : ts) {
    checkTensor(t, op);
    if (t.scalar_type() != like.scalar_type() || t.numel() != like.numel())
      fail(std::string(op) + ": every tensor of the list must have the dtype and size of "
           "the input");
  }
}

}  // namespace detail

}  // namespace loom_c10d
