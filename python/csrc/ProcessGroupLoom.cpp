// ProcessGroupLoom.cpp - each torch.distributed call mapped once onto Loom.
#include "ProcessGroupLoom.hpp"

#include <pthread.h>

#include <cstring>
#include <stdexcept>

#include <Python.h>
#include <pybind11/pybind11.h>

#ifdef LOOM_TORCH_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#include "loom_cuda.h"
#endif

namespace loom_c10d {

namespace {

const char* const kUniqueIdKey = "loom_unique_id";

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("loom: " + what);
}

void checkOne(const std::vector<at::Tensor>& tensors, const char* op) {
  if (tensors.size() != 1)
    fail(std::string(op) + ": one tensor per process (got " + std::to_string(tensors.size()) +
         ")");
}

// Tensors Loom can read and write in place: dense, contiguous, on the CPU
// (or on a CUDA device when the CUDA adapter is built in).
void checkTensor(const at::Tensor& t, const char* op) {
  if (t.layout() != at::kStrided)
    fail(std::string(op) + ": only dense tensors are supported");
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

uint64_t count(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()); }

// Do the tensors sit one after another in memory (so one buffer holds them)?
bool adjacent(const std::vector<at::Tensor>& ts) {
  for (size_t i = 1; i < ts.size(); i++)
    if (static_cast<const char*>(ts[i - 1].data_ptr()) + ts[i - 1].nbytes() !=
        ts[i].data_ptr())
      return false;
  return true;
}

void checkSame(const std::vector<at::Tensor>& ts, const at::Tensor& like, const char* op) {
  for (const auto& t : ts) {
    checkTensor(t, op);
    if (t.scalar_type() != like.scalar_type() || t.numel() != like.numel())
      fail(std::string(op) + ": every tensor of the list must have the dtype and size of "
           "the input");
  }
}

}  // namespace

loom_dtype_t loomDtype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return LOOM_FLOAT32;
    case at::kDouble: return LOOM_FLOAT64;
    case at::kHalf: return LOOM_FLOAT16;
    case at::kBFloat16: return LOOM_BFLOAT16;
    case at::kChar: return LOOM_INT8;
    case at::kByte: return LOOM_UINT8;
    case at::kInt: return LOOM_INT32;
    case at::kLong: return LOOM_INT64;
    default:
      fail(std::string("dtype ") + c10::toString(t.scalar_type()) +
           " is not supported (float32, float64, float16, bfloat16, int8, uint8, int32, "
           "int64)");
  }
}

// ---- WorkLoom ---------------------------------------------------------------

WorkLoom::WorkLoom(ProcessGroupLoom* pg, c10d::OpType type, std::vector<at::Tensor> outputs,
                   std::function<void()> post)
    : c10d::Work(pg->getRank(), type), pg_(pg), outputs_(std::move(outputs)),
      post_(std::move(post)) {}

WorkLoom::~WorkLoom() {
  if (request_)
    loom_request_free(request_);
}

void WorkLoom::onLoomDone(void* arg, loom_result_t res) {
  // Loom's progress thread: record, wake waiters, hand over. No Python,
  // no future, no Loom call here.
  auto work = c10::intrusive_ptr<WorkLoom>::reclaim(static_cast<WorkLoom*>(arg));
  bool wake;
  {
    std::lock_guard<std::mutex> lock(work->mutex_);
    work->loomDone_ = true;
    work->loomResult_ = res;
    wake = work->futureWanted_ && !work->claimed_;
  }
  work->cv_.notify_all();
  ProcessGroupLoom* pg = work->pg_;
  pg->handOver(std::move(work), wake);
}

bool WorkLoom::claim() {
  if (!loomDone_ || claimed_)
    return false;
  claimed_ = true;
  return true;
}

