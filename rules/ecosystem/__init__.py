"""NP6xx: the ecosystem around PyTorch (Hugging Face transformers / TRL, PyTorch Lightning).

Codes (stable) and the module that holds each:

- NP601 ``hf-device-map``: ``device_map="cuda"`` / ``"cuda:N"`` -> ``"neuron"``; ``"auto"`` noted
  (``hf_devices.py``).
- NP602 ``hf-pipeline-device``: ``pipeline(..., device=0)`` (an integer GPU index) -> ``"neuron"``
  (``hf_devices.py``).
- NP603 ``flash-attention-implementation``: ``attn_implementation="flash_attention_2"`` -> ``"sdpa"``
  (``flash_attention.py``).
- NP604 ``hf-float16-dtype``: ``from_pretrained(torch_dtype=torch.float16)`` -> advice for bfloat16
  (``hf_precision.py``).
- NP605 ``bitsandbytes-quantization``: ``load_in_8bit`` / ``load_in_4bit`` / ``BitsAndBytesConfig`` /
  8-bit and paged optimizers named in ``TrainingArguments(optim=...)`` (``bitsandbytes.py``).
- NP606 ``hf-async-load``: ``from_pretrained`` (once per file) -> ``HF_DEACTIVATE_ASYNC_LOAD=1``
  (``async_load.py``).
- NP607 ``hf-fp16-training``: ``TrainingArguments(fp16=True)`` -> ``bf16=True`` (``hf_precision.py``).
- NP608 ``lightning-accelerator``: Lightning ``accelerator="cuda"|"gpu"``, ``gpus=N`` (``lightning.py``).
- NP609 ``lightning-precision``: Lightning ``precision="16-mixed"`` -> ``"bf16-mixed"`` (``lightning.py``).
- NP610 ``lightning-cpu-on-trainium``: Lightning ``Trainer`` / ``Fabric`` with ``accelerator="auto"`` or none:
  the CPU on Trainium (``lightning.py``; at run time NP913 names Lightning).
- NP611 ``lightning-config-accelerator``: ``accelerator: gpu`` / ``cuda`` in a YAML / JSON / TOML config (Hydra,
  LightningCLI), reported (``lightning.py``, a line rule).

``common.py`` holds the names several modules share (the ``TrainingArguments`` classes).

``device="cuda"`` keywords and ``.to("cuda")`` (on pipelines too) are NP101's; NP101 deliberately
skips ``device_map=`` and ``accelerator=`` values, which belong here. ``accelerate`` (``Accelerator``,
``mixed_precision=...``) is left alone: it picks the device itself. Facts: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (Hugging Face on TorchNeuron) and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py (bf16 is the recommended precision).
"""
