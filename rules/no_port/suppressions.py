"""NP799: suppression comments that cannot do what they say (malformed, or naming no rule).

It sits at the end of the NP7xx range (findings with no automatic fix) because no family is about
neuron-port's own comments; the parsing is neuron_port/rewrite/suppression.py's, the one the engines use.
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rewrite.suppression import parse_directive, unknown_codes
from neuron_port.rules.spec import Invalid, PythonRule, Valid


class InvalidSuppression(PythonRule):
    """Reports ``# neuron-port: ignore`` comments that are malformed or name no rule.

    ## What it does
    Reports a suppression comment whose codes are not a comma-separated list in brackets
    (``ignore[NP101;NP102]``, ``ignore[*]``, ``ignore[]``, an unclosed ``ignore[``, ``ignore NP101``,
    ``ignore:NP101``), and each code in a valid one that is neither a rule code nor a prefix of one
    (``ignore[NP999]``, a rule's name). A bare ``# neuron-port: ignore`` suppresses every code on its
    line and is not reported.

    ## Why is this bad?
    A malformed suppression suppresses nothing: read as a bare ``ignore`` it would hide every finding on
    the line, the opposite of the few codes its author meant. An unknown code suppresses nothing either,
    usually because of a typo, so the finding it was meant for is still reported.

    ## Example
    ```python
    x = x.cuda()  # neuron-port: ignore[NP103;NP101]
    ```
    Use instead:
    ```python
    x = x.cuda()  # neuron-port: ignore[NP103, NP101]
    ```

    ## Fix safety
    No automatic fix: which codes were meant is for the author to say.

    ## References
    - README.md, "Suppressing a finding"; ruff reports unknown codes in ``# noqa`` the same way
      (RUF100 unused-noqa, astral-sh/ruff)
    """

    CODE = "NP799"
    NAME = "invalid-suppression"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = "malformed `# neuron-port: ignore` comment: it suppresses nothing"
    TRIGGERS = ("neuron-port",)

    VALID = [
        Valid("x = x.cuda()  # neuron-port: ignore\n"),
        Valid("x = x.cuda()  # neuron-port: ignore[NP103, NP1]\n"),
        Valid("x = x.cuda()  # neuron-port: ignore [np103,]  # spaces and a trailing comma are fine\n"),
        Valid("# neuron-port is the tool that ported this file\n"),
    ]
    INVALID = [
        Invalid("x = x.cuda()  # neuron-port: ignore[NP103;NP101]\n", message_contains="suppresses nothing"),
        Invalid("x = x.cuda()  # neuron-port: ignore[*]\n", message_contains="no list of rule codes"),
        Invalid("x = x.cuda()  # neuron-port: ignore[NP103\n", message_contains="never closed"),
        Invalid("x = x.cuda()  # neuron-port: ignore NP103\n", message_contains="codes go in brackets"),
        Invalid("def f(x):\n    # neuron-port: ignore[NP103, NP999]\n    return x\n",
                message_contains="`NP999`"),
    ]

    def visit_Comment(self, node: cst.Comment) -> None:
        directive = parse_directive(node.value)
        if directive is None:
            return
        if directive.problem is not None:
            self.report(node, f"`{directive.text}` is malformed and suppresses nothing: {directive.problem}")
            return
        from neuron_port.rules.registry import all_rules  # the registry imports this module

        for code in unknown_codes(directive, [rule.CODE for rule in all_rules()]):
            self.report(node, f"`{code}` in `{directive.text}` is not a rule code or a prefix of one, so it "
                              "suppresses nothing (`neuron-port rules` lists the codes)")

    # Comments sit in these whitespace nodes, which the engine's walk enters only for a rule that visits
    # them (neuron_port/rewrite/traversal.py).
    def visit_EmptyLine(self, node: cst.EmptyLine) -> None:
        return None

    def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
        return None

    def visit_ParenthesizedWhitespace(self, node: cst.ParenthesizedWhitespace) -> None:
        return None