void WorkLoom::finishWork() {
  std::exception_ptr eptr;
  if (loomResult_ < 0) {
    eptr = std::make_exception_ptr(std::runtime_error("loom: " + pg_->loomError()));
  } else if (post_) {
    try {
      post_();
    } catch (...) {
      eptr = std::current_exception();
    }
  }
  c10::intrusive_ptr<c10::ivalue::Future> fut;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fut = future_;
    exception_ = eptr;
    futureRead_ = true;  // getFuture() from now on completes its own future
  }
  // as gloo's: the future first (its callbacks run here), then the work
  if (fut) {
    if (eptr)
      fut->setError(eptr);
    else
      fut->markCompleted(c10::IValue(outputs_));
  }
  finish(eptr);
}

bool WorkLoom::isCompleted() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (completed_)
    return true;
  if (!claim())
    return false;
  lock.unlock();
  finishWork();
  return true;
}

bool WorkLoom::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr WorkLoom::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> WorkLoom::result() { return outputs_; }

bool WorkLoom::wait(std::chrono::milliseconds timeout) {
  loom_request_t req;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    req = loomDone_ ? nullptr : request_;
  }
  // Loom runs the call on this thread if it is still queued (no hand-off
  // to its progress thread); the callback then runs here too
  if (req && timeout == kNoTimeout)
    loom_request_wait(req);
  std::unique_lock<std::mutex> lock(mutex_);
  auto loomOrDone = [&] { return loomDone_ || completed_; };
  if (timeout == kNoTimeout) {
    cv_.wait(lock, loomOrDone);
  } else if (!cv_.wait_for(lock, timeout, loomOrDone)) {
    fail("Work::wait timed out after " + std::to_string(timeout.count()) + " ms");
  }
  if (claim()) {
    lock.unlock();
    finishWork();
    lock.lock();
  }
  cv_.wait(lock, [&] { return completed_; });
  if (exception_)
    std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkLoom::getFuture() {
  std::unique_lock<std::mutex> lock(mutex_);
  futureWanted_ = true;
  if (future_)
    return future_;
  future_ = c10::make_intrusive<c10::ivalue::Future>(
      c10::ListType::create(c10::TensorType::get()));
  auto fut = future_;
  if (futureRead_) {
    // finishWork has read future_ already: complete this one here
    auto eptr = exception_;
    lock.unlock();
    if (eptr)
      fut->setError(eptr);
    else
      fut->markCompleted(c10::IValue(outputs_));
    return fut;
  }
  if (claim()) {
    lock.unlock();
    finishWork();
  }
  return fut;
}

// ---- ProcessGroupLoom: setup ------------------------------------------------

ProcessGroupLoom::ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                   int size, std::chrono::milliseconds timeout,
                                   const std::string& ranktable)
    : c10d::ProcessGroup(rank, size) {
  (void)timeout;  // Loom's own LOOM_TIMEOUT and LOOM_BOOTSTRAP_TIMEOUT apply
  loom_result_t res;
  if (!ranktable.empty()) {
    res = loom_comm_init_ranktable(ranktable.c_str(), rank, &comm_);
    if (res != LOOM_SUCCESS)
      fail(std::string("rank table ") + ranktable + ": " + loom_get_error_string(nullptr));
    int n = 0;
    loom_comm_size(comm_, &n);
    if (n != size) {
      loom_comm_destroy(comm_);
      fail("rank table " + ranktable + " has " + std::to_string(n) +
           " ranks but the world size is " + std::to_string(size));
    }
  } else {
    loom_unique_id_t id;
    std::memset(&id, 0, sizeof id);
    if (rank == 0) {
      if (loom_get_unique_id(&id) != LOOM_SUCCESS)
        fail(std::string("unique id: ") + loom_get_error_string(nullptr));
      const uint8_t* p = reinterpret_cast<const uint8_t*>(id.internal);
      store->set(kUniqueIdKey, std::vector<uint8_t>(p, p + sizeof id.internal));
    } else {
      std::vector<uint8_t> v = store->get(kUniqueIdKey);
      if (v.size() != sizeof id.internal)
        fail("the store's " + std::string(kUniqueIdKey) + " has " + std::to_string(v.size()) +
             " bytes, not a Loom unique id");
      std::memcpy(id.internal, v.data(), v.size());
    }
    res = loom_comm_init_rank(&comm_, size, &id, rank);
    if (res != LOOM_SUCCESS)
      fail(std::string("joining the group: ") + loom_get_error_string(nullptr));
  }
  if ((res = loom_stream_create_host(&stream_)) != LOOM_SUCCESS) {
    loom_comm_destroy(comm_);
    fail("cannot create a stream");
  }
  completer_ = std::thread([this] { completionLoop(); });
  init();
}

