"""Set-up step of the real-project scoreboard: extract every project of projects.py at its pinned commit
and install the pinned extras into a bench venv. Nothing lands in the repository's tracked tree.

    .venv/bin/python bench/projects/setup.py [--mirrors DIR] [--only NAME ...]

Sources come from bare git mirrors of the GitHub repositories, one per repo, at
DIR/<owner>+<name>/repo (default /work/.mirror, where the search tool's `fetch github:<owner>/<name>` puts
them; any `git clone --mirror` of the repository works). The pinned commit is extracted with `git archive`
into bench/projects/.work/src/<owner>+<name>@<commit[:12]>[+<root>]/ (only the project's folder), and .work/sources.json records repo, commit and folder.

The bench venv (.work/venv) sees the main .venv's packages through a .pth file (torch 2.13.0 is never
reinstalled: pip runs with the main venv's `pip freeze` as constraints) and gets requirements.txt on top;
a second .pth imports shims/bench_projects_shim.py at start-up (see there).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
REPO_ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from projects import PROJECTS  # noqa: E402


def source_dir(repo: str, commit: str, root: str = "") -> Path:
    """Where the project's folder `root` of repo@commit is extracted (the folder itself, not its parents)."""
    tail = "+" + root.replace("/", "+") if root else ""
    return WORK / "src" / f"{repo.replace('/', '+')}@{commit[:12]}{tail}"


def extract(repo: str, commit: str, mirrors: Path, root: str = "") -> Path:
    """Only `root` is extracted: snapshots may lack large blobs elsewhere in the tree (data files)."""
    dest = source_dir(repo, commit, root)
    if (dest / ".bench-complete").exists():
        return dest
    git_dir = mirrors / repo.replace("/", "+") / "repo"
    if (git_dir / ".git").is_dir():  # some snapshots arrive as a work tree's .git rather than a bare mirror
        git_dir = git_dir / ".git"
    if not git_dir.is_dir():
        raise SystemExit(f"setup: no mirror of {repo} at {git_dir} (fetch github:{repo} with the search tool, "
                         f"or `git clone --mirror https://github.com/{repo} {git_dir}`)")
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", commit, "--", root or "."],
                             check=True, capture_output=True).stdout
    entries = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, path = record.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob":
            entries.append((mode.decode(), sha.decode(), path.decode()))
    batch = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "--batch"], check=True,
                           capture_output=True, input="".join(sha + "\n" for _, sha, _ in entries).encode()).stdout
    missing = []
    offset = 0
    for mode, sha, path in entries:
        header_end = batch.index(b"\n", offset)
        header = batch[offset:header_end].split()
        offset = header_end + 1
        if header[-1] == b"missing":
            missing.append(path)  # a large blob the snapshot does not carry (data files)
            continue
        size = int(header[2])
        content = batch[offset:offset + size]
        offset += size + 1
        rel = path[len(root) + 1:] if root else path
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            target.symlink_to(content.decode())
        else:
            target.write_bytes(content)
            if mode == "100755":
                target.chmod(0o755)
    if missing:
        (dest / ".bench-missing").write_text("".join(p + "\n" for p in missing))
    (dest / ".bench-complete").write_text(commit + "\n")
    return dest


def make_venv() -> Path:
    venv = WORK / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = Path(subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    main_site = subprocess.run([sys.executable, "-c", "import site; print(site.getsitepackages()[0])"],
                               check=True, capture_output=True, text=True).stdout.strip()
    # addsitedir (not a bare path) so the main venv's own .pth files run too (the editable neuron-port)
    (site / "main_venv.pth").write_text(f"import site; site.addsitedir({main_site!r})\n")
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--disable-pip-version-check"],
                            check=True, capture_output=True, text=True).stdout
    constraints = WORK / "constraints.txt"
    constraints.write_text("".join(line + "\n" for line in freeze.splitlines()
                                   if "==" in line and not line.startswith("-e")))
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c",
                    str(constraints), "-r", str(HERE / "requirements.txt")], check=True)
    (site / "zz_bench_shims.pth").write_text(f"{HERE / 'shims'}\nimport bench_projects_shim\n")
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--only", nargs="*", default=None, help="project names (default: all)")
    parser.add_argument("--no-venv", action="store_true", help="only extract the sources")
    args = parser.parse_args()
    WORK.mkdir(exist_ok=True)
    sources = WORK / "sources.json"
    records = json.loads(sources.read_text()) if sources.exists() else {}
    for project in PROJECTS:
        if args.only and project.name not in args.only:
            continue
        dest = extract(project.repo, project.commit, args.mirrors, project.root)
        records[project.name] = {"repo": project.repo, "commit": project.commit, "root": project.root,
                                 "source": str(dest.relative_to(REPO_ROOT))}
        print(f"{project.name:28s} {project.repo}@{project.commit[:12]} -> {dest.relative_to(REPO_ROOT)}")
    sources.write_text(json.dumps(records, indent=1) + "\n")
    if not args.no_venv:
        python = make_venv()
        print(f"bench venv: {python.relative_to(REPO_ROOT)}")


if __name__ == "__main__":
    main()
