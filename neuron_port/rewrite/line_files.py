"""Launch scripts (``*.sh``, Makefiles) and YAML / JSON / TOML configs: line-based findings and
plain value swaps.

These files are not parsed: each line is matched against a few patterns (``CUDA_VISIBLE_DEVICES``,
``torchrun --nproc_per_node=N``, ``device: cuda``, ``backend: nccl``, CUDA/NCCL environment variables,
``nvidia-smi``). A fix replaces the matched characters (or, for one case, deletes the line) and leaves
every other byte alone, so comments, quoting, indentation and newlines are kept. The rule entries
(docs, severity, examples) are in ``rules/launch.py`` (NP520-NP525).

GPU counts become NeuronCore counts with ``--instance`` (or ``--neuron-cores N``): see INSTANCES for the
numbers and their sources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

from neuron_port.rewrite.engine import SUPPRESSION_RE, RewriteError
from neuron_port.rewrite.sources import SourceError, encode_source, read_source, unified_diff
from neuron_port.results import Finding, Fix
from neuron_port.rules.device_tables import CUDA_ENV_ADVICE, NCCL_ENV_ADVICE, NCCL_ENV_RE

if TYPE_CHECKING:  # pragma: no cover
    from neuron_port.rewrite.discovery import SourceFile
    from neuron_port.results import FileResult

SHELL, MAKE, YAML, JSON, TOML = "shell", "make", "yaml", "json", "toml"
SCRIPT_KINDS = (SHELL, MAKE)
CONFIG_KINDS = (YAML, JSON, TOML)

CODE_VISIBLE = "NP520"
CODE_NPROC = "NP521"
CODE_DEVICE = "NP522"
CODE_BACKEND = "NP523"
CODE_ENV = "NP524"
CODE_SMI = "NP525"
NAMES = {
    CODE_VISIBLE: "launch-cuda-visible-devices",
    CODE_NPROC: "launch-process-count",
    CODE_DEVICE: "config-cuda-device",
    CODE_BACKEND: "config-nccl-backend",
    CODE_ENV: "launch-cuda-env-var",
    CODE_SMI: "launch-nvidia-smi",
}
SEVERITY = {CODE_VISIBLE: "warning", CODE_NPROC: "warning", CODE_DEVICE: "error", CODE_BACKEND: "error",
            CODE_ENV: "info", CODE_SMI: "warning"}
EFFORT = {CODE_VISIBLE: "low", CODE_NPROC: "low", CODE_DEVICE: "low", CODE_BACKEND: "low", CODE_ENV: "low",
          CODE_SMI: "low"}
CODES = tuple(NAMES)

# Substrings without which a file cannot produce a finding (the cheap pre-filter).
TRIGGERS = ("CUDA_VISIBLE_DEVICES", "nproc", "cuda", "nccl", "NCCL", "CUDA_", "nvidia-smi", "gpu", "GPU",
            "num_processes")


# -- instances -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Instance:
    name: str
    chips: int  # Trainium chips per node (one instance / one server)
    chip: str
    cores: int  # logical NeuronCores per node at the default LNC=2
    nodes: int  # nodes in the system (UltraServers: servers)
    source: str

    def describe(self) -> str:
        nodes = f" per node, {self.nodes} nodes" if self.nodes > 1 else ""
        return (f"{self.name}: {self.chips} {self.chip} chip(s) x 4 = {self.cores} logical NeuronCores at the "
                f"default LNC=2{nodes}")


# Logical NeuronCores per node at the default LNC=2 (4 per chip: 8 physical cores, two per logical core;
# LNC=1 doubles the count). Sources: ../shared/torchneuron.md §1.4 (LNC, default per platform: trn2/trn3
# "2", trn2.48xlarge = 64 cores at LNC=2) and §8.2 (instances). Trn3 single-instance sizes are NOT
# documented there ("Trn3 single-instance sizes/prices: NOT found"), so only the two UltraServer
# layouts are known; anything else takes --neuron-cores N.
INSTANCES: dict[str, Instance] = {
    "trn2.3xlarge": Instance("trn2.3xlarge", 1, "Trainium2", 4, 1,
                             "torchneuron.md §8.2 (neuron-ls example: 1 chip, 4 logical cores at LNC=2)"),
    "trn2.48xlarge": Instance("trn2.48xlarge", 16, "Trainium2", 64, 1,
                              "torchneuron.md §1.4 and §8.2 (16 chips, 64 cores at LNC=2, 128 at LNC=1)"),
    "trn2u.48xlarge": Instance("trn2u.48xlarge", 16, "Trainium2", 64, 1,
                               "torchneuron.md §8.2 (UltraServer node: 16 chips; 4 nodes per Trn2 UltraServer)"),
    "trn3-ultraserver-gen1": Instance("trn3-ultraserver-gen1", 16, "Trainium3", 64, 4,
                                      "torchneuron.md §8.2 (Trn3 Gen1 UltraServer: 64 chips = 4 servers x 16) "
                                      "and §1.4 (trn3 default LNC=2)"),
    "trn3-ultraserver-gen2": Instance("trn3-ultraserver-gen2", 4, "Trainium3", 16, 36,
                                      "torchneuron.md §8.2 (Trn3 Gen2 UltraServer: 144 chips = 36 servers x 4) "
                                      "and §1.4 (trn3 default LNC=2)"),
}


class InstanceError(ValueError):
    pass


def resolve_instance(instance: Optional[str], neuron_cores: Optional[int]) -> Optional[tuple[int, str]]:
    """(logical NeuronCores per node, description) for --instance / --neuron-cores, None when neither."""
    if neuron_cores is not None:
        if instance is not None:
            raise InstanceError("give --instance or --neuron-cores, not both")
        if neuron_cores < 1:
            raise InstanceError("--neuron-cores must be at least 1")
        return neuron_cores, f"--neuron-cores {neuron_cores}"
    if instance is None:
        return None
    key = instance.strip().lower()
    if key in INSTANCES:
        found = INSTANCES[key]
        return found.cores, found.describe()
    known = ", ".join(INSTANCES)
    if key.startswith("trn3"):
        raise InstanceError(
            f"{instance!r}: Trn3 single-instance sizes are not documented in the sources neuron-port uses "
            f"(shared/torchneuron.md §8.2); use a known layout ({known}) or --neuron-cores N "
            "(logical NeuronCores per node: 4 per Trainium3 chip at the default LNC=2)")
    raise InstanceError(f"unknown instance {instance!r}; known: {known}; or give --neuron-cores N")


def describe_cores(instance: Optional[str], neuron_cores: Optional[int]) -> Optional[tuple[int, str]]:
    try:
        return resolve_instance(instance, neuron_cores)
    except InstanceError:
        return None


# -- scanning --------------------------------------------------------------------------------------
@dataclass
class LineHit:
    code: str
    line: int  # 1-based
    start: int  # 0-based column in the line
    end: int
    message: str
    replacement: Optional[str] = None  # text for line[start:end]; "" deletes those characters
    delete_line: bool = False
    safety: str = "none"


@dataclass
class ScanOptions:
    codes: frozenset[str] = frozenset(CODES)
    target: str = "neuron"
    unsafe_fixes: bool = False
    cores: Optional[tuple[int, str]] = None  # (cores per node, description)


@dataclass
class ScanOutcome:
    text: str
    findings: list[Finding] = field(default_factory=list)
    fixes_applied: int = 0


CVD = "CUDA_VISIBLE_DEVICES"
NRT_CORES = "NEURON_RT_VISIBLE_CORES"
LAUNCHER_RE = re.compile(r"(^|[\s;&|(`])(torchrun|python[\d.]*\s+(-\S+\s+)*-m\s+torch\.distributed\.(launch|run))\b")
CVD_ASSIGN_RE = re.compile(
    r"(?<![\w$])(?P<export>export\s+)?CUDA_VISIBLE_DEVICES(?P<op>\s*[:?+]?=\s*|=)(?P<value>\"[^\"]*\"|'[^']*'|[^\s;&|)]*)"
)
CVD_TOKEN_RE = re.compile(r"\bCUDA_VISIBLE_DEVICES\b")
NPROC_RE = re.compile(r"(?P<flag>--nproc[_-]per[_-]node)(?P<sep>=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s;&|\\)]+)")
DEVICE_ARG_RE = re.compile(
    r"(?P<flag>--(?:[\w-]*[_-])?device(?:[_-]type|[_-]map)?)(?P<sep>=|\s+)(?P<q>[\"']?)(?P<value>cuda(?::\d+)?)(?P=q)(?![\w:])"
)
BACKEND_ARG_RE = re.compile(
    r"(?P<flag>--(?:[\w-]*[_-])?backend)(?P<sep>=|\s+)(?P<q>[\"']?)(?P<value>nccl)(?P=q)(?![\w:])"
)
ENV_ASSIGN_RE = re.compile(r"(?<![\w$])(?:export\s+)?(?P<name>[A-Z][A-Z0-9_]*)\s*[:?+]?=")
SMI_RE = re.compile(r"(?<![\w/-])nvidia-smi\b")
CONFIG_KV_RE = re.compile(
    r"(?P<key>\"[^\"\n]+\"|'[^'\n]+'|[A-Za-z_][\w.-]*)\s*(?P<colon>:|=)\s*"
    r"(?P<q>[\"']?)(?P<value>[\w:.+-]+)(?P=q)(?=\s*(?:[,}\]#]|$))"
)
COUNT_KEYS = {"nproc_per_node", "nproc-per-node", "num_gpus", "n_gpu", "n_gpus", "ngpus", "ngpu", "gpus",
              "gpus_per_node", "num_processes", "num_procs", "nprocs"}
PER_NODE_COUNT_KEYS = {"nproc_per_node", "nproc-per-node", "gpus_per_node"}


def _strip_comment(line: str, kind: str) -> str:
    """The line up to its comment (``#`` at the start or after whitespace, outside quotes)."""
    if kind == JSON:
        return line
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
            elif ch == "\\" and quote == '"':
                continue
            continue
        if ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace() or kind == MAKE):
            return line[:i]
    return line


