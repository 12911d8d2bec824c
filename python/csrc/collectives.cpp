// collectives.cpp - each torch.distributed call mapped once onto Loom: one
// Loom call (or one Loom group) enqueued through ProcessGroupLoom::issue.
#include "ProcessGroupLoom.hpp"

#include <algorithm>
#include <sstream>

namespace loom_c10d {

using namespace detail;

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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::BROADCAST, "loom:broadcast", tensors, tensors, nullptr);
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
  if (t.is_sparse())
    return allreduceSparse(tensors[0], opts.reduceOp);
  checkTensor(t, "allreduce");
  RedopGuard g{static_cast<loom_redop_t>(-1)};
  loom_redop_t op = redop(opts.reduceOp, t, &g.op);
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLREDUCE, "loom:all_reduce", tensors, tensors, nullptr);
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
      c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLREDUCE_COALESCED, "loom:all_reduce",
                                    tensors, tensors, nullptr);
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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::REDUCE, "loom:reduce", tensors, tensors, nullptr);
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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLGATHER, "loom:all_gather", inputs, outs, post);
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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::_ALLGATHER_BASE, "loom:all_gather",
                                            std::vector<at::Tensor>{input},
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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::GATHER, "loom:gather", inputs, outs, post);
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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::SCATTER, "loom:scatter",
                                            flat.defined() ? std::vector<at::Tensor>{flat}
                                                           : std::vector<at::Tensor>{},
                                            outputs,
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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::REDUCE_SCATTER, "loom:reduce_scatter",
                                            std::vector<at::Tensor>{flat}, outputs,
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
                                            "loom:reduce_scatter", std::vector<at::Tensor>{input},
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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLTOALL_BASE, "loom:all_to_all",
                                            std::vector<at::Tensor>{input},
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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLTOALL_BASE, "loom:all_to_all",
                                            std::vector<at::Tensor>{input},
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
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLTOALL, "loom:all_to_all", inputs,
                                            outputs,
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

