"""Where one pre-commit hook run's CPU time goes: `neuron-port rewrite --check --diff -q --no-cache FILE` run
in this process with marks between its phases (CPU milliseconds of this process, ``time.process_time``).

    /tmp/new-venv/bin/python bench/rewrite/hook_phases.py FILE [--runs 5]

Run it with the python of the install to measure, from the folder the hook runs in (FILE relative to it);
each run is a fresh process (``--runs`` of them), and a table of every run's phases is printed. The
phases: importing the CLI (the console script's module and, since the fourth pass of Issue 20, the
typer-free modules a plain `rewrite` line runs; cli.py before); the command line, settings and discovery (typer's dispatch when the
line is not a plain one); ``import libcst``; the engine's own modules; the rule modules and the rules'
pre-filters; the parse (CPython's nesting check of a long text and LibCST's parse); the rules' pass (the
walk, the per-file analyses, the scope folding); the positions of the findings (one render of the
tree); when a fix applies, the fixes applied and the new text (issue 38: from the edited statements) and
the follow-up rules' pass on the fixed tree (the fixed point, issue 34); what is left of the file's work
(the left findings' places, the syntax check of the new text, the diff); the report and exit. The interpreter's own start (~20 ms) is not
in the table. The marks wrap functions of neuron_port.rewrite (file_work.process_file, engine._parse,
engine.node_positions, engine._run_rules), so this measures installs that have them.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

PHASES = ("import cli", "command line, settings, discovery", "import libcst", "import engine",
          "rule modules, pre-filters", "parse", "rules' pass", "positions", "rest of the file", "report, exit",
          "fixes applied, new text", "follow-up rules' pass")


def _one_run(path: str) -> None:
    """The marked run, in this process; prints `phase<TAB>ms` lines on stderr at exit."""
    import atexit

    rows: list[tuple[str, float]] = []
    last = [time.process_time()]

    def mark(label: str) -> None:
        now = time.process_time()
        rows.append((label, (now - last[0]) * 1000))
        last[0] = now

    sys.argv = ["neuron-port", "rewrite", "--check", "--diff", "-q", "--no-cache", path]
    try:  # the console script's module (commands/entry.py since Issue 20's fourth pass)
        import neuron_port.commands.entry as cli
    except ImportError:  # an older install: cli.py was the console script's module
        import neuron_port.cli as cli  # type: ignore[no-redef]
    for name in ("neuron_port.commands.rewrite_run", "neuron_port.commands.rewrite_argv"):
        try:  # what a `rewrite` line imports (rewrite_argv: the hand-written parser, gone since issue 38)
            __import__(name)
        except ImportError:
            pass
    mark(PHASES[0])
    import neuron_port.rewrite.file_work as file_work
    import neuron_port.rewrite.runner as runner

    process_file = file_work.process_file

    def marked_process_file(*args, **kwargs):
        mark(PHASES[1])
        try:  # since Issue 20's fifth pass the engine is imported inside compiled_once() (dataclass_code.py)
            from neuron_port.rewrite.dataclass_code import compiled_once
        except ImportError:
            from contextlib import nullcontext as compiled_once  # type: ignore[assignment]
        with compiled_once():
            import libcst  # noqa: F401
            mark(PHASES[2])
            import neuron_port.rewrite.engine as engine
        mark(PHASES[3])
        parse, positions = engine._parse, engine.node_positions

        def marked_parse(*a, **k):
            mark(PHASES[4])
            tree = parse(*a, **k)
            mark(PHASES[5])
            return tree

        def marked_positions(*a, **k):
            mark(PHASES[6])
            found = positions(*a, **k)
            mark(PHASES[7])
            return found

        run_rules = engine._run_rules
        calls = [0]

        def marked_run_rules(*a, **k):
            if calls[0]:
                mark(PHASES[10])
            found = run_rules(*a, **k)
            if calls[0]:
                mark(PHASES[11])
            elif found[1] is None:  # no positions: the pass ends here
                mark(PHASES[6])
            calls[0] += 1
            return found

        def marked_positions_once(*a, **k):  # the follow-up's positions (older installs) count as its pass
            return marked_positions(*a, **k) if not calls[0] else positions(*a, **k)

        engine._parse, engine.node_positions = marked_parse, marked_positions_once
        engine._run_rules = marked_run_rules
        outcome = process_file(*args, **kwargs)
        mark(PHASES[8])
        return outcome

    file_work.process_file = runner.process_file = marked_process_file

    def report() -> None:
        mark(PHASES[9])
        for label, ms in rows:
            print(f"{label}\t{ms:.0f}", file=sys.stderr)
        print(f"total\t{sum(ms for _, ms in rows):.0f}", file=sys.stderr)

    atexit.register(report)
    cli.main()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a single marked run
    args = parser.parse_args()
    if args.one:
        _one_run(args.file)
        return
    table: dict[str, list[str]] = {}
    for _ in range(args.runs):
        proc = subprocess.run([sys.executable, __file__, args.file, "--one"], capture_output=True, text=True)
        for line in proc.stderr.splitlines():
            if "\t" in line:
                label, ms = line.split("\t")
                table.setdefault(label, []).append(ms)
    width = max(map(len, table), default=10)
    print(f"CPU ms per phase, {args.runs} runs of `neuron-port rewrite --check --diff -q --no-cache {args.file}`")
    for label, values in table.items():
        numbers = sorted(map(int, values))
        print(f"  {label:{width}}  " + " ".join(f"{v:>5}" for v in values)
              + f"   median {statistics.median(numbers):>6.1f}  min {numbers[0]:>4}")


if __name__ == "__main__":
    main()