def _suppressed(code: str, line: str) -> bool:
    match = SUPPRESSION_RE.search(line) if "neuron-port" in line else None
    if not match:
        return False
    codes = match.group("codes")
    if codes is None:
        return True
    wanted = {c.strip().upper() for c in codes.split(",") if c.strip()}
    return code in wanted or any(code.startswith(c) for c in wanted)


def _unquote(value: str) -> tuple[str, str]:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1], value[0]
    return value, ""


def _as_range(value: str) -> str:
    """A contiguous GPU list "0,1,2,3" as the documented NEURON_RT_VISIBLE_CORES range "0-3"."""
    parts = value.split(",")
    if len(parts) > 1 and all(p.isdigit() for p in parts):
        numbers = [int(p) for p in parts]
        if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{numbers[0]}-{numbers[-1]}"
    return value


def _count_advice(cores: Optional[tuple[int, str]]) -> str:
    if cores is None:
        return ("one process per logical NeuronCore: 4 on trn2.3xlarge, 64 on trn2.48xlarge at the default LNC=2 "
                "(twice that at LNC=1); pass --instance or --neuron-cores to rewrite the count")
    return f"one process per logical NeuronCore: {cores[0]} ({cores[1]})"


def _nproc_hit(code_line: str, lineno: int, match: re.Match, value_group: str, what: str, options: ScanOptions,
               fixable: bool) -> Optional[LineHit]:
    raw = match.group(value_group)
    value, quote = _unquote(raw)
    cores = options.cores
    if cores is not None and value.isdigit() and int(value) == cores[0]:
        return None  # already the instance's core count
    hit = LineHit(CODE_NPROC, lineno, match.start(), match.end(),
                  f"`{what}` counts GPUs (one process per GPU); on Trainium {_count_advice(cores)}")
    if cores is not None and fixable and (value.isdigit() or value in ("gpu", "auto")):
        hit.start, hit.end = match.start(value_group), match.end(value_group)
        hit.replacement = f"{quote}{cores[0]}{quote}"
        hit.safety = "unsafe"
        hit.message += ("; unsafe: the global batch is the per-process batch times the process count, so "
                        "review batch size, learning rate and mesh shapes")
    return hit


