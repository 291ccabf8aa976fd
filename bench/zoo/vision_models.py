"""The vision sweep's architectures: torchvision (classification, detection, segmentation, video, optical
flow) and timm, each built with random weights (nothing is downloaded), with its inputs and its loss.

A *family* is the module that defines a builder: ``torchvision.models.resnet`` (resnet18 ...
wide_resnet101_2), ``torchvision.models.detection.retinanet``, ``timm.models.convnext``. The sweep runs
the smallest variant of each family: the builder with the fewest parameters at its default
configuration (``--variants all`` runs every builder), counted on the ``meta`` device so no weights are
allocated (``count()``, ``smallest()``). No name list says what is small.

A third source, ``transformers`` (its image-classification and semantic-segmentation auto-mappings,
tiny configs from ``configs.py``), needs neither torchvision nor timm: it is what the suite's own venv
(torch 2.13 CPU) can run, so the CI subset (tests/simulator/test_vision_subset.py) uses it.

Builders take ``weights=None`` and ``weights_backbone=None`` where they have those arguments
(torchvision's detection builders default to an ImageNet backbone download) and timm
``pretrained=False``. Classification heads have ``NUM_CLASSES`` outputs.

Inputs: attempts, smallest first (``ATTEMPTS``): images of 64 x 64 (video 4 frames of 64 x 64), then
the size the model was designed for (timm's ``pretrained_cfg`` input size, the crop size of a
torchvision builder's weights' transforms, else 224; video 16 frames),
because a model with fixed position embeddings or a deep stride only runs at that size. The CPU run
decides which attempt is used, as in the transformers sweep.
"""

from __future__ import annotations

import inspect
import math

import torch

NUM_CLASSES = 10
BATCH = 2
DET_CLASSES = 5  # detection: 4 object classes + background
TASKS = ("classification", "detection", "segmentation", "video", "optical_flow")
TV_MODULES = {  # torchvision.models submodule -> task (list_models(module=...))
    "classification": "", "detection": "detection", "segmentation": "segmentation",
    "video": "video", "optical_flow": "optical_flow",
}


class BuildError(Exception):
    """The builder rejected the arguments (a reason to try the next attempt)."""


# ---------------------------------------------------------------- catalogue


def torchvision_builders() -> list[dict]:
    import torchvision.models as tvm

    out = []
    for task, sub in TV_MODULES.items():
        module = tvm if not sub else getattr(tvm, sub)
        for name in tvm.list_models(module=module):
            fn = tvm.get_model_builder(name)
            if task == "classification" and fn.__module__.split(".")[2] in TV_MODULES.values():
                continue
            out.append({"source": "torchvision", "task": task, "name": name,
                        "family": fn.__module__.replace("torchvision.models.", "torchvision.")})
    return out


def timm_builders() -> list[dict]:
    import timm

    out = []
    for module in timm.list_modules():
        for name in timm.list_models(module=module):
            out.append({"source": "timm", "task": "classification", "name": name, "family": f"timm.{module}"})
    return out


TRANSFORMERS_TASKS = {"classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
                      "segmentation": "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES"}


def transformers_builders() -> list[dict]:
    from transformers.models.auto import modeling_auto

    out = []
    for task, mapping in TRANSFORMERS_TASKS.items():
        for model_type, cls in getattr(modeling_auto, mapping).items():
            cls = cls[0] if isinstance(cls, (tuple, list)) else cls
            out.append({"source": "transformers", "task": task, "name": model_type, "class": cls,
                        "family": f"transformers.{task}.{model_type}"})
    return out


def _build_transformers(spec: dict, meta: bool) -> torch.nn.Module:
    import configs
    import transformers

    cfg, _ = configs.build_config(spec["name"], configs.TINY)
    cfg.num_labels = NUM_CLASSES if spec["task"] == "classification" else DET_CLASSES
    cls = getattr(transformers, spec["class"])
    if meta:
        with torch.device("meta"):
            return cls(cfg)
    torch.manual_seed(0)
    return cls(cfg).float()


