"""Benchmark: `neuron-port server`'s diagnostics latency after an edit (issue 38 item 1; goal <= 0.3 s on a
4k-line file).

Starts the server as an editor does (``python -m neuron_port server``, LSP over stdio, pygls' own client),
opens each file, waits for its first diagnostics, then makes ``--edits`` edits, one at a time, as a user
types them: each changes one line in the middle of the file (sent as an editor sends it: that line's
range and its new text) (alternately adding a ``.cuda()`` call, which
adds a finding, and taking it out again), sends ``textDocument/didChange`` and waits for the diagnostics
of that version. The latency is from the change sent to its first diagnostics received: the server's
debounce, the engine's first pass over the whole buffer and the transport (when a fix applies, the server
publishes the first pass's findings before the rewrite's fixed point, and the fixed point's only when they
differ); then it asks for the code actions, which the server answers from the whole analysis: "whole
analysis" is the change sent to that answer, and the CPU per edit is measured then. Also reported: the server process's CPU
seconds per edit (from /proc), the load average before and after, the machine.

    .venv/bin/python bench/rewrite/bench_lsp.py [FILE ...] [--edits 9] [--lines 4000] [--baseline WORKTREE]
        [--rounds N]

Without FILE: accelerate's ``accelerator.py`` from the installed accelerate (the `zoo` extra pins it: a
real 4k-line file with few CUDA references), and a module of ``--lines`` lines written by
generate_large_file.py (seed 0: dense CUDA, hundreds of fixes), in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

HERE = Path(__file__).resolve().parent


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("bench-lsp", "1")
        self.arrived: dict[tuple[str, int | None], tuple[float, list]] = {}
        self.publishes: dict[tuple[str, int | None], int] = {}
        self.event = asyncio.Event()

        @self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def diagnostics(params: types.PublishDiagnosticsParams) -> None:  # no client argument: pygls passes params only
            # the first publish of a version (the server may publish its rewrite's first pass, then the fixed
            # point's when they differ): what the user sees first
            self.arrived.setdefault((params.uri, params.version), (time.perf_counter(), list(params.diagnostics)))
            self.publishes[(params.uri, params.version)] = self.publishes.get((params.uri, params.version), 0) + 1
            self.event.set()

    async def wait(self, uri: str, version: int, timeout: float = 120.0) -> tuple[float, list]:
        deadline = time.perf_counter() + timeout
        while (uri, version) not in self.arrived:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), max(0.0, deadline - time.perf_counter()))
        return self.arrived[(uri, version)]


def _edited(lines: list[str], index: int, with_cuda: bool) -> str:
    """The file with line ``index`` replaced by an assignment at that line's indentation."""
    indent = lines[index][:len(lines[index]) - len(lines[index].lstrip())]
    new = f"{indent}_bench_probe = torch.zeros(2){'.cuda()' if with_cuda else ''}\n"
    return "".join(lines[:index] + [new] + lines[index + 1:])


def _change(old_text: str, index: int, new_text: str) -> types.TextDocumentContentChangePartial:
    """The edit of line ``index`` as an editor sends it (the server syncs incrementally): that line of
    ``old_text`` (the buffer before) replaced by ``new_text``'s (ASCII lines: columns are UTF-16 units)."""
    old = old_text.splitlines(keepends=True)[index].rstrip("\r\n")
    line = new_text.splitlines(keepends=True)[index].rstrip("\r\n")
    return types.TextDocumentContentChangePartial(
        range=types.Range(types.Position(index, 0), types.Position(index, len(old))), text=line)


def _probe_line(lines: list[str]) -> int:
    """A plain statement line near the middle of the file (not inside a bracket or a string)."""
    middle = len(lines) // 2
    for index in sorted(range(len(lines)), key=lambda i: abs(i - middle)):
        text = lines[index].strip()
        if (text.startswith(("return ", "self.")) and text.endswith(")") and text.count("(") == text.count(")")
                and lines[index - 1].rstrip().endswith((":", ")")) and '"""' not in text):
            return index
    raise SystemExit("no plain statement line to edit")