def scan_lines(text: str, kind: str, options: ScanOptions) -> list[LineHit]:
    lines = text.splitlines(keepends=True)
    hits: list[LineHit] = []
    launches = kind in SCRIPT_KINDS and any(LAUNCHER_RE.search(_strip_comment(l, kind)) for l in lines)
    # logical lines of a script: a line ending in a backslash continues on the next one
    logical: list[str] = []
    if kind in SCRIPT_KINDS:
        i = 0
        while i < len(lines):
            j = i
            while j + 1 < len(lines) and lines[j].rstrip("\r\n").endswith("\\"):
                j += 1
            joined = "".join(_strip_comment(l, kind) for l in lines[i:j + 1])
            logical.extend([joined] * (j - i + 1))
            i = j + 1
    for number, line in enumerate(lines, start=1):
        body = line.rstrip("\r\n")
        code = _strip_comment(body, kind)
        if not code.strip():
            continue
        found: list[LineHit] = []
        if kind in SCRIPT_KINDS:
            found.extend(_scan_script_line(code, number, logical[number - 1], launches, kind, options))
        else:
            found.extend(_scan_config_line(code, number, kind, options))
        for hit in found:
            if hit.code in options.codes and not _suppressed(hit.code, body):
                hits.append(hit)
    return hits


