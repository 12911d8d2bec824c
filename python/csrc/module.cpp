// module.cpp - loom.torch._c10d: the Python face of ProcessGroupLoom.
// libloom's symbols come from the process (loom/__init__.py loads the
// library with RTLD_GLOBAL before this module), so this file names no path.
#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>

#include "ProcessGroupLoom.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "Loom's torch.distributed backend (import loom.torch)";
  // Returned as a c10d::ProcessGroup: torch's own binding serves its methods,
  // which dispatch to ProcessGroupLoom's overrides.
  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout, const std::string& ranktable) {
        return c10::intrusive_ptr<c10d::ProcessGroup>(
            c10::make_intrusive<loom_c10d::ProcessGroupLoom>(store, rank, size, timeout,
                                                             ranktable));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::arg("ranktable") = std::string(), py::call_guard<py::gil_scoped_release>());
  m.attr("with_cuda") =
#ifdef LOOM_TORCH_WITH_CUDA
      true;
#else
      false;
#endif
}
