"""Capabilities stay capabilities (issue 34 item 3) and compiled CUDA extensions are reported at the import
(item 4): each case the 3-10 lines a real project had, through the public API. On 858089d every one of these was
renamed as a device (or, for the extension, not reported)."""

from __future__ import annotations

import textwrap

from neuron_port.api import rewrite_source


def _run(source: str):
    source = textwrap.dedent(source)
    code, findings = rewrite_source(source, path="m.py")
    return source, code, findings


def test_a_cuda_test_choosing_another_library_s_gpu_build_is_kept():
    source, code, findings = _run("""\
        import torch
        import onnxruntime as ort


        def session(path):
            if torch.cuda.is_available():
                providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
            else:
                providers = ["CPUExecutionProvider"]
            return ort.InferenceSession(path, providers=providers)


        pkg = "onnxruntime-gpu" if torch.cuda.is_available() else "onnxruntime"
        tf = "tensorflow" if torch.cuda.is_available() else "tensorflow-cpu"
        """)
    assert code == source  # on Trainium the CPU builds and providers, as on a CUDA-less host
    unsafe = [f for f in findings if f.code == "NP201"]
    assert len(unsafe) == 3 and all("unsafe" in f.message for f in unsafe), [f.message for f in findings]


def test_the_nccl_availability_ternary_is_rewritten_whole():
    _, code, _ = _run("""\
        import torch.distributed as dist
        backend = "nccl" if dist.is_nccl_available() else "gloo"
        """)
    assert 'backend = "neuron" if dist.is_backend_available("neuron") else "gloo"' in code


def test_hiding_every_gpu_is_not_renamed_to_a_core_range():
    source, code, findings = _run("""\
        import os
        os.environ["CUDA_VISIBLE_DEVICES"] = "-1"
        """)
    assert code == source and "NEURON_RT_VISIBLE_CORES" not in code
    (np505,) = [f for f in findings if f.code == "NP505"]
    assert "hides every GPU" in np505.message and not np505.fix.available


def test_a_string_enum_member_is_not_a_device():
    source, code, _ = _run("""\
        import enum


        class TimerType(str, enum.Enum):
            CPU = "cpu"
            CUDA = "cuda"
        """)
    assert code == source


def test_a_compiled_cuda_extension_is_reported_at_its_import_and_its_wrapper_kept():
    source, code, findings = _run("""\
        import torch
        import selective_scan_cuda


        class SelectiveScanFn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, u, delta):
                assert u.is_cuda
                return selective_scan_cuda.fwd(u, delta)


        def reference(u, delta):
            return (u * delta).cumsum(-1).to("cuda")
        """)
    (np718,) = [f for f in findings if f.code == "NP718"]
    assert np718.line == 2 and "selective_scan_ref" in np718.message and "`SelectiveScanFn`" in np718.message
    assert "assert u.is_cuda" in code  # the wrapper is kept unedited
    assert '.to("neuron")' in code  # the portable reference is ported