def _scan_script_line(code: str, number: int, logical: str, launches: bool, kind: str,
                      options: ScanOptions) -> Iterable[LineHit]:
    covered: list[tuple[int, int]] = []
    for match in CVD_ASSIGN_RE.finditer(code):
        covered.append(match.span())
        value, _quote = _unquote(match.group("value"))
        rest = code[match.end():]
        # `CUDA_VISIBLE_DEVICES=0,1 torchrun ...`: an assignment that prefixes a command
        inline = not match.group("export") and match.group("op") == "=" and rest[:1].isspace() and rest.strip() != ""
        base = (f"{CVD} has no effect on Trainium; the Neuron runtime selects cores with {NRT_CORES} "
                "(logical NeuronCore indices or ranges such as \"0-3\"; a GPU index is not a core index)")
        if inline and LAUNCHER_RE.search(logical):
            # CUDA_VISIBLE_DEVICES=... torchrun ...: each rank gets its own core from init_process_group
            end = match.end() + (len(rest) - len(rest.lstrip(" \t")))
            yield LineHit(CODE_VISIBLE, number, match.start(), end,
                          f"{base}; under torchrun TorchNeuron's init_process_group pins rank LOCAL_RANK to NeuronCore "
                          f"LOCAL_RANK when {NRT_CORES} is unset, and a range here would give every rank all of "
                          "those cores: drop the assignment",
                          replacement="", safety="unsafe")
            continue
        if match.group("export") and launches and code.strip() == match.group(0).strip():
            yield LineHit(CODE_VISIBLE, number, match.start(), match.end(),
                          f"{base}; this script runs torchrun, whose ranks each get NeuronCore LOCAL_RANK from "
                          f"init_process_group only when {NRT_CORES} is unset: delete the line",
                          delete_line=True, safety="unsafe")
            continue
        new_value = _as_range(value)
        raw = match.group("value")
        new_raw = raw.replace(value, new_value, 1) if value else raw
        replacement = (match.group("export") or "") + NRT_CORES + match.group("op") + new_raw
        yield LineHit(CODE_VISIBLE, number, match.start(), match.end(),
                      f"{base}: `{NRT_CORES}{match.group('op')}{new_raw}`",
                      replacement=replacement, safety="unsafe")
    for match in CVD_TOKEN_RE.finditer(code):
        if any(a <= match.start() < b for a, b in covered):
            continue
        yield LineHit(CODE_VISIBLE, number, match.start(), match.end(),
                      f"{CVD} has no effect on Trainium: the Neuron runtime reads {NRT_CORES} (logical NeuronCore "
                      "indices or ranges such as \"0-3\")")
    for match in NPROC_RE.finditer(code):
        hit = _nproc_hit(code, number, match, "value", match.group(0), options, fixable=True)
        if hit:
            yield hit
    for match in DEVICE_ARG_RE.finditer(code):
        yield _device_hit(number, match, f"{match.group('flag')} {match.group('value')}", options)
    for match in BACKEND_ARG_RE.finditer(code):
        yield _backend_hit(number, match, f"{match.group('flag')} nccl", options)
    for match in ENV_ASSIGN_RE.finditer(code):
        advice = _env_advice(match.group("name"))
        if advice:
            yield LineHit(CODE_ENV, number, match.start(), match.end(), f"{match.group('name')}: {advice}")
    for match in SMI_RE.finditer(code):
        yield LineHit(CODE_SMI, number, match.start(), match.end(),
                      "nvidia-smi does not exist on a Trainium host (a `set -e` script stops here): use neuron-ls "
                      "(devices and cores) or neuron-top (utilisation)")


