"""The series' PR descriptions (= commit messages), with their numbers filled from the plan.

The templates live in ``templates/pr/`` inside the installed package, so the command
works from a wheel.  A template holds prose and evidence only; every number in it comes
from the plan of the tree it is committed to: ``{size}`` (lines added and removed, the
non-test Python lines the budget counts) and ``{left_out}`` (the sites this tree did not
take, each with its reason); every measurement comes from the evidence ledger,
``{evidence:<id>}`` (``sglang_arch.arch.evidence``), quoted as published.  ``docs/upstream/*.md`` are the texts as committed to the
installed ``sglang`` release (``python -m sglang_arch.upstream.texts`` rewrites them;
a test fails when they drift).
"""

from __future__ import annotations

import re
import sys
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Optional, Sequence, Tuple

from .steps import LEFT_OUT, STEPS, Step

if TYPE_CHECKING:
    from .series import StepResult

DOCS_DIR = Path("docs") / "upstream"


def template(name: str) -> str:
    """A file of ``templates/`` (``name`` may contain ``/``)."""
    node = resources.files(__package__).joinpath("templates")
    for part in name.split("/"):
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def size_line(result: "StepResult") -> str:
    added, removed = result.counts
    budget = sum(change.counts[0] for change in result.changes if change.is_python_source)
    tests = result.test_counts[0]
    return (f"+{added} -{removed} lines in {len(result.changes)} file(s); {budget} added lines of "
            f"non-test Python, {tests} of tests")


def left_out_lines(result: "StepResult") -> str:
    lines = [f"- {o.site}: {o.detail}" for o in result.outcomes if o.status == LEFT_OUT]
    if result.skipped:
        lines.append(f"- the whole step: {result.skipped}")
    if result.tests_note:
        lines.append(f"- {result.tests_note}")
    return "\n".join(lines) if lines else "Nothing: every site of this PR applies to this tree."


_EVIDENCE = re.compile(r"\{evidence:([a-z0-9-]+)\}")


def evidence_block(evidence_id: str) -> str:
    """A ledger entry (``sglang_arch.arch.evidence``) quoted as the PR text shows it: the
    figures exactly as published, what they were measured on, and where."""
    from ..arch.evidence import entry as evidence

    entry = evidence(evidence_id)
    lines = [f"> {entry.numbers}", ">", f"> {entry.hardware}; {entry.software}. Source: {entry.source}."]
    if entry.limits:
        lines.append(f">\n> Limits: {entry.limits}.")
    return "\n".join(lines)


def pr_text(step: Step, result: "StepResult") -> Tuple[str, str]:
    """(commit subject, commit body) of a step on the tree ``result`` was planned for."""
    text = template(f"pr/{step.pr_name}")
    first, _, rest = text.partition("\n")
    if not first.startswith("# "):
        raise ValueError(f"templates/pr/{step.pr_name}: the first line must be '# <commit subject>'")
    body = rest.strip("\n").replace("{size}", size_line(result)).replace("{left_out}", left_out_lines(result))
    body = _EVIDENCE.sub(lambda m: evidence_block(m.group(1)), body)
    return first[2:].strip(), body


def pr_docs(package: Optional[Path] = None) -> Dict[str, str]:
    """``docs/upstream/<PR>.md`` for each step, as planned on ``package`` (an installed
    sglang package directory; by default the one Python imports)."""
    from .series import locate, plan_series

    if package is None:
        import sglang

        package = Path(sglang.__file__).resolve().parent
    from importlib.metadata import version

    results = plan_series(locate(str(package)))
    docs = {}
    for step, result in zip(STEPS, results):
        subject, body = pr_text(step, result)
        docs[step.pr_name] = (f"# {subject}\n\n<!-- The text `sglang-arch upstream --into-git` commits, "
                              f"planned on the installed sglang {version('sglang')} package. -->\n\n{body}\n")
    return docs


def write_docs(root: Path) -> Sequence[Path]:
    """Write ``docs/upstream/*.md`` under the repository ``root``; the paths written."""
    out = root / DOCS_DIR
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in pr_docs().items():
        path = out / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(args[0]) if args else Path(__file__).resolve().parents[3]
    if not (root / "python" / "sglang_arch").is_dir():
        print(f"{root} is not an sglang-arch checkout; pass the repository root", file=sys.stderr)
        return 2
    for path in write_docs(root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