ProcessGroupLoom::~ProcessGroupLoom() {
  // The completion thread may be running Python (comm hooks): let it have
  // the GIL while it drains.
  auto drain = [this] {
    for (auto& p : cudaStreams_)
      loom_stream_synchronize(p.second);
    loom_stream_synchronize(stream_);
    {
      std::lock_guard<std::mutex> lock(doneMutex_);
      stop_ = true;
    }
    doneCv_.notify_all();
    if (completer_.joinable())
      completer_.join();
  };
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release nogil;
    drain();
  } else {
    drain();
  }
  for (auto& p : cudaStreams_)
    loom_stream_destroy(p.second);
  loom_stream_destroy(stream_);
  loom_comm_destroy(comm_);
}

std::string ProcessGroupLoom::loomError() const { return loom_get_error_string(comm_); }

void ProcessGroupLoom::handOver(c10::intrusive_ptr<WorkLoom> work, bool wake) {
  {
    std::lock_guard<std::mutex> lock(doneMutex_);
    done_.push_back(std::move(work));
  }
  if (wake)
    doneCv_.notify_one();
}

void ProcessGroupLoom::completionLoop() {
  pthread_setname_np(pthread_self(), "loom-torch-done");  // for tests and debuggers
  std::unique_lock<std::mutex> lock(doneMutex_);
  for (;;) {
    // works nobody waits on are swept now and then; those with a future
    // wake this thread at once
    doneCv_.wait_for(lock, std::chrono::milliseconds(100),
                     [&] { return stop_ || !done_.empty(); });
    while (!done_.empty()) {
      auto work = std::move(done_.front());
      done_.pop_front();
      lock.unlock();
      bool mine;
      {
        std::lock_guard<std::mutex> wl(work->mutex_);
        mine = work->claim();
      }
      if (mine)
        work->finishWork();
      work.reset();
      lock.lock();
    }
    if (stop_)
      return;
  }
}

// ---- issuing ------------------------------------------------------------------

loom_stream_t ProcessGroupLoom::streamFor(const at::Tensor& t) {
#ifdef LOOM_TORCH_WITH_CUDA
  if (t.device().is_cuda()) {
    cudaStream_t cs = c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
    for (auto& p : cudaStreams_)
      if (p.first == static_cast<void*>(cs))
        return p.second;
    loom_stream_t s;
    if (loom_stream_create_cuda(cs, &s) != LOOM_SUCCESS)
      fail(std::string("cannot bind a Loom stream to the CUDA stream: ") +
           loom_get_error_string(nullptr));
    cudaStreams_.emplace_back(static_cast<void*>(cs), s);
    return s;
  }
#endif
  (void)t;
  return stream_;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::issue(
    const c10::intrusive_ptr<WorkLoom>& work, loom_stream_t stream,
    const std::function<loom_result_t()>& call) {
  std::lock_guard<std::mutex> lock(issueMutex_);
  loom_result_t res = call();
  if (res < 0)
    fail(loomError());
  if (coalescing_) {
    coalesced_.push_back(work);
    return work;
  }
  // the callback owns a reference until it hands the work over
  c10::raw::intrusive_ptr::incref(work.get());
  res = loom_request_create(stream, WorkLoom::onLoomDone, work.get(), &work->request_);
  if (res < 0) {
    c10::raw::intrusive_ptr::decref(work.get());
    fail("cannot create a request");
  }
  return work;
}

void ProcessGroupLoom::startCoalescing() {
  std::lock_guard<std::mutex> lock(issueMutex_);
  if (coalescing_)
    fail("startCoalescing: already coalescing");
  loom_group_start();
  coalescing_ = true;
}

void ProcessGroupLoom::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) {
  (void)reqs;  // the works were returned by each call; they complete together
  std::vector<c10::intrusive_ptr<WorkLoom>> works;
  loom_result_t res;
  {
    std::lock_guard<std::mutex> lock(issueMutex_);
    coalescing_ = false;
    works.swap(coalesced_);
    res = loom_group_end();
    if (res >= 0) {
      for (auto& w : works) {
        c10::raw::intrusive_ptr::incref(w.get());
        if (loom_request_create(stream_, WorkLoom::onLoomDone, w.get(), &w->request_) < 0) {
          c10::raw::intrusive_ptr::decref(w.get());
          res = LOOM_ERROR_NO_MEMORY;
        }
      }
    }
  }
  if (res < 0) {
    std::string msg = loomError();
    for (auto& w : works) {
      std::unique_lock<std::mutex> lock(w->mutex_);
      if (w->loomDone_)
        continue;
      w->loomDone_ = true;
      w->loomResult_ = res;
      if (w->claim()) {
        lock.unlock();
        w->finishWork();
      }
    }
    fail("coalesced calls: " + msg);
  }
}