def _env_advice(name: str) -> Optional[str]:
    if name in CUDA_ENV_ADVICE:
        return CUDA_ENV_ADVICE[name]
    if NCCL_ENV_RE.match(name):
        return NCCL_ENV_ADVICE
    return None


def _device_hit(number: int, match: re.Match, shown: str, options: ScanOptions) -> LineHit:
    value = match.group("value")
    new = "neuron" + value[len("cuda"):]
    hit = LineHit(CODE_DEVICE, number, match.start("value"), match.end("value"),
                  f"`{shown}` is a CUDA device; on Trainium the device is `{new}`")
    if options.target == "neuron":
        hit.replacement, hit.safety = new, "safe"
    else:
        hit.message += " (no device-agnostic spelling in a script or config: the code that reads it can use " \
                       "torch.accelerator.current_accelerator())"
    return hit


def _backend_hit(number: int, match: re.Match, shown: str, options: ScanOptions) -> LineHit:
    hit = LineHit(CODE_BACKEND, number, match.start("value"), match.end("value"),
                  f"`{shown}`: the NCCL backend does not exist on Trainium; the process-group backend is `neuron`")
    if options.target == "neuron":
        hit.replacement, hit.safety = "neuron", "safe"
    return hit


def _scan_config_line(code: str, number: int, kind: str, options: ScanOptions) -> Iterable[LineHit]:
    if CVD in code:
        for match in CVD_TOKEN_RE.finditer(code):
            yield LineHit(CODE_VISIBLE, number, match.start(), match.end(),
                          f"{CVD} has no effect on Trainium: the Neuron runtime reads {NRT_CORES} (logical NeuronCore "
                          "indices or ranges such as \"0-3\"; under torchrun init_process_group sets it per rank)")
    for match in CONFIG_KV_RE.finditer(code):
        key, _ = _unquote(match.group("key"))
        key_l = key.lower().rsplit(".", 1)[-1]
        value = match.group("value")
        if kind == JSON and not match.group("q") and not value.isdigit():
            continue  # JSON strings are quoted; true/false/null are not devices
        if value == "cuda" or re.fullmatch(r"cuda:\d+", value):
            if key_l in ("device", "device_type", "device_map") or key_l.endswith(("_device", "-device")):
                yield _device_hit(number, match, f"{key}: {value}", options)
        elif value == "nccl" and (key_l == "backend" or key_l.endswith(("_backend", "-backend"))):
            yield _backend_hit(number, match, f"{key}: nccl", options)
        elif key_l in COUNT_KEYS and (value.isdigit() or value in ("gpu", "auto")):
            yield from filter(None, [_nproc_hit(code, number, match, "value", match.group(0), options,
                                                fixable=key_l in PER_NODE_COUNT_KEYS)])
        else:
            advice = _env_advice(key)
            if advice:
                yield LineHit(CODE_ENV, number, match.start(), match.end(), f"{key}: {advice}")


# -- applying --------------------------------------------------------------------------------------
def _allowed(hit: LineHit, options: ScanOptions) -> bool:
    if hit.replacement is None and not hit.delete_line:
        return False
    if options.target != "neuron":
        return False
    return hit.safety == "safe" or (hit.safety == "unsafe" and options.unsafe_fixes)


