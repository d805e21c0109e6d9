"""Codes below, words above: the journal, reconciliation and compensations answer in codes, and
the console's words (handover/words.py, and handover/why_words.py for journal.why's reasons)
say every code, each a template Django's translation machinery can translate."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import pytest
from django.db import models
from django.utils.functional import Promise

from compensations.reversibility import ReversibilityKind
from handover import audit_words, why_words, words
from handover.codes import NextActionCode, NotDoneWhy, ReasonAnswer, TimelineSays
from journal.models import ErrorClass, RunStatus
from journal.why import CallVerdict, CleanupCode, RunWhy

ROOT = Path(__file__).resolve().parents[2]
DOMAIN = ("journal", "reconciliation", "compensations")

# A word: two letters or more, once placeholders (%(name)s, %s, {name}) and strftime directives
# are taken out. A sentence: three words or more with a space between.
_PLACEHOLDER = re.compile(r"%\([a-z_]+\)[sdr]|%[a-zA-Z]|\{[^}]*\}")
_WORD = re.compile(r"[A-Za-z]{2,}")
# SQL, or a statement's fragment: keywords in capitals, or a cast.
_SQL = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE|RETURNING|ALTER TABLE|WHERE|VALUES|JOIN|AS v)\b|::")
# A list of identifiers (a statement's columns): "run_id, intent_id, kind".
_IDENTIFIERS = re.compile(r"^\s*[a-z_][a-z0-9_]*(,\s*[a-z_][a-z0-9_]*)+\s*$")

# Calls whose string arguments are for developers or operators, not for a person using the
# console: loggers, Django's system checks, and the admin's own message calls.
_LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "log"}
_CHECK_MESSAGES = {"Error", "Warning", "Critical", "Info", "Debug"}
# An exception's message passed up its constructor, and a type named for mypy.
_FOR_DEVELOPERS = {"CommandError", "__init__", "cast"}
# Keyword arguments that describe a field, a command or a form to Django (the admin, --help).
_DESCRIBING = {"help_text", "verbose_name", "verbose_name_plural", "help", "label", "description"}

# Where a domain file may still say something in English, and why. Each entry is a file and
# the function (or "<module>") it is in.
ALLOWED: dict[tuple[str, str], str] = {
    # Management commands are an operator's terminal: their output is the command's interface.
    ("reconciliation/management/commands/reconcile.py", "*"): "a command's terminal output",
    ("reconciliation/management/commands/seam_seed.py", "*"): "a command's terminal output",
    # The Django admin is its own interface, configured in the app it administers.
    ("reconciliation/admin.py", "*"): "the admin's filter label",
    ("compensations/admin.py", "*"): "the admin's filter label",
    ("journal/tenant_admin.py", "*"): "the admin's answer to input it refuses",
    # The transition table documents each move beside its code; nothing shows these words.
    ("journal/transitions.py", "<module>"): "the transition table's documentation of each move",
    # A declaration that differs from its stored row, said by seam_seed and a system check;
    # a catalogue entry's problems, said by `manage.py check`: for the developer.
    ("compensations/defaults.py", "words"): "a developer's message from seam_seed and a system check",
    ("compensations/checks.py", "_entry_problems"): "a system check's message",
    ("compensations/checks.py", "_argument_problems"): "a system check's message",
    # A refusal's message for the API, beside its typed code (AttemptCode), as every raised
    # JournalError carries one; built before it is raised, since the refusal is recorded first.
    ("journal/attempts.py", "_refusal"): "an API refusal's message, beside its typed code",
    ("journal/attempts.py", "_retry_refusal"): "an API refusal's message, beside its typed code",
    # The message of the error a durable write raises inside an open transaction: a developer's.
    ("journal/durability.py", "<module>"): "an exception's message, kept in a constant",
}


@dataclass(frozen=True)
class Sentence:
    path: str
    function: str
    line: int
    text: str


def _text(node: ast.expr) -> str | None:
    """A string constant's text, or an f-string's with each value as a placeholder."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def is_sentence(text: str) -> bool:
    plain = _PLACEHOLDER.sub(" ", text)
    if _SQL.search(plain) or _IDENTIFIERS.match(plain):
        return False
    return " " in plain.strip() and len(_WORD.findall(plain)) >= 3


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


