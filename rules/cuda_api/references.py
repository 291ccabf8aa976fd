"""Matching shared by NP201 and NP202: a reference to ``torch.cuda.<key>`` whose key is in a table.

``TorchCudaReference`` is a ``QualifiedNameRule``: it is asked about the outermost Name/Attribute of each
chain (``torch.cuda.synchronize``, ``th.cuda.nvtx``, ``max_memory_allocated`` imported from torch.cuda)
whose qualified name its ``lookup`` finds, and each rule reports it in ``on_reference``.
"""

from __future__ import annotations

from typing import ClassVar, Optional

from neuron_port.rules.helpers.table_rule import QualifiedNameRule

PREFIX = "torch.cuda."


def cuda_api_key(qualname: Optional[str], table: dict) -> Optional[str]:
    if qualname is None or not qualname.startswith(PREFIX):
        return None
    key = qualname[len(PREFIX):]
    return key if key in table else None


class TorchCudaReference(QualifiedNameRule[str]):
    """Shared matching: the outermost Name/Attribute whose qualified name is ``torch.cuda.<key>`` with
    ``key`` in ``TABLE``; the key handed to ``on_reference`` is the name relative to ``torch.cuda``."""

    TABLE: ClassVar[dict] = {}

    def lookup(self, qualname: str) -> Optional[str]:
        return cuda_api_key(qualname, self.TABLE)
