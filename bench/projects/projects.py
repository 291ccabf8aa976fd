"""The corpus of the real-project scoreboard (issue 34 item 5): real open-source PyTorch training projects
from GitHub that use CUDA, each pinned by commit. Nothing of their code is in this repository: setup.py
extracts each one at its commit from a snapshot (a bare git mirror) into bench/projects/.work/src/.

Fields of a project:
  name       short id (also the folder under .work/)
  repo       owner/name on GitHub; commit: the pinned commit
  kind       what it trains (vision, diffusion, llm-pretrain, llm-finetune, ssl, rl, ...)
  root       the folder of the repository that is the project (copied, rewritten and checked); '' = all
  cwd        where the command runs, relative to root ('' = root; `check PATH` is then root/cwd)
  data       the writer in data.py that puts synthetic data / a tiny config into the copy
  check_cmd  the entry point with a tiny configuration, as a user runs it on their GPU host
  cpu_cmd    the original's run on this CPU host (None = the same as check_cmd): only a flag or a config
             value that picks the CPU where the project has one (e.g. nanoGPT's --device=cpu)
  patch      patches/<file>: a minimal documented patch for the original run where the project hard-codes
             CUDA with no switch (applied to the original copy only, never to the copy that is rewritten)
  nproc      >1: torchrun with that many processes (`check --nproc N`; the original under torchrun on gloo)
  env        extra environment (BENCH_FAKE_TORCHVISION=1: synthetic torchvision datasets, see shims/)
  losses     where the losses are read: "stdout:<regex>" (group 1, from stdout+stderr), or
             "tensorboard:<tag>" / "csv:<glob>:<column>" (files the run wrote under the project)
  timeout    seconds per run
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXAMPLES = "30b310a977a82dbfc3d8e4a820f3b14d876d3bd2"  # pytorch/examples, 2023-12-08 (still CUDA-specific)


@dataclass(frozen=True)
class Project:
    name: str
    repo: str
    commit: str
    kind: str
    check_cmd: tuple
    cpu_cmd: tuple | None = None
    root: str = ""
    cwd: str = ""
    data: str = "nothing"
    patch: str | None = None
    nproc: int = 1
    env: dict = field(default_factory=dict)
    losses: str = r"stdout:loss[^0-9\-]{0,12}(-?\d+\.\d+(?:e-?\d+)?)"
    timeout: int = 900


NANOGPT_ARGS = ("--dataset=bench", "--batch_size=4", "--block_size=32", "--n_layer=2", "--n_head=2",
                "--n_embd=32", "--max_iters=6", "--lr_decay_iters=6", "--warmup_iters=1", "--eval_interval=5",
                "--eval_iters=2", "--log_interval=1", "--compile=False", "--dtype=float32", "--dropout=0.0",
                "--out_dir=out-bench")
LLAMA2C_ARGS = ("--vocab_source=custom", "--vocab_size=64", "--batch_size=4", "--max_seq_len=32", "--dim=32",
                "--n_layers=2", "--n_heads=2", "--n_kv_heads=2", "--multiple_of=8", "--max_iters=6",
                "--eval_interval=5", "--eval_iters=2", "--log_interval=1", "--compile=False", "--dtype=float32",
                "--gradient_accumulation_steps=2", "--warmup_iters=1", "--out_dir=out-bench")

PROJECTS = (
    Project("nanogpt", "karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291", "llm-pretrain",
            ("python", "train.py", *NANOGPT_ARGS, "--gradient_accumulation_steps=2"),
            cpu_cmd=("python", "train.py", *NANOGPT_ARGS, "--gradient_accumulation_steps=2", "--device=cpu"),
            data="nanogpt", losses=r"stdout:iter \d+: loss (\d+\.\d+)"),
    Project("nanogpt-ddp", "karpathy/nanoGPT", "3adf61e154c3fe3fca428ad6bc3818b27a3b8291", "llm-pretrain (torchrun)",
            ("python", "train.py", *NANOGPT_ARGS, "--gradient_accumulation_steps=2"),
            cpu_cmd=("python", "train.py", *NANOGPT_ARGS, "--gradient_accumulation_steps=2", "--device=cpu",
                     "--backend=gloo"),
            data="nanogpt", patch="nanogpt-ddp.patch", nproc=2, losses=r"stdout:iter \d+: loss (\d+\.\d+)"),
    Project("llama2c", "karpathy/llama2.c", "350e04fe35433e6d2941dce5a1f53308f87058eb", "llm-pretrain",
            ("python", "train.py", *LLAMA2C_ARGS),
            cpu_cmd=("python", "train.py", *LLAMA2C_ARGS, "--device=cpu"),
            data="llama2c", losses=r"stdout:\d+ \| loss (\d+\.\d+)"),
    Project("mingpt-chargpt", "karpathy/minGPT", "37baab71b9abea1b76ab957409a1cc2fbfba8a26", "llm-pretrain (char)",
            ("python", "projects/chargpt/chargpt.py", "--trainer.max_iters=11", "--model.model_type='gpt-nano'",
             "--trainer.batch_size=8", "--data.block_size=32", "--trainer.num_workers=0",
             "--system.work_dir='./out/chargpt'"),
            data="chargpt", env={"PYTHONPATH": "."}, losses=r"stdout:train loss (\d+\.\d+)"),
    Project("examples-dcgan", "pytorch/examples", EXAMPLES, "vision GAN",
            ("python", "main.py", "--dataset", "fake", "--batchSize", "8", "--niter", "1", "--workers", "0",
             "--manualSeed", "1", "--dry-run", "--outf", "out", "--cuda"),
            cpu_cmd=("python", "main.py", "--dataset", "fake", "--batchSize", "8", "--niter", "1", "--workers", "0",
                     "--manualSeed", "1", "--dry-run", "--outf", "out"),
            root="dcgan", losses=r"stdout:Loss_D: (\d+\.\d+)"),
    Project("examples-word-lm", "pytorch/examples", EXAMPLES, "language model (LSTM)",
            ("python", "main.py", "--data", "./data/bench", "--epochs", "1", "--emsize", "32", "--nhid", "32",
             "--nlayers", "1", "--bptt", "16", "--batch_size", "4", "--log-interval", "5", "--save", "model.pt",
             "--cuda"),
            cpu_cmd=("python", "main.py", "--data", "./data/bench", "--epochs", "1", "--emsize", "32", "--nhid", "32",
                     "--nlayers", "1", "--bptt", "16", "--batch_size", "4", "--log-interval", "5", "--save",
                     "model.pt"),
            root="word_language_model", data="wordlm", env={"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}, losses=r"stdout:loss\s+(\d+\.\d+)"),
    Project("examples-mnist", "pytorch/examples", EXAMPLES, "vision classifier",
            ("python", "main.py", "--epochs", "1", "--batch-size", "16", "--test-batch-size", "16",
             "--log-interval", "1"),
            root="mnist", env={"BENCH_FAKE_TORCHVISION": "1"}, losses=r"stdout:Loss: (\d+\.\d+)"),
    Project("examples-vae", "pytorch/examples", EXAMPLES, "VAE",
            ("python", "main.py", "--epochs", "1", "--batch-size", "16", "--log-interval", "1"),
            root="vae", env={"BENCH_FAKE_TORCHVISION": "1"}, losses=r"stdout:Loss: (\d+\.\d+)"),
    Project("examples-ddp-torchrun", "pytorch/examples", EXAMPLES, "DDP (torchrun)",
            ("python", "multigpu_torchrun.py", "2", "1", "--batch_size", "64"),
            root="distributed/ddp-tutorial-series", patch="examples-ddp-torchrun.patch", nproc=2,
            losses="none"),
    Project("pytorch-gan-dcgan", "eriklindernoren/PyTorch-GAN", "36d3c77e5ff20ebe0aeefd322326a134a279b93e",
            "vision GAN", ("python", "dcgan.py", "--n_epochs", "1", "--batch_size", "16",
                           "--img_size", "32", "--sample_interval", "1000"), cwd="implementations/dcgan",
            env={"BENCH_FAKE_TORCHVISION": "1", "BENCH_SEED": "0"}, losses=r"stdout:\[D loss: (-?\d+\.\d+)\]"),
    Project("pytorch-gan-wgan-gp", "eriklindernoren/PyTorch-GAN", "36d3c77e5ff20ebe0aeefd322326a134a279b93e",
            "vision GAN (gradient penalty)",
            ("python", "wgan_gp.py", "--n_epochs", "1", "--batch_size", "16",
             "--img_size", "28", "--sample_interval", "1000", "--n_critic", "2"), cwd="implementations/wgan_gp",
            env={"BENCH_FAKE_TORCHVISION": "1", "BENCH_SEED": "0"}, losses=r"stdout:\[D loss: (-?\d+\.\d+)\]"),
    Project("simclr", "sthalles/SimCLR", "1848fc934ad844ae630e6c452300433fe99acfd9", "self-supervised",
            ("python", "run.py", "-data", "./datasets", "-dataset-name", "cifar10", "--arch", "resnet18",
             "--epochs", "1", "-b", "16", "--workers", "0", "--log-every-n-steps", "1"),
            cpu_cmd=("python", "run.py", "-data", "./datasets", "-dataset-name", "cifar10", "--arch", "resnet18",
                     "--epochs", "1", "-b", "16", "--workers", "0", "--log-every-n-steps", "1", "--disable-cuda"),
            env={"BENCH_FAKE_TORCHVISION": "1", "BENCH_FAKE_N": "48"}, losses="tensorboard:loss"),
    Project("dino", "facebookresearch/dino", "7c446df5b9f45747937fb0d72314eb9f7b66930a", "self-supervised (torchrun)",
            ("python", "main_dino.py", "--arch", "vit_tiny", "--patch_size", "16", "--data_path",
             "./bench_data/train", "--output_dir", "./out", "--epochs", "1", "--batch_size_per_gpu", "2",
             "--num_workers", "0", "--local_crops_number", "2", "--out_dim", "256", "--use_fp16", "false",
             "--warmup_epochs", "0", "--warmup_teacher_temp_epochs", "0", "--seed", "0"),
            data="dino", patch="dino.patch", nproc=2, env={"TORCH_HOME": "{root}/bench_torch_home"}, losses=r"stdout:loss: (\d+\.\d+) \(")
    ,
    Project("cleanrl-ppo", "vwxyzjn/cleanrl", "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb", "rl (PPO)",
            ("python", "cleanrl/ppo.py", "--env-id", "CartPole-v1", "--total-timesteps", "512", "--num-envs", "2",
             "--num-steps", "64", "--seed", "1"),
            losses="tensorboard:losses/value_loss"),
    Project("cleanrl-dqn", "vwxyzjn/cleanrl", "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb", "rl (DQN)",
            ("python", "cleanrl/dqn.py", "--env-id", "CartPole-v1", "--total-timesteps", "700", "--learning-starts",
             "200", "--train-frequency", "10", "--buffer-size", "1000", "--batch-size", "32", "--seed", "1"),
            env={"PYTHONPATH": "."}, losses="tensorboard:losses/td_loss"),
    Project("diffusers-unconditional", "huggingface/diffusers", "58eb52c0803ea9af3abec60841c2a093bdf1f951",
            "diffusion (accelerate)",
            ("python", "train_unconditional.py", "--train_data_dir", "./bench_data/images", "--resolution", "16",
             "--train_batch_size", "2", "--num_epochs", "1", "--learning_rate", "1e-4", "--lr_warmup_steps", "0",
             "--mixed_precision", "no", "--output_dir", "out", "--save_images_epochs", "100",
             "--save_model_epochs", "100", "--dataloader_num_workers", "0",
             "--model_config_name_or_path", "./bench_unet", "--ddpm_num_steps", "50", "--ddpm_num_inference_steps", "10", "--eval_batch_size", "2", "--logger", "tensorboard"),
            root="examples/unconditional_image_generation", data="diffusers_unconditional",
            env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}, losses="tensorboard:loss"),
    Project("pytorch-gan-cyclegan", "eriklindernoren/PyTorch-GAN", "36d3c77e5ff20ebe0aeefd322326a134a279b93e",
            "vision GAN (CycleGAN)",
            ("python", "cyclegan.py", "--dataset_name", "bench", "--n_epochs", "1", "--batch_size", "1",
             "--img_height", "32", "--img_width", "32", "--n_residual_blocks", "2", "--n_cpu", "0",
             "--sample_interval", "1000", "--decay_epoch", "0"),
            cwd="implementations/cyclegan", data="cyclegan", env={"BENCH_SEED": "0"},
            losses=r"stdout:\[D loss: (-?\d+\.\d+)\]"),
    Project("examples-siamese", "pytorch/examples", EXAMPLES, "vision (siamese)",
            ("python", "main.py", "--epochs", "1", "--batch-size", "16", "--test-batch-size", "16",
             "--log-interval", "1"),
            root="siamese_network", env={"BENCH_FAKE_TORCHVISION": "1"}, losses=r"stdout:Loss: (\d+\.\d+)"),
    Project("examples-mnist-rnn", "pytorch/examples", EXAMPLES, "vision (LSTM)",
            ("python", "main.py", "--epochs", "1", "--batch-size", "16", "--test-batch-size", "16",
             "--log-interval", "1"),
            root="mnist_rnn", env={"BENCH_FAKE_TORCHVISION": "1"}, losses=r"stdout:Loss: (\d+\.\d+)"),
    Project("examples-mnist-hogwild", "pytorch/examples", EXAMPLES, "vision (hogwild multiprocessing)",
            ("python", "main.py", "--epochs", "1", "--batch-size", "16", "--test-batch-size", "16",
             "--log-interval", "1", "--num-processes", "2", "--cuda"),
            cpu_cmd=("python", "main.py", "--epochs", "1", "--batch-size", "16", "--test-batch-size", "16",
                     "--log-interval", "1", "--num-processes", "2"),
            root="mnist_hogwild", env={"BENCH_FAKE_TORCHVISION": "1"}, losses="none"),
    Project("examples-forward-forward", "pytorch/examples", EXAMPLES, "vision (forward-forward)",
            ("python", "main.py", "--epochs", "2", "--log-interval", "1"),
            root="mnist_forward_forward", env={"BENCH_FAKE_TORCHVISION": "1"},
            losses=r"stdout:Loss:\s+(\d+\.\d+)"),
    Project("lightning-hydra-template", "ashleve/lightning-hydra-template", "bddbc24b82ab6ccfa6243e815a49dc5bfe8d4144",
            "vision (Lightning + Hydra)",
            ("python", "src/train.py", "trainer=gpu", "trainer.max_epochs=1", "+trainer.limit_train_batches=3",
             "+trainer.limit_val_batches=1", "+trainer.limit_test_batches=1", "data.batch_size=16",
             "data.num_workers=0", "data.train_val_test_split=[96,16,16]", "logger=csv", "seed=1",
             "callbacks=none", "extras.print_config=False", "extras.enforce_tags=False"),
            cpu_cmd=("python", "src/train.py", "trainer=cpu", "trainer.max_epochs=1", "+trainer.limit_train_batches=3",
                     "+trainer.limit_val_batches=1", "+trainer.limit_test_batches=1", "data.batch_size=16",
                     "data.num_workers=0", "data.train_val_test_split=[96,16,16]", "logger=csv", "seed=1",
                     "callbacks=none", "extras.print_config=False", "extras.enforce_tags=False"),
            env={"BENCH_FAKE_TORCHVISION": "1", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"},
            losses="csv:logs/train/runs/**/metrics.csv:train/loss"),
    Project("trl-sft-lora", "huggingface/trl", "f2cd57710ae345ea6428ae95363267fcf38a3dc8",
            "llm-finetune (trl SFT + peft LoRA, HF Trainer)",
            ("python", "sft.py", "--model_name_or_path", "./bench_model", "--dataset_name", "./bench_sft",
             "--output_dir", "out", "--max_steps", "4", "--per_device_train_batch_size", "2", "--logging_steps", "1",
             "--report_to", "none", "--use_peft", "--lora_r", "4", "--lora_target_modules", "q_proj", "v_proj",
             "--max_length", "32", "--save_strategy", "no", "--seed", "0", "--learning_rate", "1e-3", "--bf16", "False"),
            root="trl/scripts", data="trl_sft", env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
            losses=r"stdout:'loss': '?(\d+\.\d+)"),
    Project("timm-train", "huggingface/pytorch-image-models", "aa4b5850c1543fa488abf260f18390eda46cf85d",
            "vision classifier (timm train.py, the library in the repo)",
            ("python", "train.py", "--data-dir", "./bench_data", "--model", "resnet18", "--img-size", "32", "--epochs", "1", "-b", "4",
             "-vb", "4", "-j", "1", "--log-interval", "1", "--seed", "0", "--output", "./out", "--lr", "0.01",
             "--warmup-epochs", "0", "--num-classes", "2"),
            cpu_cmd=("python", "train.py", "--data-dir", "./bench_data", "--model", "resnet18", "--img-size", "32", "--epochs", "1", "-b", "4",
             "-vb", "4", "-j", "1", "--log-interval", "1", "--seed", "0", "--output", "./out", "--lr", "0.01",
             "--warmup-epochs", "0", "--num-classes", "2", "--device", "cpu"),
            data="timm_train", env={"HF_HUB_OFFLINE": "1"}, losses=r"stdout:Loss: +(\d+\.\d+) ", timeout=1200),
)


# Held-out projects (session 39): five repositories no earlier session measured, of kinds the corpus above
# lacks (graph, time series with AMP, text classification, Lightning, recommendation)
INFORMER_ARGS = ("--model", "informer", "--data", "custom", "--root_path", "./bench_data/", "--data_path", "bench.csv",
                 "--features", "M", "--target", "OT", "--freq", "h", "--seq_len", "24", "--label_len", "12",
                 "--pred_len", "12", "--enc_in", "4", "--dec_in", "4", "--c_out", "4", "--d_model", "16",
                 "--n_heads", "2", "--e_layers", "2", "--d_layers", "1", "--d_ff", "32", "--factor", "3",
                 "--dropout", "0.0", "--itr", "1", "--train_epochs", "2", "--batch_size", "16", "--use_amp",
                 "--des", "bench")
HELD_OUT = (
    Project("pygcn", "tkipf/pygcn", "1600b5b748b3976413d1e307540ccc62605b4d6d", "graph (GCN, sparse adjacency)",
            ("python", "train.py", "--epochs", "20", "--dropout", "0.0", "--seed", "42"),
            cwd="pygcn", data="pygcn_cora", env={"PYTHONPATH": "{root}", "PYTHONHASHSEED": "0"},
            losses=r"stdout:loss_train: (\d+\.\d+)"),
    Project("informer-amp", "zhouhaoyi/Informer2020", "29f2a739226a509202a092b464163da81fa74960",
            "time series (Informer, --use_amp: torch.cuda.amp autocast + GradScaler)",
            ("python", "main_informer.py", *INFORMER_ARGS),
            data="informer_csv", env={"BENCH_SEED": "0", "BENCH_NUMPY_INF": "1"}, losses=r"stdout:Train Loss: (\d+\.\d+)"),
    Project("chinese-textcnn", "649453932/Chinese-Text-Classification-Pytorch",
            "6cb26819af7b646275aff8a4693676f2849e67f6", "text classifier (TextCNN, custom loop)",
            ("python", "run.py", "--model", "TextCNN", "--embedding", "random"),
            data="thucnews", losses=r"stdout:Loss:\s+(\d+\.\d+)"),
    Project("lightly-simclr-lightning", "lightly-ai/lightly", "e8d317fc5a87f4387a85a35e689869039ec249ee",
            "self-supervised (PyTorch Lightning, accelerator = \"gpu\" if torch.cuda.is_available())",
            ("python", "examples/pytorch_lightning/simclr.py"),
            env={"PYTHONPATH": ".", "BENCH_FAKE_TORCHVISION": "1", "BENCH_FAKE_N": "256", "BENCH_SEED": "0"},
            losses="none"),
    Project("lightgcn", "gusye1234/LightGCN-PyTorch", "947ca2b3b1d2d3545b114145710cb06c4e57b3d2",
            "recommendation (LightGCN, sparse graph, BPR)",
            ("python", "main.py", "--dataset", "lastfm", "--epochs", "2", "--recdim", "16", "--layer", "2",
             "--testbatch", "100", "--seed", "2020", "--model", "lgn"),
            cwd="code", losses="tensorboard:BPRLoss/BPR"),
)
PROJECTS = PROJECTS + HELD_OUT
