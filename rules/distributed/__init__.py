"""NP5xx: distributed training, sharding and launch files.

Codes (stable), and the module that holds each:

- NP501 ``nccl-backend`` (``nccl_backend.py``): ``"nccl"`` process-group backends -> ``"neuron"``.
- NP502 ``distributed-set-device``: retired (not reused). It removed ``set_device(local_rank)``, the old
  model of one visible core per process; TorchNeuron's core is ``neuron:<LOCAL_RANK>``, so NP201 renames the
  call (``torch.neuron.set_device(local_rank)``).
- NP503 ``ddp-device-ids`` (``data_parallel.py``): DDP over several devices per process (``device_ids=[0, 1]``);
  ``device_ids=[local_rank]`` is kept.
- NP504 ``cuda-device-mesh`` (``topology.py``): ``init_device_mesh("cuda", ...)`` / ``DeviceMesh("cuda", ...)``.
- NP505 ``cuda-visible-devices`` (``environment.py``): ``CUDA_VISIBLE_DEVICES`` -> ``NEURON_RT_VISIBLE_CORES``
  (unsafe).
- NP506 ``gpu-count-world-size`` (``topology.py``): ``torch.cuda.device_count()`` as a world size / ``nprocs``
  (advice).
- NP507 ``cuda-env-var`` (``environment.py``): ``NCCL_*`` / ``PYTORCH_CUDA_ALLOC_CONF`` /
  ``CUDA_LAUNCH_BLOCKING`` settings.
- NP508 ``data-parallel`` (``data_parallel.py``): ``nn.DataParallel``.
- NP509 ``p2p-communication`` (``collectives.py``): ``dist.send/recv/isend/irecv/batch_isend_irecv``.
- NP510 ``barrier-non-default-group`` (``collectives.py``): ``dist.barrier(group=...)``.
- NP511 ``uneven-all-to-all`` (``collectives.py``): ``all_to_all_single`` with split sizes.
- NP512 ``cuda-nccl-module`` (``nccl_module.py``): ``torch.cuda.nccl`` (``nccl.version()``, single-process
  NCCL collectives), reported with advice.
- NP513 ``device-shared-memory`` (``shared_memory.py``): a model or tensor moved to the device, then
  ``share_memory()`` or handed to a ``torch.multiprocessing`` Process / spawn (Hogwild).
- NP520 ``launch-cuda-visible-devices`` and NP521 ``launch-process-count`` (``launch_processes.py``);
  NP522 ``config-cuda-device``, NP523 ``config-nccl-backend``, NP524 ``launch-cuda-env-var`` and NP525
  ``launch-nvidia-smi`` (``launch_settings.py``): line rules over launch scripts, Makefiles and configs,
  with the patterns they share in ``launch_patterns.py``.

Shared: ``prose.py`` (``SkipProse``, the base of the rules that read string literals) and ``tables.py``
(the data).

FSDP's ``device_id=torch.cuda.current_device()`` needs no rule of its own: NP201 turns it into
``torch.neuron.current_device()`` (an int), and FSDP maps an int through ``torch.device(int)``, which
resolves to the current accelerator (neuron) in PyTorch 2.13.
"""