loom_redop_t ProcessGroupLoom::redop(const c10d::ReduceOp& op, const at::Tensor& t,
                                     loom_redop_t* created) {
  *created = static_cast<loom_redop_t>(-1);
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return LOOM_SUM;
    case c10d::ReduceOp::AVG: return LOOM_AVG;
    case c10d::ReduceOp::PRODUCT: return LOOM_PROD;
    case c10d::ReduceOp::MIN: return LOOM_MIN;
    case c10d::ReduceOp::MAX: return LOOM_MAX;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      if (!s)
        fail("PREMUL_SUM without its factor (make it with "
             "torch.distributed._make_nccl_premul_sum)");
      double factor = s->double_factor;
      if (!s->tensor_factors.empty()) {
        if (s->tensor_factors.size() != 1 || s->tensor_factors[0].numel() != 1)
          fail("PREMUL_SUM: one scalar factor per call");
        factor = s->tensor_factors[0].item<double>();
      }
      if (!at::isFloatingType(t.scalar_type()))
        fail("PREMUL_SUM needs a floating-point tensor");
      loom_redop_attr_t attr = {};
      attr.struct_size = sizeof attr;
      attr.base = LOOM_SUM;
      attr.prescale = factor;
      attr.postscale = 1.0;
      attr.accumulate = LOOM_ACCUM_NATIVE;
      if (loom_redop_create(&attr, created) != LOOM_SUCCESS)
        fail(std::string("PREMUL_SUM: ") + loom_get_error_string(nullptr));
      return *created;
    }
    default:
      fail("ReduceOp " + std::to_string(static_cast<int>(op.op_)) +
           " is not supported (SUM, AVG, PRODUCT, MIN, MAX, PREMUL_SUM)");
  }
}

namespace {
// A created reduction op lives until its call has been issued.
struct RedopGuard {
  loom_redop_t op;
  ~RedopGuard() {
    if (static_cast<int>(op) >= 0)
      loom_redop_destroy(op);
  }
};
}  // namespace

