"""The simulator's own kernels return the strides PyTorch's fake kernels declare for a neuron tensor, in
every input layout (issue 39): a compiled graph reads each intermediate with its traced strides.

bench/zoo/stride_audit.py runs OpInfo samples (and the fused RNN cells, which op_db does not reach)
contiguous, as channels_last views, transposed and sliced, forward and backward, and compares every ATen
call's real output strides with the same call on fake tensors. Here: the ops the simulator implements
itself (csrc/aten: convolution.cpp, sdpa.cpp, rnn.cpp, pixel_shuffle.cpp) and the norms whose backward
kernels assume their inputs share a layout. On 858089d the convolutions, the LSTM cell and pixel_shuffle
fail (pixel_shuffle: the CPU kernel, which the simulator then ran for it, keeps channels_last)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO, simulator_env

pytestmark = pytest.mark.slow
OPS = ("nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.conv3d", "nn.functional.conv_transpose2d",
       "nn.functional.scaled_dot_product_attention", "nn.functional.group_norm", "nn.functional.batch_norm",
       "nn.functional.layer_norm", "nn.functional.pixel_shuffle", "fused_rnn_cells")


def test_override_kernels_return_the_strides_of_their_fake_kernels(sim_build, tmp_path):
    out = tmp_path / "audit.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "zoo" / "stride_audit.py"), "--ops", ",".join(OPS),
                           "--out", str(out)], cwd=tmp_path, env=simulator_env(NEURON_PORT_SIMULATE="1"),
                          capture_output=True, text=True, timeout=600)
    assert out.is_file(), proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["runs"] >= 100, doc  # every op ran in every layout on both devices
    ran = {k.split("/", 1)[0] for k in doc["errors"]}
    assert not ran & set(OPS), doc["errors"]
    assert not doc["simulator_only"], json.dumps(doc["simulator_only"], indent=1)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
