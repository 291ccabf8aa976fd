"""`neuron-port rewrite -`: one file read from stdin, as ruff does for editors and scripts.

``--stdin-filename NAME`` names it: the kind (a notebook, a shell script, ...), the configuration found
from its folder, the excludes and the findings' path all follow the name. With ``--fix`` the rewritten
source goes to stdout (in the file's own encoding) and the report to stderr; with ``--diff`` the patch
goes to stdout; otherwise the report alone goes to stdout. Nothing of the user's is lost: when the text
cannot be rewritten (it does not parse, is not text) or the name is excluded, ``--fix`` prints the input
unchanged, so an editor that replaces its buffer with the output keeps it.
"""

from __future__ import annotations

import sys
from typing import Optional

from neuron_port.commands.console import err, out
from neuron_port.commands.exit_codes import exit_code
from neuron_port.config import Settings
from neuron_port.report import Report
from neuron_port.reporters import RenderContext, Streams, render_report
from neuron_port.results import FileError, FileResult
from neuron_port.rewrite.discovery import excluded_file

STDIN = "-"


def rewrite_stdin(name: Optional[str], settings: Settings, *, fix: bool, diff: bool, check: bool,
                  output_format: str, statistics: bool, exit_zero: bool, verbose: bool, quiet: bool,
                  instance: Optional[str], neuron_cores: Optional[int]) -> int:
    """Rewrite stdin as the file ``name`` (``-`` when not given); returns the exit code."""
    from neuron_port import api
    from neuron_port.rewrite.errors import RewriteError
    from neuron_port.rewrite.sources import SourceError, decode_source, encode_source
    from neuron_port.rewrite.writer import unified_diff

    display = name or STDIN
    raw = sys.stdin.buffer.read()
    if name is not None and excluded_file(name, settings.exclude):
        if fix:
            _write_stdout(raw)
        if verbose:
            err().print(f"{display}: excluded by the configuration; not checked", markup=False, highlight=False)
        return 0
    report = Report(command="rewrite", target=settings.target, wrote=fix)
    output = raw
    try:
        source = decode_source(raw, display)
        new_text, findings = api.rewrite_source(source.text, path=display, settings=settings, instance=instance,
                                                neuron_cores=neuron_cores)
        new_bytes = None
        if new_text != source.text:
            source.require_round_trip(display)
            new_bytes = encode_source(new_text, source.encoding, display)
    except (RewriteError, SourceError) as exc:
        report.errors.append(FileError(path=display, message=str(exc)))
    else:
        result = FileResult(path=display, real_path=display, findings=findings, new_bytes=new_bytes,
                            fixes_applied=sum(1 for f in findings if f.fix.applied), written=fix)
        if diff and new_bytes is not None:
            result.diff = unified_diff(source.text, new_text, display)
        if fix and new_bytes is not None:
            output = new_bytes
        report.files.append(result)
    code = exit_code(report, settings.fail_on, pending_fails=check, exit_zero=exit_zero)
    if fix:
        _write_stdout(output)
    elif diff and report.files and report.files[0].diff:
        _write_stdout(report.files[0].diff.encode())
    # stdout carries the source or the patch when there is one; the report goes to stderr then
    streams = Streams(out=err() if fix or diff else out(), err=err())
    context = RenderContext(exit_code=code, unsafe_fixes=settings.unsafe_fixes, diff=diff, verbose=verbose,
                            quiet=quiet)
    render_report(report, output_format, context, streams, statistics)
    return code


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
