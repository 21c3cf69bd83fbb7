// Autocast: without a kernel for AutocastPrivateUse1 every op fails inside
// torch.autocast(<name>).  Matmul-like ops run in the lower precision (as on
// CUDA); everything else falls through unchanged.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace refdev {

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  using namespace at::autocast;
  KERNEL_PRIVATEUSEONE(mm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(bmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(baddbmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(matmul, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(linear, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv1d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv2d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv3d, lower_precision_fp)
}

}  // namespace refdev
