"""Buildkite's upload-time interpolation, re-implemented for the tests (never used by the product).

``buildkite-agent pipeline upload`` parses the YAML, then interpolates every string (keys too) against the uploading
job's environment, unless ``--no-interpolation`` is given. The rules follow the grammar of buildkite/interpolate
(parser.go), which the agent uses:

    EscapedBackslash = "\\\\"  (kept as both characters)     EscapedDollar = "\\$" | "$$"  (one "$")
    "$(" is kept (a shell command substitution)             a "$" as the last character is kept
    Expansion = "$" Identifier | "${" Identifier [ Operation ] "}"   Identifier = letter { letter | digit | "_" }
    Operation = ":-" Expression | "-" Expression | ":" offset [ ":" length ] | "?" Expression | "%"... | "#"...

A ``$`` followed by anything else (``$0``, ``$-``) fails the upload, as does ``${VAR?}`` with VAR unset.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml


class InterpolationError(Exception):
    """The upload fails: a malformed expansion or a required variable that is unset."""


@dataclass
class Interpolation:
    text: str
    expanded: list[str] = field(default_factory=list)  # identifiers that were looked up


class _Parser:
    def __init__(self, text: str, env: Mapping[str, str], expanded: list[str]) -> None:
        self.text, self.pos, self.env, self.expanded = text, 0, env, expanded

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def expression(self, stop: str = "") -> str:
        out: list[str] = []
        while self.pos < len(self.text) and self.peek() not in stop:
            rest = self.text[self.pos :]
            if rest.startswith("\\\\"):
                out.append("\\\\")
                self.pos += 2
            elif rest.startswith(("\\$", "$$")):
                out.append("$")
                self.pos += 2
            elif rest.startswith("$("):
                out.append("$(")
                self.pos += 2
            elif rest[0] == "$" and len(rest) > 1:
                out.append(self.expansion())
            else:
                start = self.pos
                self.pos += 1
                while self.pos < len(self.text) and self.peek() not in "$\\" + stop:
                    self.pos += 1
                out.append(self.text[start : self.pos])
        return "".join(out)

    def identifier(self) -> str:
        if not self.peek().isalpha():
            raise InterpolationError(f"Expected identifier to start with a letter, got {self.peek()!r}")
        start = self.pos
        while self.pos < len(self.text) and (self.peek().isalnum() or self.peek() == "_"):
            self.pos += 1
        return self.text[start : self.pos]

    def expansion(self) -> str:
        self.pos += 1  # "$"
        if self.peek() != "{":
            name = self.identifier()
            self.expanded.append(name)
            return self.env.get(name, "")
        self.pos += 1
        name = self.identifier()
        self.expanded.append(name)
        value = self.env.get(name)
        if self.peek() == "}":
            self.pos += 1
            return value or ""
        for operator in (":-", "-", "?", ":", "%%", "%", "##", "#"):
            if self.text.startswith(operator, self.pos):
                self.pos += len(operator)
                break
        else:
            raise InterpolationError(f"Expected an operator, got {self.peek()!r}")
        if operator in (":-", "-", "?"):
            word = self.expression(stop="}")
            result = {
                ":-": value if value else word,
                "-": word if value is None else value,
                "?": value,
            }[operator]
            if result is None:
                raise InterpolationError(f"${name}: {word or 'not set'}")
        else:  # substring and pattern removal: the value, cut; what matters here is that it expanded
            while self.pos < len(self.text) and self.peek() != "}":
                self.pos += 1
            result = value or ""
        if self.peek() != "}":
            raise InterpolationError("Expected brace expansion to end with }")
        self.pos += 1
        return result


def interpolate(text: str, env: Mapping[str, str]) -> Interpolation:
    expanded: list[str] = []
    return Interpolation(_Parser(text, env, expanded).expression(), expanded)


def upload(pipeline_text: str, env: Mapping[str, str], *, no_interpolation: bool) -> tuple[Any, list[str]]:
    """What the agent uploads for ``pipeline_text``: the parsed pipeline, and every variable that was expanded."""
    parsed = yaml.safe_load(pipeline_text)
    if no_interpolation:
        return parsed, []
    expanded: list[str] = []

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            result = interpolate(value, env)
            expanded.extend(result.expanded)
            return result.text
        if isinstance(value, dict):
            return {walk(k): walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(parsed), expanded


def upload_flags(command: str) -> list[str] | None:
    """The flags of ``buildkite-agent pipeline upload`` in a shell command line (None: the line uploads nothing)."""
    for part in command.split("|"):
        words = shlex.split(part)
        if words[:3] == ["buildkite-agent", "pipeline", "upload"]:
            return words[3:]
    return None