def _apply(text: str, hits: Sequence[LineHit], options: ScanOptions) -> tuple[str, set[int]]:
    lines = text.splitlines(keepends=True)
    applied: set[int] = set()
    by_line: dict[int, list[tuple[int, LineHit]]] = {}
    for index, hit in enumerate(hits):
        if _allowed(hit, options):
            by_line.setdefault(hit.line, []).append((index, hit))
    for number, entries in by_line.items():
        line = lines[number - 1]
        if any(h.delete_line for _, h in entries):
            index = next(i for i, h in entries if h.delete_line)
            lines[number - 1] = ""
            applied.add(index)
            continue
        taken: list[tuple[int, int]] = []
        for index, hit in sorted(entries, key=lambda e: e[1].start, reverse=True):
            if any(not (hit.end <= a or hit.start >= b) for a, b in taken):
                continue  # overlapping fixes: the other one wins this pass
            line = line[:hit.start] + (hit.replacement or "") + line[hit.end:]
            taken.append((hit.start, hit.end))
            applied.add(index)
        lines[number - 1] = line
    return "".join(lines), applied


def _finding(hit: LineHit, path: str, applied: bool, cell: Optional[int], line_offset: int) -> Finding:
    available = hit.replacement is not None or hit.delete_line
    return Finding(
        code=hit.code, name=NAMES[hit.code], severity=SEVERITY[hit.code], path=path,
        line=hit.line + line_offset, column=hit.start + 1, end_line=hit.line + line_offset,
        end_column=max(hit.end, hit.start + 1) + 1, message=hit.message,
        fix=Fix(available=available, applied=applied, safety=hit.safety if available else "none"),
        effort=None if available else EFFORT[hit.code], cell=cell,
    )


def transform_text(text: str, kind: str, options: ScanOptions, path: str = "<string>",
                   cell: Optional[int] = None, line_offset: int = 0) -> ScanOutcome:
    """Findings for one script or config, and the text with the allowed fixes applied."""
    if not any(t in text for t in TRIGGERS):
        return ScanOutcome(text=text)
    hits = scan_lines(text, kind, options)
    if not hits:
        return ScanOutcome(text=text)
    new_text, applied = _apply(text, hits, options)
    findings = [_finding(h, path, i in applied, cell, line_offset) for i, h in enumerate(hits)]
    if new_text != text:
        # a second pass must find nothing more to change (the engine's idempotency guarantee)
        again = [h for h in scan_lines(new_text, kind, options) if _allowed(h, options)]
        if again:
            raise RewriteError(f"{path}:{again[0].line}: the rewrite did not settle; file left unchanged "
                               "(please report this with the file)")
    return ScanOutcome(text=new_text, findings=findings, fixes_applied=len(applied) if new_text != text else 0)


def process_launch_file(source: "SourceFile", options, result: "FileResult", kind: str) -> "FileResult":
    """The runner's entry for a script or config (``options`` is a runner.RunOptions). Files that are
    not text, do not decode or exceed --max-file-size are skipped quietly: a data file named ``*.json``
    is not the user's code."""
    codes = frozenset(options.rule_codes) & frozenset(CODES)
    if not codes:
        result.skipped = True
        return result
    try:
        if options.max_bytes and source.real.stat().st_size > options.max_bytes:
            result.skipped = True
            return result
        decoded = read_source(source.real, source.display)
    except SourceError:
        result.skipped = True
        return result
    if not any(t in decoded.text for t in TRIGGERS):
        result.skipped = True
        return result
    scan = ScanOptions(codes=codes, target=options.target, unsafe_fixes=options.unsafe_fixes,
                       cores=describe_cores(getattr(options, "instance", None), getattr(options, "neuron_cores", None)))
    outcome = transform_text(decoded.text, kind, scan, path=source.display)
    result.findings = outcome.findings
    if outcome.text != decoded.text:
        result.new_bytes = encode_source(outcome.text, decoded.encoding, source.display)
        result.fixes_applied = outcome.fixes_applied
        if options.want_diff:
            result.diff = unified_diff(decoded.text, outcome.text, source.display)
    return result