// Every send and receive is tagged (tag 0 too): a receive from any source
// must be able to match any send, which only Loom's tagged messages allow.
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::send(std::vector<at::Tensor>& tensors,
                                                      int dst, int tag) {
  checkOne(tensors, "send");
  at::Tensor t = tensors[0];
  checkTensor(t, "send");
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::SEND, "loom:send", tensors, tensors, nullptr);
  loom_stream_t st = streamFor(t);
  return issue(work, st, [&] {
    return loom_send_tagged(t.data_ptr(), count(t), loomDtype(t), dst, tag, comm_, st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::recvFrom(std::vector<at::Tensor>& tensors,
                                                          int src, int tag, c10d::OpType type,
                                                          const char* title) {
  const char* op = src == LOOM_ANY_SOURCE ? "recvAnysource" : "recv";
  checkOne(tensors, op);
  at::Tensor t = tensors[0];
  checkTensor(t, op);
  // the tensor is the profiler's input too, as gloo records it
  auto work = c10::make_intrusive<WorkLoom>(this, type, title, tensors, tensors, nullptr);
  loom_stream_t st = streamFor(t);
  int* source = &work->source_;
  return issue(work, st, [&] {
    return loom_recv_tagged(t.data_ptr(), count(t), loomDtype(t), src, tag, source, comm_,
                            st);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::recv(std::vector<at::Tensor>& tensors,
                                                      int src, int tag) {
  if (src < 0)
    fail("recv: src " + std::to_string(src) + " is not a rank");
  return recvFrom(tensors, src, tag, c10d::OpType::RECV, "loom:recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::barrier(const c10d::BarrierOptions& opts) {
  (void)opts;
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::BARRIER, "loom:barrier",
                                            std::vector<at::Tensor>{}, std::vector<at::Tensor>{}, nullptr);
  loom_stream_t st = stream_;
  return issue(work, st, [&] { return loom_barrier(comm_, st); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::recvAnysource(std::vector<at::Tensor>& tensors,
                                                               int tag) {
  return recvFrom(tensors, LOOM_ANY_SOURCE, tag, c10d::OpType::RECVANYSOURCE,
                  "loom:recvAnySource");
}

// The ranks' input lists flattened into one buffer, gathered once, and cut
// back into each rank's list (gloo's way).
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  (void)opts;
  const char* op = "allgather_coalesced";
  if (inputs.empty())
    fail(std::string(op) + ": no input tensors");
  if (static_cast<int>(outputLists.size()) != getSize())
    fail(std::string(op) + ": one output list per rank (" + std::to_string(getSize()) +
         "), got " + std::to_string(outputLists.size()));
  for (const auto& t : inputs) {
    checkTensor(t, op);
    if (t.scalar_type() != inputs[0].scalar_type())
      fail(std::string(op) + ": every tensor must have one dtype");
  }
  for (const auto& l : outputLists) {
    if (l.size() != inputs.size())
      fail(std::string(op) + ": each output list must have as many tensors as the inputs");
    for (size_t i = 0; i < l.size(); i++)
      if (l[i].scalar_type() != inputs[i].scalar_type() || l[i].numel() != inputs[i].numel())
        fail(std::string(op) + ": output tensor " + std::to_string(i) +
             " must have the dtype and size of input " + std::to_string(i));
  }
  std::vector<at::Tensor> flats;
  for (const auto& t : inputs)
    flats.push_back(t.reshape({-1}));
  at::Tensor in = at::cat(flats);
  at::Tensor out = at::empty({getSize() * in.numel()}, in.options());
  std::vector<at::Tensor> outs;
  for (auto& l : outputLists)
    outs.insert(outs.end(), l.begin(), l.end());
  auto lists = outputLists;
  auto post = [out, lists, in]() mutable {
    int64_t at = 0;
    for (auto& l : lists)
      for (auto& t : l) {
        t.copy_(out.narrow(0, at, t.numel()).view(t.sizes()));
        at += t.numel();
      }
  };
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLGATHER_COALESCED,
                                            "loom:all_gather", inputs, outs, post);
  loom_stream_t st = streamFor(in);
  return issue(work, st, [&] {
    return loom_allgather(in.data_ptr(), out.data_ptr(), count(in), loomDtype(in), comm_, st);
  });
}

#if LOOM_TORCH_BACKEND_API
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce_sparse(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  checkOne(tensors, "allreduce_sparse");
  return allreduceSparse(tensors[0], opts.reduceOp);
}

// One Loom group of allgathers (one call number on every rank).
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  (void)opts;
  const char* op = "allgather_into_tensor_coalesced";
  if (inputs.empty() || outputs.size() != inputs.size())
    fail(std::string(op) + ": as many outputs as inputs, at least one");
  for (size_t i = 0; i < inputs.size(); i++) {
    checkTensor(inputs[i], op);
    checkTensor(outputs[i], op);
    if (outputs[i].scalar_type() != inputs[i].scalar_type() ||
        outputs[i].numel() != inputs[i].numel() * getSize())
      fail(std::string(op) + ": output " + std::to_string(i) +
           " must hold world size times input " + std::to_string(i) + ", of its dtype");
  }
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::COALESCED, "loom:all_gather",
                                            inputs, outputs, nullptr);
  loom_stream_t st = streamFor(inputs[0]);
  return issue(work, st, [&] {
    loom_group_start();
    for (size_t i = 0; i < inputs.size(); i++)
      loom_allgather(inputs[i].data_ptr(), outputs[i].data_ptr(), count(inputs[i]),
                     loomDtype(inputs[i]), comm_, st);
    return loom_group_end();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor_coalesced";
  if (inputs.empty() || outputs.size() != inputs.size())
    fail(std::string(op) + ": as many outputs as inputs, at least one");
  for (size_t i = 0; i < inputs.size(); i++) {
    checkTensor(inputs[i], op);
    checkTensor(outputs[i], op);
    if (outputs[i].scalar_type() != inputs[0].scalar_type() ||
        inputs[i].scalar_type() != inputs[0].scalar_type() ||
        inputs[i].numel() != outputs[i].numel() * getSize())
      fail(std::string(op) + ": input " + std::to_string(i) +
           " must hold world size times output " + std::to_string(i) +
           ", all of one dtype");
  }
  RedopGuard g{static_cast<loom_redop_t>(-1)};
  loom_redop_t rop = redop(opts.reduceOp, outputs[0], &g.op);
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::COALESCED,
                                            "loom:reduce_scatter", inputs, outputs, nullptr);
  loom_stream_t st = streamFor(inputs[0]);
  return issue(work, st, [&] {
    loom_group_start();
    for (size_t i = 0; i < inputs.size(); i++)
      loom_reduce_scatter(inputs[i].data_ptr(), outputs[i].data_ptr(), count(outputs[i]),
                          loomDtype(outputs[i]), rop, comm_, st);
    return loom_group_end();
  });
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduceSparse(at::Tensor& t,
                                                                 const c10d::ReduceOp& op) {
  const char* name = "allreduce (sparse)";
  if (t.layout() != at::kSparse || !t.device().is_cpu())
    fail(std::string(name) + ": sparse COO tensors on the CPU only");
  if (op.op_ != c10d::ReduceOp::SUM)
    fail(std::string(name) + ": sparse tensors are reduced with SUM only");
  at::Tensor in = t.coalesce();
  at::Tensor idx = in._indices().contiguous();  // int64 [sparse_dim, nnz]
  at::Tensor val = in._values().contiguous();   // [nnz, dense dims...]
  (void)loomDtype(val);
  int n = getSize();
  auto work = c10::make_intrusive<WorkLoom>(this, c10d::OpType::ALLREDUCE,
                                            "loom:sparse_all_reduce",
                                            std::vector<at::Tensor>{t},
                                            std::vector<at::Tensor>{t}, nullptr);
  auto check = [&](loom_result_t res) {
    if (res < 0) {
      std::string msg = loomError();
      work->doneNow(res);
      fail(std::string(name) + ": " + msg);
    }
  };
  // blocking calls on this thread, after what was issued before
  std::lock_guard<std::mutex> lock(issueMutex_);
  if (coalescing_)
    fail(std::string(name) + ": not inside a coalescing block");
  drain();
  at::Tensor nnz = at::empty({n}, at::kLong);
  int64_t mine = in._nnz();
  check(loom_allgather(&mine, nnz.data_ptr(), 1, LOOM_INT64, comm_, nullptr));
  int64_t most = nnz.max().item<int64_t>();
  // every rank's part padded to the longest
  int64_t sd = idx.size(0);
  std::vector<int64_t> vshape = val.sizes().vec();
  vshape[0] = most;
  at::Tensor pi = at::zeros({most, sd}, at::kLong);
  at::Tensor pv = at::zeros(vshape, val.options());
  if (mine) {
    pi.narrow(0, 0, mine).copy_(idx.t());
    pv.narrow(0, 0, mine).copy_(val);
  }
  std::vector<int64_t> allv = vshape;
  allv.insert(allv.begin(), n);
  at::Tensor ai = at::empty({n, most, sd}, at::kLong);
  at::Tensor av = at::empty(allv, val.options());
  if (most) {
    check(loom_allgather(pi.data_ptr(), ai.data_ptr(), count(pi), LOOM_INT64, comm_, nullptr));
    check(loom_allgather(pv.data_ptr(), av.data_ptr(), count(pv), loomDtype(pv), comm_,
                         nullptr));
  }
  std::vector<at::Tensor> is, vs;
  for (int r = 0; r < n; r++) {
    int64_t k = nnz[r].item<int64_t>();
    is.push_back(ai[r].narrow(0, 0, k));
    vs.push_back(av[r].narrow(0, 0, k));
  }
  at::Tensor sum =
      at::sparse_coo_tensor(at::cat(is).t(), at::cat(vs), t.sizes(), t.options()).coalesce();
  t.copy_(sum);
  work->doneNow(LOOM_SUCCESS);
  return work;
}

void ProcessGroupLoom::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  auto start = std::chrono::steady_clock::now();
  std::string prefix = "loom_monitored_barrier/" + std::to_string(monitoredSeq_++) + "/";
  std::string done = prefix + "done";
  auto left = [&] {
    auto l = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start);
    return std::max(l, std::chrono::milliseconds(1));
  };
  if (getRank() != 0) {
    store_->set(prefix + std::to_string(getRank()), std::vector<uint8_t>{1});
    try {
      store_->wait({done}, left());
    } catch (const std::exception& e) {
      fail("monitoredBarrier: rank 0 did not let rank " + std::to_string(getRank()) +
           " pass within " + std::to_string(timeout.count()) + " ms: " + e.what());
    }
    return;
  }
  std::vector<int> missing;
  for (int r = 1; r < getSize(); r++) {
    if (!waitAllRanks && std::chrono::steady_clock::now() - start >= timeout) {
      // as gloo's: rank 0's own time ran out before it could look at r
      std::ostringstream msg;
      msg << "Rank 0 timed out in monitoredBarrier after " << timeout.count() << " ms";
      if (r > 1)
        msg << " (ranks 1 to " << r - 1 << " passed)";
      msg << "; ranks " << r << " to " << getSize() - 1 << " not checked";
      fail(msg.str());
    }
    try {
      store_->wait({prefix + std::to_string(r)}, left());
    } catch (const std::exception&) {
      missing.push_back(r);
      if (!waitAllRanks)
        break;
    }
  }
  if (!missing.empty()) {
    std::ostringstream msg;
    msg << (missing.size() == 1 ? "Rank " : "Ranks ");
    for (size_t i = 0; i < missing.size(); i++)
      msg << (i ? ", " : "") << missing[i];
    msg << " failed to pass monitoredBarrier in " << timeout.count() << " ms";
    fail(msg.str());
  }
  store_->set(done, std::vector<uint8_t>{1});
}

}  // namespace loom_c10d