def build(spec: dict, size: int | None = None, meta: bool = False) -> torch.nn.Module:
    """The model of ``spec`` with random weights (``meta``: on the meta device, to count parameters).
    ``size``: the input size of the attempt, handed to builders that take one (timm ``img_size``)."""
    kw: dict = {}
    if spec["source"] == "transformers":  # the tiny config fixes the input size
        return _build_transformers(spec, meta)
    if spec["source"] == "diffusers":  # tiny configs, fixed input sizes (diffusers_models.py)
        import diffusers_models

        return diffusers_models.build(spec, meta)
    if spec["source"] == "timm":
        import timm

        kw = {"pretrained": False, "num_classes": NUM_CLASSES}
        if size is not None:
            kw["img_size"] = size
        make = lambda **k: timm.create_model(spec["name"], **k)  # noqa: E731
    else:
        import torchvision.models as tvm

        fn = tvm.get_model_builder(spec["name"])
        params = inspect.signature(fn).parameters
        kw = {k: None for k in ("weights", "weights_backbone") if k in params}
        task = spec["task"]
        if task == "classification" or task == "video":
            kw["num_classes"] = NUM_CLASSES
        elif task == "segmentation":
            kw["num_classes"] = DET_CLASSES
        elif task == "detection":
            kw["num_classes"] = 2 if "keypoint" in spec["name"] else DET_CLASSES
            if size is not None:
                kw.update(min_size=size, max_size=size)  # GeneralizedRCNNTransform (default 800 x 1333)
        make = lambda **k: fn(**k)  # noqa: E731
    try:
        if meta:
            with torch.device("meta"):
                return make(**kw)
        torch.manual_seed(0)
        return make(**kw)
    except TypeError as e:
        if size is not None and ("img_size" in str(e) or "min_size" in str(e) or "max_size" in str(e)):
            kw.pop("img_size", None)
            kw.pop("min_size", None)
            kw.pop("max_size", None)
            torch.manual_seed(0)
            return make(**kw) if not meta else build(spec, None, meta=True)
        raise


def without_randomness(model: torch.nn.Module) -> int:
    """Dropout and stochastic depth off (rates 0), in place; returns how many rates were zeroed.

    The two runs cannot draw the same masks: on the device, dropout's CPU kernel draws from the CPU
    generator and ``torch.rand(device=...)`` from the device's own (as on CUDA), so the CPU run's single
    stream and the device's two streams differ after the first draw. Rates found: ``p`` of dropout
    modules, ``p`` / ``drop_prob`` of drop-path modules (a class name with ``Drop`` or
    ``StochasticDepth``), and every float attribute whose name contains ``drop`` (attention dropout kept
    as a float and handed to SDPA). Random sampling too: torchvision's R-CNN samplers
    (``fg_bg_sampler``) draw a random subset of anchors and proposals with ``torch.randperm`` on the
    model's device; they take every candidate instead."""
    n = 0
    for m in model.modules():
        sampler = getattr(m, "fg_bg_sampler", None)  # torchvision R-CNN: a random subset of anchors / proposals
        if isinstance(getattr(sampler, "batch_size_per_image", None), int):
            sampler.batch_size_per_image = 1 << 30  # every candidate: the loss does not depend on randperm's order
            n += 1
        names = [k for k, v in vars(m).items() if isinstance(v, float) and "drop" in k.lower()]
        cls = type(m).__name__
        if isinstance(m, torch.nn.modules.dropout._DropoutNd) or "Drop" in cls or "StochasticDepth" in cls:
            names += [k for k in ("p", "drop_prob") if isinstance(vars(m).get(k), float)]
        for k in names:
            if getattr(m, k) != 0.0:
                setattr(m, k, 0.0)
                n += 1
    return n


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def count(sources=("torchvision", "timm"), progress=None) -> list[dict]:
    """Every builder of the sources with its id and parameter count (meta device; a builder that cannot
    be built on meta is counted by a real build; None when neither builds)."""
    specs = []
    if "torchvision" in sources:
        specs += torchvision_builders()
    if "timm" in sources:
        specs += timm_builders()
    if "transformers" in sources:
        specs += transformers_builders()
    if "diffusers" in sources:
        import diffusers_models

        specs += diffusers_models.builders()
    for s in specs:
        s["id"] = f"{s['source']}:{s['task']}:{s['name']}"
        try:
            s["params"] = n_params(build(s, meta=True))
        except Exception as e:  # noqa: BLE001 - counted by a real build, else left out of "smallest"
            try:
                s["params"] = n_params(build(s))
            except Exception:  # noqa: BLE001
                s["params"] = None
                s["count_error"] = f"{type(e).__name__}: {str(e)[:200]}"
        if progress:
            progress(s)
    return specs