async def bench_file(path: Path, edits: int, pythonpath: str | None = None) -> dict:
    client = Client()
    env = dict(os.environ, PYTHONPATH=pythonpath) if pythonpath else None
    # from the file's folder: `-m` puts the working folder first on sys.path (a checkout there would win)
    await client.start_io(sys.executable, "-m", "neuron_port", "server", env=env, cwd=str(path.parent))
    server = client._server  # the asyncio subprocess pygls started
    pid = server.pid
    await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities(),
                                                         root_uri=path.parent.as_uri()))
    client.initialized(types.InitializedParams())
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    uri = path.as_uri()
    start = time.perf_counter()
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    arrived, first = await client.wait(uri, 1)
    opened = arrived - start
    index = _probe_line(lines)
    buffer = text
    latencies, cpus, counts, completes = [], [], [], []
    for number in range(edits):
        version = number + 2
        new_text = _edited(lines, index, with_cuda=number % 2 == 0)
        cpu = _cpu_seconds(pid)
        sent = time.perf_counter()
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [_change(buffer, index, new_text)]))
        buffer = new_text
        arrived, found = await client.wait(uri, version)
        latencies.append(arrived - sent)
        # the code actions are answered from the version's whole analysis (the rewrite's fixed point): their
        # answer says the server is done with this edit
        await client.text_document_code_action_async(types.CodeActionParams(
            types.TextDocumentIdentifier(uri), types.Range(types.Position(0, 0), types.Position(len(lines), 0)),
            types.CodeActionContext([])))
        completes.append(time.perf_counter() - sent)
        cpus.append(_cpu_seconds(pid) - cpu)
        counts.append(len(found))
        await asyncio.sleep(0.2)  # a pause in the typing: each edit is measured alone
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {"file": path.name, "lines": len(lines), "first": opened, "findings": len(first),
            "latencies": latencies, "cpus": cpus, "counts": counts, "completes": completes,
            "publishes": [client.publishes[(uri, v)] for v in range(2, edits + 2)],
            "engine": _engine_cpu(path, lines, index) if pythonpath is None else None}


def _engine_cpu(path: Path, lines: list[str], index: int, rounds: int = 3) -> float:
    """The median CPU seconds of the engine alone (api.rewrite_source, warm, in this process) on the edited
    text: what the server's analysis costs before its own work and the transport."""
    from neuron_port.api import rewrite_source

    text = _edited(lines, index, with_cuda=True)
    rewrite_source(text, path=str(path))  # the rules loaded, as in the server
    cpu = []
    for _ in range(rounds):
        start = time.process_time()
        rewrite_source(text, path=str(path))
        cpu.append(time.process_time() - start)
    return statistics.median(cpu)


def _files(args: argparse.Namespace, scratch: Path) -> list[Path]:
    if args.files:
        return [Path(f).resolve() for f in args.files]
    files = []
    try:
        import accelerate

        source = Path(accelerate.__file__).parent / "accelerator.py"
        copy = scratch / "accelerator.py"
        shutil.copyfile(source, copy)  # in a folder of its own: no project settings apply
        files.append(copy)
    except ImportError:
        print("accelerate is not installed (the zoo extra): its accelerator.py is left out", file=sys.stderr)
    generated = scratch / "generated.py"
    subprocess.run([sys.executable, str(HERE / "generate_large_file.py"), str(generated), "--lines",
                    str(args.lines)], check=True, stdout=subprocess.DEVNULL)
    return files + [generated]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--edits", type=int, default=9)
    parser.add_argument("--lines", type=int, default=4000)
    parser.add_argument("--baseline", help="a checkout of another commit (a git worktree): its server, run with "
                        "PYTHONPATH=BASELINE in this venv, is measured after this tree's on each file, --rounds times")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    installs = {"this tree": None, **({"baseline": str(Path(args.baseline).resolve())} if args.baseline else {})}
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load before {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as scratch:
        for path in _files(args, Path(scratch)):
            for _ in range(args.rounds):
                for label, pythonpath in installs.items():
                    load = os.getloadavg()[0]
                    result = asyncio.run(bench_file(path, args.edits, pythonpath))
                    lat, cpu = result["latencies"], result["cpus"]
                    engine = (f" (the engine alone, in process: {result['engine']:.3f} s)"
                              if result["engine"] is not None else "")
                    print(f"{label}: {result['file']} ({result['lines']} lines, {result['findings']} findings, "
                          f"load {load:.1f}): first diagnostics {result['first']:.2f} s (server start included); "
                          f"after an edit: median {statistics.median(lat):.3f} s (min {min(lat):.3f}, max "
                          f"{max(lat):.3f}; {len(lat)} edits); whole analysis (code actions answered) median "
                          f"{statistics.median(result['completes']):.3f} s; server CPU per edit median "
                          f"{statistics.median(cpu):.3f} s{engine}; findings per edit {sorted(set(result['counts']))}; "
                          f"publishes per edit {sorted(set(result['publishes']))}", flush=True)
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
