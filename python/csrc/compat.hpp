// compat.hpp - what differs between the torch versions the backend builds
// against, in one place: torch >= 2.0 takes a third-party backend as a
// c10d::Backend (torch wraps it in its own ProcessGroup, per device);
// torch 1.13 takes a c10d::ProcessGroup. Everything else is one source.
#pragma once

#include <torch/version.h>

#include <vector>

#include <ATen/ATen.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace loom_c10d {
namespace compat {

#if TORCH_VERSION_MAJOR >= 2
using Base = c10d::Backend;
#define LOOM_TORCH_BACKEND_API 1
#else
using Base = c10d::ProcessGroup;
#define LOOM_TORCH_BACKEND_API 0
#endif

// The tensors holding PREMUL_SUM's factor (none when it is a double).
inline std::vector<at::Tensor> premulTensors(const c10d::NCCLPreMulSumSupplement& s) {
#if TORCH_VERSION_MAJOR >= 2
  if (s.tensor_factor.defined())
    return {s.tensor_factor};
  return {};
#else
  return s.tensor_factors;
#endif
}

}  // namespace compat
}  // namespace loom_c10d