// ---- collectives ---------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  checkOne(tensors, "broadcast");
  at::Tensor t = tensors[0];
  checkTensor(t, "broadcast");
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::BROADCAST, tensors, nullptr);
  loom_stream_t st = streamFor(t);
  return issue(work, st, [&] {
    return loom_broadcast(t.data_ptr(), count(t), loomDtype(t), static_cast<int>(opts.rootRank),
                          comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  checkOne(tensors, "allreduce");
  at::Tensor t = tensors[0];
  checkTensor(t, "allreduce");
  RedopGuard g{static_cast<loom_redop_t>(-1)};
  loom_redop_t op = redop(opts.reduceOp, t, &g.op);
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLREDUCE, tensors, nullptr);
  loom_stream_t st = streamFor(t);
  return issue(work, st, [&] {
    return loom_allreduce(t.data_ptr(), t.data_ptr(), count(t), loomDtype(t), op, comm_,
                          st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  if (tensors.empty())
    fail("allreduce_coalesced: no tensors");
  for (const auto& t : tensors) {
    checkTensor(t, "allreduce_coalesced");
    if (t.scalar_type() != tensors[0].scalar_type())
      fail("allreduce_coalesced: every tensor must have one dtype");
  }
  RedopGuard g{static_cast<loom_redop_t>(-1)};
  loom_redop_t op = redop(opts.reduceOp, tensors[0], &g.op);
  auto work =
      c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLREDUCE_COALESCED, tensors, nullptr);
  // one Loom group: its allreduces coalesce into as few as the sizes allow
  loom_stream_t st = streamFor(tensors[0]);
  return issue(work, st, [&] {
    loom_group_start();
    for (auto& t : tensors)
      loom_allreduce(t.data_ptr(), t.data_ptr(), count(t), loomDtype(t), op, comm_,
                     st);
    return loom_group_end();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  checkOne(tensors, "reduce");
  at::Tensor t = tensors[0];
  checkTensor(t, "reduce");
  RedopGuard g{static_cast<loom_redop_t>(-1)};
  loom_redop_t op = redop(opts.reduceOp, t, &g.op);
  int root = static_cast<int>(opts.rootRank);
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::REDUCE, tensors, nullptr);
  loom_stream_t st = streamFor(t);
  return issue(work, st, [&] {
    // the other ranks' tensors are left as they were
    return loom_reduce(t.data_ptr(), getRank() == root ? t.data_ptr() : nullptr, count(t),
                       loomDtype(t), op, root, comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  (void)opts;
  checkOne(inputs, "allgather");
  if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != getSize())
    fail("allgather: one list of world-size tensors per process");
  at::Tensor in = inputs[0];
  checkTensor(in, "allgather");
  std::vector<at::Tensor> outs = outputs[0];
  checkSame(outs, in, "allgather");
  // into the outputs when they are one buffer, else through one and copied
  at::Tensor flat = adjacent(outs) ? at::Tensor() : at::empty({getSize() * in.numel()},
                                                               in.options());
  void* dst = flat.defined() ? flat.data_ptr() : outs[0].data_ptr();
  std::function<void()> post;
  if (flat.defined())
    post = [flat, outs]() mutable {
      for (size_t i = 0; i < outs.size(); i++)
        outs[i].view({-1}).copy_(flat.narrow(0, static_cast<int64_t>(i) * outs[i].numel(),
                                             outs[i].numel()));
    };
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLGATHER, outs, post);
  loom_stream_t st = streamFor(in);
  return issue(work, st, [&] {
    return loom_allgather(in.data_ptr(), dst, count(in), loomDtype(in), comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  (void)opts;
  checkTensor(input, "_allgather_base");
  checkTensor(output, "_allgather_base");
  if (output.scalar_type() != input.scalar_type() ||
      output.numel() != input.numel() * getSize())
    fail("_allgather_base: the output must hold world size times the input, of its dtype");
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::_ALLGATHER_BASE,
                                            std::vector<at::Tensor>{output}, nullptr);
  loom_stream_t st = streamFor(input);
  return issue(work, st, [&] {
    return loom_allgather(input.data_ptr(), output.data_ptr(), count(input),
                          loomDtype(input), comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  checkOne(inputs, "gather");
  at::Tensor in = inputs[0];
  checkTensor(in, "gather");
  int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  at::Tensor flat;
  if (getRank() == root) {
    if (outputs.size() != 1 || static_cast<int>(outputs[0].size()) != getSize())
      fail("gather: the root passes one list of world-size tensors");
    outs = outputs[0];
    checkSame(outs, in, "gather");
    if (!adjacent(outs))
      flat = at::empty({getSize() * in.numel()}, in.options());
  }
  void* dst = flat.defined() ? flat.data_ptr() : (outs.empty() ? nullptr : outs[0].data_ptr());
  std::function<void()> post;
  if (flat.defined())
    post = [flat, outs]() mutable {
      for (size_t i = 0; i < outs.size(); i++)
        outs[i].view({-1}).copy_(flat.narrow(0, static_cast<int64_t>(i) * outs[i].numel(),
                                             outs[i].numel()));
    };
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::GATHER, outs, post);
  loom_stream_t st = streamFor(in);
  return issue(work, st, [&] {
    return loom_gather(in.data_ptr(), dst, count(in), loomDtype(in), root, comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  checkOne(outputs, "scatter");
  at::Tensor out = outputs[0];
  checkTensor(out, "scatter");
  int root = static_cast<int>(opts.rootRank);
  at::Tensor flat;
  if (getRank() == root) {
    if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != getSize())
      fail("scatter: the root passes one list of world-size tensors");
    checkSame(inputs[0], out, "scatter");
    flat = adjacent(inputs[0]) ? inputs[0][0]
                               : at::cat(inputs[0]).contiguous();  // copied now
  }
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::SCATTER, outputs,
                                            [flat] {});  // keeps flat alive
  loom_stream_t st = streamFor(out);
  return issue(work, st, [&] {
    return loom_scatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), count(out),
                        loomDtype(out), root, comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  checkOne(outputs, "reduce_scatter");
  at::Tensor out = outputs[0];
  checkTensor(out, "reduce_scatter");
  if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != getSize())
    fail("reduce_scatter: one list of world-size tensors per process");
  checkSame(inputs[0], out, "reduce_scatter");
  at::Tensor flat = adjacent(inputs[0]) ? inputs[0][0] : at::cat(inputs[0]).contiguous();
  RedopGuard g{static_cast<loom_redop_t>(-1)};
  loom_redop_t op = redop(opts.reduceOp, out, &g.op);
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::REDUCE_SCATTER, outputs,
                                            [flat] {});
  loom_stream_t st = streamFor(out);
  return issue(work, st, [&] {
    return loom_reduce_scatter(flat.data_ptr(), out.data_ptr(), count(out), loomDtype(out), op,
                               comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "_reduce_scatter_base");
  checkTensor(output, "_reduce_scatter_base");
  if (output.scalar_type() != input.scalar_type() ||
      input.numel() != output.numel() * getSize())
    fail("_reduce_scatter_base: the input must hold world size times the output, of its "
         "dtype");
  RedopGuard g{static_cast<loom_redop_t>(-1)};
  loom_redop_t op = redop(opts.reduceOp, output, &g.op);
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::_REDUCE_SCATTER_BASE,
                                            std::vector<at::Tensor>{output}, nullptr);
  loom_stream_t st = streamFor(output);
  return issue(work, st, [&] {
    return loom_reduce_scatter(input.data_ptr(), output.data_ptr(), count(output),
                               loomDtype(output), op, comm_, st);
  });
}

// Unequal splits: one group of sends and receives (they progress together).
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::alltoallv(
    at::Tensor& output, at::Tensor& input, const std::vector<int64_t>& outSplits,
    const std::vector<int64_t>& inSplits) {
  int n = getSize();
  int64_t inRow = input.dim() ? input.numel() / std::max<int64_t>(input.size(0), 1) : 1;
  int64_t outRow = output.dim() ? output.numel() / std::max<int64_t>(output.size(0), 1) : 1;
  auto split = [&](const std::vector<int64_t>& s, const at::Tensor& t, int64_t row,
                   std::vector<int64_t>& off, std::vector<int64_t>& len) {
    int64_t rows = t.dim() ? t.size(0) : 1, at = 0;
    for (int i = 0; i < n; i++) {
      int64_t r = s.empty() ? rows / n : s[i];
      off.push_back(at * row);
      len.push_back(r * row);
      at += r;
    }
    if (at != rows || (s.empty() && rows % n))
      fail("alltoall_base: the splits do not add up to the tensor's first dimension");
  };
  std::vector<int64_t> ioff, ilen, ooff, olen;
  split(inSplits, input, inRow, ioff, ilen);
  split(outSplits, output, outRow, ooff, olen);
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLTOALL_BASE,
                                            std::vector<at::Tensor>{output}, [input] {});
  loom_dtype_t dt = loomDtype(input);
  size_t es = input.element_size();
  loom_stream_t st = streamFor(input);
  return issue(work, st, [&] {
    loom_group_start();
    for (int p = 0; p < n; p++) {
      loom_send(static_cast<char*>(input.data_ptr()) + ioff[p] * es,
                static_cast<uint64_t>(ilen[p]), dt, p, comm_, st);
      loom_recv(static_cast<char*>(output.data_ptr()) + ooff[p] * es,
                static_cast<uint64_t>(olen[p]), dt, p, comm_, st);
    }
    return loom_group_end();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  (void)opts;
  checkTensor(input, "alltoall_base");
  checkTensor(output, "alltoall_base");
  if (output.scalar_type() != input.scalar_type())
    fail("alltoall_base: input and output dtypes differ");
  if (!outputSplits.empty() || !inputSplits.empty() || input.numel() % getSize() ||
      output.numel() != input.numel())
    return alltoallv(output, input, outputSplits, inputSplits);
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLTOALL_BASE,
                                            std::vector<at::Tensor>{output}, nullptr);
  loom_stream_t st = streamFor(input);
  return issue(work, st, [&] {
    return loom_alltoall(input.data_ptr(), output.data_ptr(),
                         count(input) / static_cast<uint64_t>(getSize()), loomDtype(input),
                         comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  (void)opts;
  int n = getSize();
  if (static_cast<int>(outputs.size()) != n || static_cast<int>(inputs.size()) != n)
    fail("alltoall: world-size lists of input and output tensors");
  for (int p = 0; p < n; p++) {
    checkTensor(inputs[p], "alltoall");
    checkTensor(outputs[p], "alltoall");
    if (inputs[p].scalar_type() != inputs[0].scalar_type() ||
        outputs[p].scalar_type() != inputs[0].scalar_type())
      fail("alltoall: every tensor must have one dtype");
  }
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLTOALL, outputs,
                                            [inputs] {});
  loom_stream_t st = streamFor(inputs[0]);
  return issue(work, st, [&] {
    loom_group_start();
    for (int p = 0; p < n; p++) {
      loom_send(inputs[p].data_ptr(), count(inputs[p]), loomDtype(inputs[p]), p, comm_,
                st);
      loom_recv(outputs[p].data_ptr(), count(outputs[p]), loomDtype(outputs[p]), p, comm_,
                st);
    }
    return loom_group_end();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::send(std::vector<at::Tensor>& tensors,
                                                      int dst, int tag) {
  checkOne(tensors, "send");
  if (tag != 0)
    fail("send: tags are not supported (messages between two ranks match in the order "
         "they were sent); use tag=0");
  at::Tensor t = tensors[0];
  checkTensor(t, "send");
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::SEND, tensors, nullptr);
  loom_stream_t st = streamFor(t);
  return issue(work, st, [&] {
    return loom_send(t.data_ptr(), count(t), loomDtype(t), dst, comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::recv(std::vector<at::Tensor>& tensors,
                                                      int src, int tag) {
  checkOne(tensors, "recv");
  if (tag != 0)
    fail("recv: tags are not supported (messages between two ranks match in the order "
         "they were sent); use tag=0");
  at::Tensor t = tensors[0];
  checkTensor(t, "recv");
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::RECV, tensors, nullptr);
  loom_stream_t st = streamFor(t);
  return issue(work, st, [&] {
    return loom_recv(t.data_ptr(), count(t), loomDtype(t), src, comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::barrier(const c10d::BarrierOptions& opts) {
  (void)opts;
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::BARRIER,
                                            std::vector<at::Tensor>{}, nullptr);
  loom_stream_t st = stream_;
  return issue(work, st, [&] { return loom_barrier(comm_, st); });
}

}  // namespace loom_c10d
