"""torch.compile(fn, backend="coil", mode=..., options=...) checks coil's mode and options when
torch.compile is called, instead of at the compiled function's first call.

torch.compile gives a backend other than Inductor its mode and options only when Dynamo calls it
with a graph: torch._TorchCompileWrapper keeps them until then. What torch.compile does run at
once: it looks the backend up (the first time, importing coil through its entry point), then
hands the wrapper to Dynamo, which reads the wrapper's `compiler_name`
(torch._dynamo.eval_frame.get_compiler_fn). install() makes that attribute of torch's wrapper
class a property that, for a wrapper of coil's backend, checks the options it holds
(config.for_compile: unknown names and values are ValueErrors listing what is valid); for any
other backend it is the plain attribute it was. install() runs when coil is imported, so before
that read in both cases: the user imported coil, or torch.compile's lookup imported it.

On a torch without that class or attribute nothing is installed and the options are checked at
the first call, as coil_backend checks them again there in any case. torch.compile(...,
disable=True) and TORCHDYNAMO_DISABLE=1 never reach Dynamo, so they check nothing.
Tests: tests/python/test_options.py (test_bad_options_fail_at_torch_compile and the subprocess
test for a process that never imports coil).
"""

from __future__ import annotations

import torch

from coil import config


class _CheckedCompilerName:
    """torch._TorchCompileWrapper.compiler_name: the instance's own value, read after checking
    coil's options when the wrapper's backend is coil's."""

    def __get__(self, wrapper, owner=None):
        if wrapper is None:
            return self
        fields = vars(wrapper)
        if _is_coil(fields.get("compiler_fn")):
            kwargs = fields.get("kwargs") or {}
            config.for_compile(kwargs.get("mode"), kwargs.get("options"))
        if "compiler_name" not in fields:
            raise AttributeError("compiler_name")
        return fields["compiler_name"]

    def __set__(self, wrapper, value):
        vars(wrapper)["compiler_name"] = value


def _is_coil(compiler_fn) -> bool:
    from coil.backend import coil_backend

    return compiler_fn is coil_backend


def install() -> None:
    """Makes torch.compile check coil's options when it is called (see the module's text)."""
    wrapper = getattr(torch, "_TorchCompileWrapper", None)
    if wrapper is None or isinstance(vars(wrapper).get("compiler_name"), _CheckedCompilerName):
        return
    if "compiler_name" in vars(wrapper):
        return  # a class attribute this module does not know: leave it alone
    wrapper.compiler_name = _CheckedCompilerName()
