"""`--output-format gitlab`: GitLab Code Quality issues (issue 38 item 2), through the real CLI: the fields
GitLab reads (check_name, description, severity, fingerprint, location.path, location.lines.begin), a
fingerprint that survives lines added above a finding and differs between two equal findings of a file,
and a file that could not be processed as an issue at its line."""

from __future__ import annotations

import json

SOURCE = "import torch\nx = torch.zeros(2).cuda()\ny = torch.ones(2).cuda()\ntorch.cuda.synchronize()\n"


def test_gitlab_code_quality_issues(tmp_path, cli):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(SOURCE)
    (tmp_path / "broken.py").write_text("x = y.cuda(\n")
    result = cli("rewrite", "--check", "--output-format", "gitlab", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    issues = json.loads(result.stdout)
    assert {i["check_name"] for i in issues} == {"neuron-port", "NP103", "NP201"}
    for issue in issues:
        assert set(issue) == {"check_name", "description", "severity", "fingerprint", "location"}
        assert issue["severity"] in ("info", "minor", "major", "critical", "blocker")
        assert isinstance(issue["location"]["lines"]["begin"], int) and len(issue["fingerprint"]) == 64
    moved = sorted((i["location"]["lines"]["begin"], i["check_name"]) for i in issues
                   if i["location"]["path"] == "pkg/train.py")
    assert moved == [(2, "NP103"), (3, "NP103"), (4, "NP201")]
    [broken] = [i for i in issues if i["check_name"] == "neuron-port"]
    assert broken["location"] == {"path": "broken.py", "lines": {"begin": 1, "end": 1}}
    np103 = [i for i in issues if i["check_name"] == "NP103"]
    assert np103[0]["severity"] == "major" and np103[0]["description"].startswith("NP103 cuda-method-call: ")
    assert len({i["fingerprint"] for i in issues}) == len(issues)

    (tmp_path / "pkg" / "train.py").write_text("# a comment above\n\n" + SOURCE)
    again = json.loads(cli("rewrite", "--check", "--output-format", "gitlab", ".", cwd=tmp_path).stdout)
    assert {i["fingerprint"]: i["location"]["lines"]["begin"] for i in again if i["check_name"] != "neuron-port"} \
        == {i["fingerprint"]: i["location"]["lines"]["begin"] + 2 for i in issues if i["check_name"] != "neuron-port"}