def smallest(specs: list[dict]) -> list[dict]:
    """The builder with the fewest parameters of each family (in catalogue order); a family none of
    whose builders could be counted keeps its first builder (its failure is then reported)."""
    best: dict = {}
    for s in specs:
        cur = best.get(s["family"])
        if cur is None or (s["params"] is not None and (cur["params"] is None or s["params"] < cur["params"])):
            best[s["family"]] = s
    return [s for s in specs if best[s["family"]] is s]


# ---------------------------------------------------------------- inputs and loss

# (name, image size, video frames): None = the model's own size (timm pretrained_cfg, else 224 / 16)
ATTEMPTS = (("small", 64, 4), ("native", None, 16))


def native_size(spec: dict, model: torch.nn.Module) -> int:
    hf = getattr(model, "config", None)
    if hf is not None:  # transformers: the tiny config's image size
        size = getattr(getattr(hf, "vision_config", None) or hf, "image_size", None) or 32
        return int(size[-1] if isinstance(size, (list, tuple)) else size)
    cfg = getattr(model, "pretrained_cfg", None) or {}
    size = cfg.get("input_size")
    if size:
        return int(size[-1])
    if spec["source"] == "torchvision":  # the crop size of the builder's weights' transforms (inception: 299)
        import torchvision.models as tvm

        try:
            for w in tvm.get_model_weights(spec["name"]):
                crop = getattr(w.transforms, "keywords", {}).get("crop_size")
                if crop:
                    return int(min(crop) if isinstance(crop, (list, tuple)) else crop)
        except (ValueError, KeyError):  # no weights enum for this builder
            pass
    return 224


