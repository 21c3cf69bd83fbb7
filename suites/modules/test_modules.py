"""The modules suite: every ModuleInfo of the wheel's ``module_db`` on the device
under test, forward and backward compared with CPU, per dtype.

Run it through torchconform (``torchconform run --suite modules`` or
``pytest suites/modules --tc-device refdev``); without ``--tc-device`` PyTorch
instantiates it for CPU only.

The class is ``TestModule`` and the test ``test_cpu_gpu_parity``, the names
upstream's ``test/test_modules.py`` uses for the same comparison, so the skips,
expected failures and tolerance overrides that ModuleInfo declares for it apply
here too, and a missing operator is classified exactly as in the ops suite.

One test per module, dtype and training mode:
1. build the module on CPU, copy it to the device (same weights);
2. forward the same inputs on both; compare every output with CPU;
3. for floating dtypes, backward the summed outputs on both; compare the
   gradients of the inputs and of every parameter with CPU.
The failure message says which phase differed.
"""
import copy
import unittest

import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase, run_tests

from torchconform.suites.common import (
    assert_close_to_cpu, missing_op_guard, name_device_test_base, scalar_loss, tensors_in, to_cpu, tolerances,
)
from torchconform.suites.modules.selection import allowed_dtypes, select_modules

_MODULES = select_modules(module_db)

# Outputs are random in training mode (a different RNG on each device), so the
# comparison with CPU only means something in eval mode.
RANDOM_IN_TRAINING = {"nn.Dropout", "nn.Dropout1d", "nn.Dropout2d", "nn.Dropout3d", "nn.AlphaDropout",
                      "nn.FeatureAlphaDropout", "nn.RReLU", "nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d",
                      "nn.TransformerEncoderLayer", "nn.TransformerDecoderLayer", "nn.TransformerEncoder",
                      "nn.Transformer", "nn.MultiheadAttention"}


def _copy_to(x, device):
    """Fresh leaf copies on ``device``, keeping requires_grad (nested structures too)."""
    if isinstance(x, torch.Tensor):
        y = x.detach().to(device)
        return y.requires_grad_(x.requires_grad) if (y.is_floating_point() or y.is_complex()) else y
    if isinstance(x, (list, tuple)):
        items = [_copy_to(v, device) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    if isinstance(x, dict):
        return {k: _copy_to(v, device) for k, v in x.items()}
    return x




def _has_uninitialized(module) -> bool:
    return any(isinstance(p, torch.nn.parameter.UninitializedParameter) for p in module.parameters())


class TestModule(TestCase):
    @modules(_MODULES, allowed_dtypes=allowed_dtypes())
    def test_cpu_gpu_parity(self, device, dtype, module_info, training):
        if training and module_info.name in RANDOM_IN_TRAINING:
            raise unittest.SkipTest(f"{module_info.name} is random in training mode; compared in eval mode only")
        inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype,
                                                requires_grad=True, training=training)
        ran = 0
        with missing_op_guard(self):
            for module_input in inputs:
                if module_input.forward_input is None:
                    continue
                if self._compare_one(device, dtype, module_info, training, module_input):
                    ran += 1
        if not ran:
            raise unittest.SkipTest(f"no input of {module_info.name} could be computed on CPU; nothing to compare")

    def _compare_one(self, device, dtype, module_info, training, module_input) -> bool:
        c_args, c_kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
        f_args, f_kwargs = module_input.forward_input.args, module_input.forward_input.kwargs
        cpu_args, cpu_kwargs = _copy_to(f_args, "cpu"), _copy_to(f_kwargs, "cpu")
        try:
            torch.manual_seed(0)
            m_cpu = module_info.module_cls(*c_args, **c_kwargs).to(dtype)
            m_cpu.train(training)
            if _has_uninitialized(m_cpu):
                # Lazy modules initialise on their first forward: do it once on CPU
                # so that both sides start from the same weights.
                with torch.no_grad():
                    m_cpu(*_copy_to(f_args, "cpu"), **_copy_to(f_kwargs, "cpu"))
            m_dev = copy.deepcopy(m_cpu)
            expected = m_cpu(*cpu_args, **cpu_kwargs)
        except Exception:
            # PyTorch itself cannot run this input on CPU: nothing to compare against.
            return False
        m_dev = m_dev.to(device)
        dev_args, dev_kwargs = _copy_to(f_args, device), _copy_to(f_kwargs, device)
        actual = m_dev(*dev_args, **dev_kwargs)
        assert_close_to_cpu(self, to_cpu(actual), to_cpu(expected), **tolerances(dtype),
                            msg=lambda m: f"forward output of {module_info.name} differs from CPU: {m}")
        if not (dtype.is_floating_point or dtype.is_complex):
            return True
        cpu_loss, dev_loss = scalar_loss(expected), scalar_loss(actual)
        if cpu_loss is None or dev_loss is None:
            return True
        cpu_leaves = [t for t in tensors_in([cpu_args, cpu_kwargs]) if t.requires_grad] + list(m_cpu.parameters())
        dev_leaves = [t for t in tensors_in([dev_args, dev_kwargs]) if t.requires_grad] + list(m_dev.parameters())
        grads_expected = torch.autograd.grad(cpu_loss, cpu_leaves, allow_unused=True)
        grads_actual = torch.autograd.grad(dev_loss, dev_leaves, allow_unused=True)
        assert_close_to_cpu(self, to_cpu(list(grads_actual)), list(grads_expected), **tolerances(dtype),
                            msg=lambda m: f"backward gradients of {module_info.name} differ from CPU: {m}")
        return True


# Classes read TestModule<DEVICE> (e.g. TestModuleREFDEV), as in the ops suite.
name_device_test_base()
instantiate_device_type_tests(TestModule, globals())

if __name__ == "__main__":
    run_tests()
