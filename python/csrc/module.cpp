// module.cpp - loom.torch._c10d: the Python face of ProcessGroupLoom.
// libloom's symbols come from the process (loom/__init__.py loads the
// library with RTLD_GLOBAL before this module), so this file names no path.
#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>

#include "ProcessGroupLoom.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "Loom's torch.distributed backend (import loom.torch)";
  // Returned as torch's own type (c10d::Backend on torch >= 2.0, else
  // c10d::ProcessGroup): torch's binding serves its methods, which dispatch
  // to ProcessGroupLoom's overrides.
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, const std::string& ranktable,
         const std::string& host) {
        return c10::intrusive_ptr<loom_c10d::compat::Base>(
            c10::make_intrusive<loom_c10d::ProcessGroupLoom>(store, rank, size, timeout,
                                                             ranktable, host));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("ranktable") = std::string(), py::arg("host") = std::string(),
      py::call_guard<py::gil_scoped_release>());
  auto loomOf = [](const c10::intrusive_ptr<loom_c10d::compat::Base>& b) {
    auto* pg = dynamic_cast<loom_c10d::ProcessGroupLoom*>(b.get());
    if (!pg)
      throw std::invalid_argument("loom: not a Loom group (backend " + b->getBackendName() +
                                  ")");
    return pg;
  };
  m.def(
      "abort", [loomOf](const c10::intrusive_ptr<loom_c10d::compat::Base>& b) {
        loomOf(b)->abort();
      },
      "every pending and later call of the group fails at once");
  m.def(
      "shutdown", [loomOf](const c10::intrusive_ptr<loom_c10d::compat::Base>& b) {
        loomOf(b)->shutdown();
      },
      "wait for the group's pending calls (bounded by its timeout), then abort it");
  m.def(
      "timeout_ms", [loomOf](const c10::intrusive_ptr<loom_c10d::compat::Base>& b) {
        return loomOf(b)->timeout().count();
      });
  m.attr("backend_api") = static_cast<bool>(LOOM_TORCH_BACKEND_API);
  m.attr("with_cuda") =
#ifdef LOOM_TORCH_WITH_CUDA
      true;
#else
      false;
#endif
}
