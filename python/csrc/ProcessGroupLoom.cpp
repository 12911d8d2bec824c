// ProcessGroupLoom.cpp - the group's setup (rendezvous, stream, completion
// thread), its Work, issuing calls and groups, and reduction ops; the calls
// themselves are in collectives.cpp.
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
}  // namespace

using namespace detail;

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
    case at::kBool: return LOOM_UINT8;  // one byte of 0 or 1
    case at::kComplexFloat: return LOOM_FLOAT32;  // as two floats (count())
    case at::kComplexDouble: return LOOM_FLOAT64;
    default:
      fail(std::string("dtype ") + c10::toString(t.scalar_type()) +
           " is not supported (float32, float64, float16, bfloat16, int8, uint8, int32, "
           "int64, bool, complex64, complex128)");
  }
}

// ---- WorkLoom ---------------------------------------------------------------

WorkLoom::WorkLoom(ProcessGroupLoom* pg, c10d::OpType type, const char* title,
                   std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs,
                   std::function<void()> post)
    : c10d::Work(pg->getRank(), type, title, inputs), pg_(pg), outputs_(std::move(outputs)),
      post_(std::move(post)) {
  pg->seq_++;
}

void WorkLoom::doneNow(loom_result_t res) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (loomDone_)
    return;
  loomDone_ = true;
  loomResult_ = res;
  if (claim()) {
    lock.unlock();
    finishWork();
  }
}

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

int WorkLoom::sourceRank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!loomDone_ || source_ < 0)
    throw std::runtime_error("sourceRank: only a completed receive has a source rank");
  return source_;
}

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
    // the call stays in flight (bounded by the group's timeout); the group
    // no longer waits for it when it is destroyed
    pg_->abandoned_ = true;
    fail(std::string(c10d::opTypeToString(retrieveOpType())) + ": Work::wait timed out after " +
         std::to_string(timeout.count()) +
         " ms; the call is still in flight (the group's timeout bounds it), and "
         "destroying the group aborts it");
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
                                   const std::string& ranktable, const std::string& host)
    : compat::Base(rank, size), store_(store), timeout_(timeout) {
  loom_comm_opts_t opts;
  std::memset(&opts, 0, sizeof opts);
  opts.struct_size = sizeof opts;
  opts.timeout = static_cast<double>(timeout.count()) / 1000.0;
  opts.nranks = size;  // a rank table of another size fails at once
  loom_result_t res;
  if (!ranktable.empty()) {
    res = loom_comm_init_ranktable_opts(ranktable.c_str(), rank, &opts, &comm_);
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
      loom_result_t r = host.empty() ? loom_get_unique_id(&id)
                                     : loom_get_unique_id_toward(host.c_str(), &id);
      if (r != LOOM_SUCCESS)
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
    res = loom_comm_init_rank_opts(&comm_, size, &id, rank, &opts);
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
  if (abandoned_)
    loom_comm_abort(comm_);  // a call nobody waits for any more
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

void ProcessGroupLoom::abort() {
  abandoned_ = true;
  loom_comm_abort(comm_);
}

void ProcessGroupLoom::shutdown() {
  pybind11::gil_scoped_release nogil;
  drain();
  abort();
}

void ProcessGroupLoom::drain() {
  for (auto& p : cudaStreams_)
    loom_stream_synchronize(p.second);
  loom_stream_synchronize(stream_);
}

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

#if LOOM_TORCH_BACKEND_API
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::endCoalescing() {
  return endCoalescingWork();
}
#else
void ProcessGroupLoom::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) {
  (void)reqs;  // the works were returned by each call; they complete together
  (void)endCoalescingWork();
}
#endif

c10::intrusive_ptr<WorkLoom> ProcessGroupLoom::endCoalescingWork() {
  std::vector<c10::intrusive_ptr<WorkLoom>> works;
  loom_result_t res;
  {
    std::lock_guard<std::mutex> lock(issueMutex_);
    if (!coalescing_)
      fail("endCoalescing: startCoalescing was not called");
    coalescing_ = false;
    works.swap(coalesced_);
    // one work for the whole group, after the calls' own
    std::vector<at::Tensor> outs;
    for (auto& w : works)
      outs.insert(outs.end(), w->outputs_.begin(), w->outputs_.end());
    works.push_back(c10::make_intrusive<WorkLoom>(this, c10d::OpType::UNKNOWN,
                                                  "loom:coalesced", std::vector<at::Tensor>{},
                                                  outs, nullptr));
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
  return works.back();
}

loom_redop_t ProcessGroupLoom::redop(const c10d::ReduceOp& op, const at::Tensor& t,
                                     loom_redop_t* created) {
  *created = static_cast<loom_redop_t>(-1);
  if (t.is_complex() && op.op_ != c10d::ReduceOp::SUM && op.op_ != c10d::ReduceOp::AVG &&
      op.op_ != c10d::ReduceOp::PREMUL_SUM)
    fail("complex tensors are reduced with SUM, AVG or PREMUL_SUM only (ReduceOp " +
         std::to_string(static_cast<int>(op.op_)) + ")");
  if (t.scalar_type() == at::kBool) {
    // as logical or / and over bytes of 0 and 1
    switch (op.op_) {
      case c10d::ReduceOp::SUM:
      case c10d::ReduceOp::MAX: return LOOM_MAX;
      case c10d::ReduceOp::PRODUCT:
      case c10d::ReduceOp::MIN: return LOOM_MIN;
      default:
        fail("bool tensors are reduced with SUM, PRODUCT, MIN or MAX (ReduceOp " +
             std::to_string(static_cast<int>(op.op_)) + ")");
    }
  }
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
      std::vector<at::Tensor> tf = compat::premulTensors(*s);
      if (!tf.empty()) {
        if (tf.size() != 1 || tf[0].numel() != 1)
          fail("PREMUL_SUM: one scalar factor per call");
        factor = tf[0].item<double>();
      }
      if (!at::isFloatingType(t.scalar_type()) && !t.is_complex())
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

}  // namespace loom_c10d