def make_inputs(spec: dict, model: torch.nn.Module, size: int, frames: int, seed: int = 1) -> dict:
    """Inputs and targets of one step (CPU tensors; the same for both devices)."""
    if spec["source"] == "diffusers":
        import diffusers_models

        return diffusers_models.make_inputs(spec, seed)
    g = torch.Generator().manual_seed(seed)
    task = spec["task"]
    chans = 3
    if task == "classification":
        cfg = getattr(model, "pretrained_cfg", None) or {}
        chans = int((cfg.get("input_size") or (getattr(getattr(model, "config", None), "num_channels", 3),))[0])
        return {"x": torch.randn(BATCH, chans, size, size, generator=g),
                "labels": torch.randint(0, NUM_CLASSES, (BATCH,), generator=g)}
    if task == "video":
        return {"x": torch.randn(BATCH, 3, frames, size, size, generator=g),
                "labels": torch.randint(0, NUM_CLASSES, (BATCH,), generator=g)}
    if task == "segmentation":
        return {"x": torch.randn(BATCH, 3, size, size, generator=g),
                "mask": torch.randint(0, DET_CLASSES, (BATCH, size, size), generator=g)}
    if task == "optical_flow":
        size = max(64, 8 * math.ceil(size / 8))
        return {"x": torch.randn(BATCH, 3, size, size, generator=g), "x2": torch.randn(BATCH, 3, size, size, generator=g),
                "flow": torch.randn(BATCH, 2, size, size, generator=g)}
    # detection: 3 boxes per image, inside the image, at least 8 pixels wide
    images, targets = [], []
    for _ in range(BATCH):
        xy = torch.rand(3, 2, generator=g) * (size * 0.6)
        wh = 8 + torch.rand(3, 2, generator=g) * (size * 0.35)
        boxes = torch.cat([xy, (xy + wh).clamp(max=size - 1)], dim=1)
        t = {"boxes": boxes, "labels": torch.randint(1, 2 if "keypoint" in spec["name"] else DET_CLASSES, (3,), generator=g)}
        if "mask" in spec["name"]:
            m = torch.zeros(3, size, size, dtype=torch.uint8)
            for i, b in enumerate(boxes.round().long().tolist()):
                m[i, b[1]:b[3], b[0]:b[2]] = 1
            t["masks"] = m
        if "keypoint" in spec["name"]:
            kx = boxes[:, None, 0] + torch.rand(3, 17, generator=g) * (boxes[:, None, 2] - boxes[:, None, 0])
            ky = boxes[:, None, 1] + torch.rand(3, 17, generator=g) * (boxes[:, None, 3] - boxes[:, None, 1])
            t["keypoints"] = torch.stack([kx, ky, torch.ones_like(kx)], dim=2)
        images.append(torch.randn(3, size, size, generator=g))
        targets.append(t)
    return {"images": images, "targets": targets}


def to(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to(v, device) for v in obj)
    return obj


def _tensors(out) -> list[torch.Tensor]:
    """The floating-point tensors of a model output (tensor, tuple/namedtuple, dict, list), in order."""
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, dict):
        return [t for v in out.values() for t in _tensors(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _tensors(v)]
    return []


def forward(spec: dict, model, inputs: dict, train: bool):
    """One forward; returns (loss or None, the output tensors to compare)."""
    task = spec["task"]
    F = torch.nn.functional
    if spec["source"] == "diffusers":
        import diffusers_models

        return diffusers_models.forward(spec, model, inputs, train)
    if task == "detection":
        if train:
            losses = model(inputs["images"], inputs["targets"])
            names = sorted(losses)
            return sum(losses[k] for k in names), [losses[k].reshape(1) for k in names]
        dets = model(inputs["images"])
        return None, [t for d in dets for k, t in sorted(d.items()) if k in ("boxes", "scores")]
    if task == "optical_flow":
        flows = model(inputs["x"], inputs["x2"], num_flow_updates=2)
        loss = sum(0.8 ** (len(flows) - 1 - i) * (f - inputs["flow"]).abs().mean() for i, f in enumerate(flows))
        return loss, [flows[-1]]
    if spec["source"] == "transformers":
        out = model(pixel_values=inputs["x"]).logits
        if task == "segmentation":  # logits at a fraction of the input size, as the models' own loss does
            out = F.interpolate(out, size=inputs["mask"].shape[-2:], mode="bilinear", align_corners=False)
    else:
        out = model(inputs["x"])
    outs = _tensors(out)
    if not outs:
        raise RuntimeError(f"the model returned no floating-point output ({type(out).__name__})")
    if task == "segmentation":
        target = inputs["mask"]
        loss = sum((0.5 if i else 1.0) * F.cross_entropy(o, target) for i, o in enumerate(outs))
    else:  # classification / video: every logits output (auxiliary heads weighted 0.3, as torchvision trains them)
        loss = sum((0.3 if i else 1.0) * F.cross_entropy(o, inputs["labels"]) for i, o in enumerate(outs) if o.dim() == 2)
        if not isinstance(loss, torch.Tensor):
            loss = outs[0].float().mean()
    return loss, outs
