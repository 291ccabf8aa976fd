"""``from_pretrained`` in a shape-only run: the model is built from its config, as a real load builds it, and
its weights are placeholders instead of the checkpoint's values (every device tensor is fake anyway), so
an 8B model's 16 GB of weight files are neither downloaded nor read.

The hook is at transformers' own loading layer, so every model class (and ``AutoModel*``) takes it:

* ``modeling_utils._get_resolved_checkpoint_files`` resolves no weight file (nothing is looked up on the hub
  or downloaded; the config still comes from the local folder or the user's HF cache, as transformers
  finds it, ``HF_HUB_OFFLINE`` and ``local_files_only`` respected). A GGUF file is read as usual.
* ``PreTrainedModel._load_pretrained_model`` gets a state dict of placeholders instead of files: one per key
  of the model built on the meta device (its shape and dtype; tied copies left out, as a checkpoint leaves
  them), each a fake CPU tensor (no bytes). transformers' own loading then runs as for a checkpoint: dtype
  (``keep_in_fp32`` modules), ``device_map`` placement (a device map on ``neuron`` copies each weight to
  the device, counted as a real load's copies), tying, non-persistent buffers, ``eval()``.
* ``dtype="auto"`` (the default) takes the config's dtype; without one, PyTorch's default dtype (a real
  load reads the first weight's dtype from the file).

diffusers' ``ModelMixin.from_pretrained`` (UNets, VAEs, transformers of diffusion models) likewise: no index or
weight file resolved, a placeholder per key loaded through diffusers' own loading (_patch_diffusers).

A model on the CPU holds fake CPU weights: host work on them (``.to(torch.bfloat16)``, ``requires_grad_``)
is neither a device call nor memory, and ``.to("neuron")`` or FSDP moves them as it moves real ones. The
call's line is a placeholder (NP911: ``from_pretrained returned placeholder weights``).
"""

from __future__ import annotations

import functools
import os

import torch
from torch.utils._python_dispatch import _disable_current_modes

from . import values
from ..after_import import after_import

PLACEHOLDER_WEIGHTS = "placeholder weights (the config's shapes and dtypes; the weight files were not read)"
_MODULE = "transformers.modeling_utils"


_fake_mode = None  # the run's FakeTensorMode (mode.py)
_DIFFUSERS = "diffusers.models.modeling_utils"
_NOT_READ = "<neuron-port: the weights are not read in a shape-only run>"


class _Placeholders(dict):
    """diffusers' state dict of a checkpoint that was not read: filled from the model when it is loaded."""


def install(fake_mode) -> None:
    global _fake_mode
    _fake_mode = fake_mode
    after_import(_MODULE, _patch)
    after_import(_DIFFUSERS, _patch_diffusers)


def host_fake(like: torch.Tensor) -> torch.Tensor:
    """A fake CPU tensor of ``like``'s shape, strides and dtype (a weight that was not read: no bytes)."""
    with _disable_current_modes(), _fake_mode:
        return torch.empty_strided(like.size(), like.stride(), dtype=like.dtype, device="cpu")


def _placeholders(model) -> dict:
    """A placeholder per key the checkpoint would hold: the meta model's state dict, tied copies left out."""
    tied = set(getattr(model, "all_tied_weights_keys", None) or ())
    return {key: host_fake(t) for key, t in model.state_dict().items() if key not in tied}


