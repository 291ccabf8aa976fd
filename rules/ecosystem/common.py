"""Names shared by the NP6xx modules: the Hugging Face training-argument classes (read by NP605 for
bitsandbytes optimizers and by NP607 for ``fp16=True``)."""

from __future__ import annotations

import re

# TrainingArguments and the TRL configs derived from it.
TRAINING_ARGS_RE = re.compile(r"^(\w*TrainingArguments|SFTConfig|DPOConfig|GRPOConfig|PPOConfig|RewardConfig|"
                              r"ORPOConfig|KTOConfig|CPOConfig|RLOOConfig|GKDConfig|OnlineDPOConfig)$")
