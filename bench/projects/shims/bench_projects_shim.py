"""Start-up shims of the bench venv (bench/projects/.work/venv), imported by a .pth file that setup.py
writes there. Not part of neuron-port; nothing here runs outside the real-project scoreboard.

1. torchvision's PyPI wheel carries ops compiled against the CUDA build of torch; with torch 2.13.0+cpu its
   `_C` extension does not load and `import torchvision` dies registering fake kernels for ops that do not
   exist. When the extension is missing, the ops' schemas are defined here (no kernels: nms, roi_align and
   the like raise if called; no project of the corpus trains through them), so the datasets, transforms
   and models import as on a GPU host.
2. BENCH_FAKE_TORCHVISION=1: the torchvision datasets that download (MNIST, FashionMNIST, CIFAR10/100,
   STL10) are replaced by synthetic ones of the same item format (PIL image, int label), seeded, with
   BENCH_FAKE_N items (default 64): the run needs no network, and the project's own data pipeline
   (transforms, DataLoader) runs unchanged.
3. BENCH_SEED=N: right after the program's first `import torch`, seed torch, numpy and random with N, so a
   project that never seeds (PyTorch-GAN) draws the same initial weights in the original and the rewritten
   run and their losses can be compared.
4. BENCH_NUMPY_INF=1: `numpy.Inf`, which NumPy 2.0 removed (Informer2020's EarlyStopping reads it), is set
   back to `numpy.inf` when numpy is first imported: the bench venv has NumPy 2 and the project predates it.
"""

import os
import sys

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width,"
    " int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width,"
    " int sampling_ratio, bool aligned) -> Tensor",
    "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width,"
    " int sampling_ratio) -> (Tensor, Tensor)",
    "_ps_roi_align_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale,"
    " SymInt pooled_height, SymInt pooled_width, int sampling_ratio, SymInt batch_size, SymInt channels,"
    " SymInt height, SymInt width) -> Tensor",
    "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width)"
    " -> (Tensor, Tensor)",
    "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, float spatial_scale, SymInt pooled_height,"
    " SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height, SymInt width) -> Tensor",
    "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width)"
    " -> (Tensor, Tensor)",
    "_ps_roi_pool_backward(Tensor grad, Tensor rois, Tensor channel_mapping, float spatial_scale,"
    " SymInt pooled_height, SymInt pooled_width, SymInt batch_size, SymInt channels, SymInt height,"
    " SymInt width) -> Tensor",
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h,"
    " SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups,"
    " SymInt offset_groups, bool use_mask) -> Tensor",
    "_deform_conv2d_backward(Tensor grad, Tensor input, Tensor weight, Tensor offset, Tensor mask,"
    " Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h,"
    " SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask)"
    " -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
)


class _TorchvisionFinder:
    """Runs `_prepare()` once, right before the first `import torchvision`."""

    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        _prepare()
        return None


_LIB = None


def _prepare():
    global _LIB
    import importlib.util

    import torch

    spec = importlib.util.find_spec("torchvision")
    so = os.path.join(os.path.dirname(spec.origin), "_C.so")
    try:
        torch.ops.load_library(so)
        return
    except OSError:
        pass
    _LIB = torch.library.Library("torchvision", "DEF")
    for schema in _SCHEMAS:
        _LIB.define(schema)
    if os.environ.get("BENCH_FAKE_TORCHVISION") == "1":
        sys.meta_path.insert(0, _DatasetsFinder())


class _AfterImport:
    """Runs `after(module)` right after the module `name` is first imported."""

    def __init__(self, name, after):
        self.name, self.after = name, after

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = _find_next(name, path)
        orig_exec = spec.loader.exec_module
        after = self.after

        def exec_module(module):
            orig_exec(module)
            after(module)

        spec.loader.exec_module = exec_module
        return spec


def _seed(torch):
    import random

    seed = int(os.environ["BENCH_SEED"])
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass


class _DatasetsFinder:
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision.datasets":
            return None
        sys.meta_path.remove(self)
        spec = _find_next(name, path)
        loader = spec.loader
        orig_exec = loader.exec_module

        def exec_module(module):
            orig_exec(module)
            _fake_datasets(module)

        loader.exec_module = exec_module
        return spec


def _find_next(name, path):
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(name, path)
        if spec is not None:
            return spec
    raise ImportError(name)


def _fake_datasets(datasets):
    import numpy as np
    from PIL import Image

    count = int(os.environ.get("BENCH_FAKE_N", "64"))

    def make(class_name, size, mode, classes, splits=False):
        # the same attribute types as torchvision's own classes: MNIST keeps uint8 tensors (data, targets),
        # CIFAR and STL10 numpy arrays and lists (projects index them directly)
        class Fake(datasets.VisionDataset):
            def __init__(self, root=".", train=True, transform=None, target_transform=None, download=False,
                         split="train", **_):
                import torch

                super().__init__(str(root), transform=transform, target_transform=target_transform)
                seed = (0 if (train if not splits else split.startswith("train")) else 1)
                rng = np.random.default_rng(seed + len(class_name))
                shape = (count, size, size, 3) if mode == "RGB" else (count, size, size)
                data = rng.integers(0, 256, size=shape, dtype=np.uint8)
                targets = [int(t) for t in rng.integers(0, classes, size=count)]
                if mode == "L":
                    self.data, self.targets = torch.from_numpy(data), torch.tensor(targets)
                else:
                    self.data, self.targets = data, targets
                self.labels = np.array(targets)
                self.classes = [str(i) for i in range(classes)]

            def __len__(self):
                return count

            def __getitem__(self, index):
                data = self.data[index]
                img = Image.fromarray(data.numpy() if hasattr(data, "numpy") else data, mode=mode)
                target = int(self.targets[index])
                if self.transform is not None:
                    img = self.transform(img)
                if self.target_transform is not None:
                    target = self.target_transform(target)
                return img, target

        Fake.__name__ = Fake.__qualname__ = class_name
        Fake.__module__ = datasets.__name__  # pickled by reference (spawned workers get the same shim)
        setattr(datasets, class_name, Fake)

    make("MNIST", 28, "L", 10)
    make("FashionMNIST", 28, "L", 10)
    make("CIFAR10", 32, "RGB", 10)
    make("CIFAR100", 32, "RGB", 100)
    make("STL10", 96, "RGB", 10, splits=True)


sys.meta_path.insert(0, _TorchvisionFinder())
if os.environ.get("BENCH_SEED") and "torch" not in sys.modules:
    sys.meta_path.insert(0, _AfterImport("torch", _seed))
if os.environ.get("BENCH_NUMPY_INF") and "numpy" not in sys.modules:
    sys.meta_path.insert(0, _AfterImport("numpy", lambda numpy: setattr(numpy, "Inf", numpy.inf)))