class _Finder(ast.NodeVisitor):
    """The sentences of one file that nothing excuses."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.function = ["<module>"]
        self.found: list[Sentence] = []

    def _body(self, node: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        body = node.body
        if body and isinstance(body[0], ast.Expr) and _text(body[0].value) is not None:
            body = body[1:]  # the docstring
        for child in body:
            self.visit(child)

    def visit_Module(self, node: ast.Module) -> None:
        self._body(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.function.append(node.name)
        for decorator in node.decorator_list:
            self.visit(decorator)
        self._body(node)
        self.function.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
        if node.name == "Meta" or bases & {"TextChoices", "IntegerChoices", "Choices"}:
            return  # a model's Meta (permissions' names) and the labels of a code's values
        self._body(node)

    def visit_Raise(self, node: ast.Raise) -> None:
        return  # an exception's message, for the developer (an API error carries its own code)

    def visit_Call(self, node: ast.Call) -> None:
        name = _call_name(node)
        if name in _LOG_METHODS or name in _CHECK_MESSAGES or name in _FOR_DEVELOPERS:
            return
        self.visit(node.func)
        for arg in node.args:
            self.visit(arg)
        for keyword in node.keywords:
            if keyword.arg not in _DESCRIBING:
                self.visit(keyword.value)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self._check(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        self._check(node)

    def _check(self, node: ast.expr) -> None:
        text = _text(node)
        if text is not None and is_sentence(text):
            self.found.append(Sentence(self.path, self.function[-1], node.lineno, text))


def domain_sentences() -> list[Sentence]:
    found = []
    for package in DOMAIN:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            relative = path.relative_to(ROOT).as_posix()
            finder = _Finder(relative)
            finder.visit(ast.parse(path.read_text(), relative))
            found += finder.found
    return found


def _allowed(sentence: Sentence) -> bool:
    return (sentence.path, "*") in ALLOWED or (sentence.path, sentence.function) in ALLOWED


def test_the_rule_finds_a_sentence_and_excuses_what_is_not_one() -> None:
    source = '''
"""A docstring is not a sentence."""
import logging
log = logging.getLogger(__name__)
class Kind(models.TextChoices):
    YES = "yes", "Reversible as it was"
def f(n):
    log.warning("could not settle %s after all", n)
    field = models.CharField(help_text="What the downstream said back.")
    when = "%Y-%m-%d %H:%M:%S %Z"
    sql = "UPDATE journal_run SET version = version + 1 WHERE id = %s"
    if n:
        raise ValueError(f"run {n} is not a run of this tenant")
    return f"the plan has {n} steps, more than allowed"
'''
    finder = _Finder("example.py")
    finder.visit(ast.parse(source))
    assert [s.text for s in finder.found] == ["the plan has {} steps, more than allowed"]


def test_the_domain_builds_no_english_sentence() -> None:
    found = [s for s in domain_sentences() if not _allowed(s)]
    assert not found, (
        "English sentences in the domain; return a code and say it in handover/words.py:\n"
        + "\n".join(f"{s.path}:{s.line} ({s.function}): {s.text!r}" for s in found)
    )


def test_every_allowance_is_still_needed() -> None:
    """An allowance whose file or function says nothing in English any more goes. (One whose
    file is gone is not checked: a file being split moves its sentences, and their allowance,
    elsewhere.)"""
    found = domain_sentences()
    used = {(s.path, "*") for s in found} | {(s.path, s.function) for s in found}
    present = {key for key in ALLOWED if (ROOT / key[0]).is_file()}
    assert present <= used, f"allowed but no longer needed: {sorted(present - used)}"


@pytest.mark.parametrize(
    ("codes", "said"),
    [
        (NextActionCode, words.NEXT_ACTION_WORDS),
        (NextActionCode, words.NEXT_ACTION_SAYERS),
        (ReasonAnswer, words.REASON_ANSWER_WORDS),
        (NotDoneWhy, words.NOT_DONE_WORDS),
        (TimelineSays, words.TIMELINE_WORDS),
        (ReversibilityKind, words.REVERSIBILITY_WORDS),
        (ErrorClass, words.ERROR_CLASS_WORDS),
        (ErrorClass, words.ERROR_CLASS_REASONS),
        (CallVerdict, why_words.VERDICT_WORDS),
        (RunWhy, why_words.RUN_WHY_WORDS),
        (CleanupCode, why_words.CLEANUP_WORDS),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_every_code_has_its_words(
    codes: type[models.TextChoices] | type[StrEnum], said: dict[str, object]
) -> None:
    assert set(said) == {str(code) for code in codes}


def test_every_ended_run_status_has_its_words() -> None:
    assert set(words.CLOSED_SAYS) == set(RunStatus.values) - {RunStatus.RUNNING}


def _templates() -> list[tuple[str, object]]:
    found = []
    for name, value in [*vars(words).items(), *vars(why_words).items(), *vars(audit_words).items()]:
        if name.startswith("_"):
            continue
        if isinstance(value, Promise):
            found.append((name, value))
        elif isinstance(value, dict):
            found += [(f"{name}[{k}]", v) for k, v in value.items() if isinstance(v, str | Promise)]
    return found


@pytest.mark.parametrize(("name", "template"), _templates(), ids=[n for n, _ in _templates()])
def test_every_sentence_is_ready_for_translation(name: str, template: object) -> None:
    """A template people read is a lazy translation; one made of placeholders only (the catalogue's
    own words, a label) has nothing to translate. Placeholders are named, so a translation may
    reorder them."""
    text = str(template)
    if is_sentence(text) or _WORD.search(_PLACEHOLDER.sub(" ", text)):
        assert isinstance(template, Promise), f"{name} is not wrapped in gettext_lazy"
    assert not re.search(r"%[sd]", text), f"{name} has an unnamed placeholder"
