"""NP101 cuda-device-string's INVALID examples (its tests: tests/rules/test_rule_examples.py), apart from the
rule's module for their number."""

from __future__ import annotations

from neuron_port.rules.spec import FRAGMENT, Invalid

INVALID = [
    # device-type tables keep CUDA; 'neuron' joins it (a list assigned, a function returning one, a set)
    Invalid(
        """
        import torch

        def capturable_devices():
            supported = ['cuda', 'xpu', 'hpu']
            return supported

        def fused_devices():
            return ["mps", "cuda", "xpu", "cpu"]

        ACCEPTED = {"cpu", "cuda"}
        src, dst = "cuda", "cpu"
        p = torch.zeros(2, device="neuron")
        assert p.device.type in capturable_devices() and p.device.type in fused_devices()
        assert p.device.type in ACCEPTED and dst == "cpu"
        """,
        """
        import torch

        def capturable_devices():
            supported = ['cuda', 'neuron', 'xpu', 'hpu']
            return supported

        def fused_devices():
            return ["mps", "cuda", "neuron", "xpu", "cpu"]

        ACCEPTED = {"cpu", "cuda", "neuron"}
        src, dst = "neuron", "cpu"
        p = torch.zeros(2, device="neuron")
        assert p.device.type in capturable_devices() and p.device.type in fused_devices()
        assert p.device.type in ACCEPTED and dst == "cpu"
        """,
        message_contains="table of device types",
        runs=True,
    ),
    Invalid(  # devices used one by one (indexed, iterated) are device choices: renamed as before
        "DEVICES = ['cuda', 'cpu']\ndev = DEVICES[0]\nfor d in ['cpu', 'cuda']:\n    pass\n",
        "DEVICES = ['neuron', 'cpu']\ndev = DEVICES[0]\nfor d in ['cpu', 'neuron']:\n    pass\n",
        runs=True,
    ),
    Invalid(
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
        "import torch\ndevice = 'neuron' if torch.cuda.is_available() else 'cpu'\n",
        runs=True,
    ),
    Invalid(
        "parser.add_argument('--device', type=str, default='cuda', choices=['cpu', 'cuda'])\n",
        "parser.add_argument('--device', type=str, default='neuron', choices=['cpu', 'cuda', 'neuron'])\n",
        not_runnable=FRAGMENT,
    ),
    Invalid(
        'dev = torch.device("cuda", 1)\nx = torch.zeros(3, device="cuda:0")  # keep me\ny = x.to("cuda")\n',
        'dev = torch.device("neuron", 1)\nx = torch.zeros(3, device="neuron:0")  # keep me\ny = x.to("neuron")\n',
        not_runnable=FRAGMENT,
    ),
    Invalid(
        "def run(model, device='cuda'):\n    cfg = {'device': 'cuda', 'lr': 0.1}\n",
        "def run(model, device='neuron'):\n    cfg = {'device': 'neuron', 'lr': 0.1}\n",
        runs=True,
    ),
    Invalid(
        "device = f'cuda:{local_rank}'\na = 'cuda:%d' % args.gpu\n"
        "b = 'cuda:' + str(int(os.environ['LOCAL_RANK']))\n"
        "c = \"cuda:{}\".format(rank)\nd = torch.device('cuda', local_rank)\n"
        "e = torch.device(f\"cuda:{os.environ.get('LOCAL_RANK', 0)}\")\n",
        "device = f'neuron:{local_rank}'\na = 'neuron:%d' % args.gpu\n"
        "b = 'neuron:' + str(int(os.environ['LOCAL_RANK']))\n"
        "c = \"neuron:{}\".format(rank)\nd = torch.device('neuron', local_rank)\n"
        "e = torch.device(f\"neuron:{os.environ.get('LOCAL_RANK', 0)}\")\n",
        not_runnable=FRAGMENT,
    ),
    Invalid(
        "f = 'cuda:%d' % (dist.get_rank(),)\ng = f\"cuda:{int(os.environ['RANK'])}\"\n",
        "f = 'neuron:%d' % (dist.get_rank(),)\ng = f\"neuron:{int(os.environ['RANK'])}\"\n",
        message_contains="index by LOCAL_RANK",
        not_runnable=FRAGMENT,
    ),
    Invalid(
        "b = 'cuda:' + str(i)\nc = \"cuda:{}\".format(i)\nd = torch.device('cuda', idx)\n"
        "for gpu in range(n):\n    devs.append(f'cuda:{gpu}')\n"
        "all_devs = [f'cuda:{gpu_id}' for gpu_id in range(4)]\n",
        "b = 'neuron:' + str(i)\nc = \"neuron:{}\".format(i)\nd = torch.device('neuron', idx)\n"
        "for gpu in range(n):\n    devs.append(f'neuron:{gpu}')\n"
        "all_devs = [f'neuron:{gpu_id}' for gpu_id in range(4)]\n",
        not_runnable=FRAGMENT,
    ),
    Invalid(
        "torch.set_default_device('cuda')\ng = torch.Generator(device='cuda')\n"
        "ckpt = torch.load(p, map_location={'cuda:0': 'cuda:%d' % rank})\n",
        "torch.set_default_device('neuron')\ng = torch.Generator(device='neuron')\n"
        "ckpt = torch.load(p, map_location={'cuda:0': 'neuron:%d' % rank})\n",
        not_runnable=FRAGMENT,
    ),
    Invalid(  # (a {'cuda': 'nccl'} backend map is NP501's: key and value together)
        "batch = {'cuda': 256, 'cpu': 32}[device.type]\n",
        None,  # a dict key may be a label: unsafe fix only
        message_contains="dict key",
    ),
    Invalid(
        "batch = {'cuda': 256, 'cpu': 32}[device.type]\n",
        "batch = {'neuron': 256, 'cpu': 32}[device.type]\n",
        unsafe_fixes=True,
    ),
    Invalid(
        "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
        "if torch.cuda.is_available():\n    dev = 'cuda'\n",
        "import torch\n"
        "device = torch.accelerator.current_accelerator().type if torch.cuda.is_available() else 'cpu'\n"
        "if torch.cuda.is_available():\n    dev = torch.accelerator.current_accelerator().type\n",
        target="accelerator",
        runs=True,
    ),
    Invalid(
        "import torch\nparser.add_argument('--device', default='cuda')\n",
        None,  # unguarded: current_accelerator() is None on CPU-only hosts
        target="accelerator",
    ),
    Invalid(
        "import torch as th\nparser.add_argument('--device', default='cuda')\nd = f'cuda:{rank}'\n",
        "import torch as th\nparser.add_argument('--device', default=th.accelerator.current_accelerator().type)\n"
        "d = f'{th.accelerator.current_accelerator().type}:{rank}'\n",
        target="accelerator",
        unsafe_fixes=True,
    ),
    Invalid(
        "import torch\nif torch.cuda.is_available():\n    device = f'cuda:{local_rank}'\n"
        "    d2 = torch.device('cuda', local_rank)\n",
        "import torch\nif torch.cuda.is_available():\n"
        "    device = f'{torch.accelerator.current_accelerator().type}:{local_rank}'\n"
        "    d2 = torch.device(torch.accelerator.current_accelerator().type, local_rank)\n",
        target="accelerator",
        runs=True,
    ),
    Invalid(
        # a list element and a %-template have no torch.accelerator spelling: reported only
        "import torch\nchoices = ['cpu', 'cuda']\nd = 'cuda:%d' % i\n",
        None,
        target="accelerator",
        message_contains="no torch.accelerator spelling",
    ),
    Invalid(
        """
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument('--device', type=str, default='cuda', choices=['cpu', 'cuda'])
        args = parser.parse_args()
        x = torch.zeros(3, device=args.device)
        y = x.to("cuda:0")
        g = torch.Generator(device='cuda')
        noise = torch.randn(3, generator=g.manual_seed(0), device=y.device)
        """,
        """
        import argparse
        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument('--device', type=str, default='neuron', choices=['cpu', 'cuda', 'neuron'])
        args = parser.parse_args()
        x = torch.zeros(3, device=args.device)
        y = x.to("neuron:0")
        g = torch.Generator(device='neuron')
        noise = torch.randn(3, generator=g.manual_seed(0), device=y.device)
        """,
        runs=True,
    ),
    Invalid(
        """
        import os
        import torch

        local_rank = int(os.environ.get('LOCAL_RANK', 0))
        device = f'cuda:{local_rank}'
        d = torch.device('cuda', local_rank)
        x = torch.ones(2, device=device) + torch.ones(2, device=d)
        """,
        """
        import os
        import torch

        local_rank = int(os.environ.get('LOCAL_RANK', 0))
        device = f'neuron:{local_rank}'
        d = torch.device('neuron', local_rank)
        x = torch.ones(2, device=device) + torch.ones(2, device=d)
        """,
        runs=True,
    ),
    Invalid(
        """
        import torch

        torch.set_default_device('cuda')
        x = torch.ones(2)
        torch.save({'w': x}, 'ckpt.pt')
        ckpt = torch.load('ckpt.pt', map_location={'cuda:0': 'cuda:0'})
        """,
        """
        import torch

        torch.set_default_device('neuron')
        x = torch.ones(2)
        torch.save({'w': x}, 'ckpt.pt')
        ckpt = torch.load('ckpt.pt', map_location={'cuda:0': 'neuron:0'})
        """,
        runs=True,
    ),
]