def _patch(modeling_utils) -> None:
    model_class = getattr(modeling_utils, "PreTrainedModel", None)
    needed = ("_get_resolved_checkpoint_files", "_get_dtype")
    if model_class is None or not all(hasattr(modeling_utils, n) for n in needed) or not hasattr(
            model_class, "_load_pretrained_model"):
        return  # another transformers: it loads as usual (the weights are read)
    resolve, get_dtype = modeling_utils._get_resolved_checkpoint_files, modeling_utils._get_dtype
    load = model_class._load_pretrained_model
    if getattr(resolve, "_neuron_port_placeholders", False):
        return

    @functools.wraps(resolve)
    def _get_resolved_checkpoint_files(*args, **kwargs):
        gguf_file = kwargs.get("gguf_file", args[2] if len(args) > 2 else None)
        if gguf_file is not None:
            return resolve(*args, **kwargs)
        return None, None  # no weight file: nothing looked up, downloaded or read

    @functools.wraps(get_dtype)
    def _get_dtype(dtype, checkpoint_files, config, *args, **kwargs):
        state_dict = kwargs.get("state_dict", args[1] if len(args) > 1 else None)
        if (dtype == "auto" and checkpoint_files is None and state_dict is None
                and getattr(config, "dtype", None) is None):
            dtype = None  # the file's dtype is not read: PyTorch's default
        return get_dtype(dtype, checkpoint_files, config, *args, **kwargs)

    @functools.wraps(load)
    def _load_pretrained_model(model, state_dict, checkpoint_files, load_config, *args, **kwargs):
        if state_dict is not None or checkpoint_files is not None:
            return load(model, state_dict, checkpoint_files, load_config, *args, **kwargs)
        import dataclasses

        values.note("placeholder", "from_pretrained", value=PLACEHOLDER_WEIGHTS)
        state_dict = _placeholders(model)
        # the placeholders have the model's own keys: no checkpoint renaming or conversion applies
        load_config = dataclasses.replace(load_config, weight_mapping=None)
        # loaded on this thread: a worker thread has neither dispatch mode (its device copies would go uncounted)
        was = os.environ.get("HF_DEACTIVATE_ASYNC_LOAD")
        os.environ["HF_DEACTIVATE_ASYNC_LOAD"] = "1"
        try:
            return load(model, state_dict, None, load_config, *args, **kwargs)
        finally:
            if was is None:
                os.environ.pop("HF_DEACTIVATE_ASYNC_LOAD", None)
            else:
                os.environ["HF_DEACTIVATE_ASYNC_LOAD"] = was

    _get_resolved_checkpoint_files._neuron_port_placeholders = True
    modeling_utils._get_resolved_checkpoint_files = _get_resolved_checkpoint_files
    modeling_utils._get_dtype = _get_dtype
    model_class._load_pretrained_model = staticmethod(_load_pretrained_model)


def _plain_meta_parameters(model) -> None:
    """accelerate's ``init_empty_weights`` moves each parameter to ``meta`` with ``.to("meta")``, which the fake
    mode answers with a fake on ``meta``; accelerate then rebuilds each loaded weight as ``type(old)(value)``,
    which a ``FakeTensor`` class cannot be called as. Plain meta parameters, as without the fake mode."""
    from torch._subclasses.fake_tensor import FakeTensor

    for module in model.modules():
        for name, p in module._parameters.items():
            if isinstance(p, FakeTensor) and p.fake_device.type == "meta":
                with _disable_current_modes():
                    meta = torch.empty_strided(p.size(), p.stride(), dtype=p.dtype, device="meta")
                module._parameters[name] = torch.nn.Parameter(meta, requires_grad=p.requires_grad)


def _patch_diffusers(modeling_utils) -> None:
    """diffusers' ``ModelMixin.from_pretrained``: no index or weight file is resolved (``_fetch_index_file``,
    ``_get_model_file``), ``load_state_dict`` of the file not read gives an empty state dict, which
    ``_load_pretrained_model`` fills with a placeholder per key of the model built on the meta device before
    diffusers' own loading runs (dtype, ``keep_in_fp32`` modules, ``device_map``)."""
    model_class = getattr(modeling_utils, "ModelMixin", None)
    needed = ("_fetch_index_file", "_fetch_index_file_legacy", "_get_model_file", "load_state_dict")
    if model_class is None or not all(hasattr(modeling_utils, n) for n in needed) or not hasattr(
            model_class, "_load_pretrained_model"):
        return
    if getattr(modeling_utils._get_model_file, "_neuron_port_placeholders", False):
        return
    read, load = modeling_utils.load_state_dict, model_class._load_pretrained_model.__func__

    def no_index(*args, **kwargs):
        return None

    def _get_model_file(*args, **kwargs):
        return _NOT_READ

    @functools.wraps(read)
    def load_state_dict(checkpoint_file, *args, **kwargs):
        return _Placeholders() if checkpoint_file == _NOT_READ else read(checkpoint_file, *args, **kwargs)

    @functools.wraps(load)
    def _load_pretrained_model(cls, model, state_dict, resolved_model_file, name_or_path, loaded_keys, *args,
                               **kwargs):
        if isinstance(state_dict, _Placeholders):
            values.note("placeholder", "from_pretrained", value=PLACEHOLDER_WEIGHTS)
            _plain_meta_parameters(model)
            state_dict.update(_placeholders(model))
            loaded_keys = list(state_dict)
        return load(cls, model, state_dict, resolved_model_file, name_or_path, loaded_keys, *args, **kwargs)

    _get_model_file._neuron_port_placeholders = True
    modeling_utils._fetch_index_file = modeling_utils._fetch_index_file_legacy = no_index
    modeling_utils._get_model_file = _get_model_file
    modeling_utils.load_state_dict = load_state_dict
    model_class._load_pretrained_model = classmethod(_load_pretrained_model)
