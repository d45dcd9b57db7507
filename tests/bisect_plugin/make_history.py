"""Builds the git history a bisect test searches: a small vLLM general plugin (``vllm.general_plugins`` entry
point, hooked like ``tests/fault_plugin``) over seven first-parent commits, with planted changes:

- every version's ``EngineCore.step`` first sleeps ``STEP_S`` inside ``afd_e2e_plugin_step_work`` (the plugin's
  "work": it makes TPOT about 100 ms of steady sleep plus the tiny model's few ms, so the shared cores' noise, which
  moves only those few ms, is a few % of TPOT at most and two bench repetitions a probe decide ``parity``);
- from ``CORRUPT_AT`` (1) on, the sampler greedily picks from negated logits: every completion's tokens change (a
  correctness break that parity against the good revision sees);
- from ``SLOW_AT`` (2) on, the step sleeps ``SLOW_STEP_S`` instead (a per-step slowdown TPOT sees);
- at ``BROKEN_AT`` (3) the packaging names a package folder that does not exist, so ``pip install`` fails (skipped);
  the next commit repairs it.
The other commits change nothing the engine runs (a docs line, a version). Why this shape: 3 is the first midpoint
the search picks between 0 and 6, so the packaging break is really probed (and skipped) and, lying after both
planted changes, hides neither answer; the search then picks 2 and 1, the commits both searches need, so the
parity search finds its answer in the TPOT search's runs. Used by ``tests/engine/test_bisect_cpu_vllm.py``, the
unit tests of the bisect command line, and by hand: ``python tests/bisect_plugin/make_history.py DIR``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NAME = "afd-e2e-bisect-plugin"
PACKAGE = "afd_e2e_bisect_plugin"
STEP_S = 0.100
SLOW_STEP_S = 0.200
CORRUPT_AT = 1
SLOW_AT = 2
BROKEN_AT = 3

PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "{version}"
requires-python = ">=3.10"

[project.entry-points."vllm.general_plugins"]
afd_e2e_bisect = "{package}:register"

[tool.setuptools]
packages = ["{packages}"]
"""

PLUGIN = '''"""A vLLM general plugin whose history a bisect test searches (see make_history.py)."""

import functools
import time

STEP_S = {step_s}
NEGATE_LOGITS = {negate}


def afd_e2e_plugin_step_work(seconds):
    time.sleep(seconds)


def _step(step):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        afd_e2e_plugin_step_work(STEP_S)
        return step(self, *args, **kwargs)

    wrapper.afd_e2e_bisect = True
    return wrapper


def _sample(forward):
    @functools.wraps(forward)
    def wrapper(self, logits, *args, **kwargs):
        return forward(self, -logits, *args, **kwargs)

    wrapper.afd_e2e_bisect = True
    return wrapper


def register():
    from vllm.v1.engine.core import EngineCore

    for name in ("step", "step_with_batch_queue"):
        step = getattr(EngineCore, name, None)
        if step is not None and not getattr(step, "afd_e2e_bisect", False):
            setattr(EngineCore, name, _step(step))
    if NEGATE_LOGITS:
        from vllm.v1.sample.sampler import Sampler

        if not getattr(Sampler.forward, "afd_e2e_bisect", False):
            Sampler.forward = _sample(Sampler.forward)
'''

SUBJECTS = [
    "plugin: step work of 100 ms",
    "sampler: pick from the plugin's logit transform",
    "step: account each step's work twice",
    "packaging: move the package folder",
    "packaging: put the package folder back",
    "docs: changelog",
    "release 0.2.0",
]


def _files(index: int) -> dict[str, str]:
    packages = "afd_e2e_bisect_plugin_moved" if index == BROKEN_AT else PACKAGE
    version = "0.2.0" if index == len(SUBJECTS) - 1 else f"0.1.{index}"
    docs = "".join(f"- {s}\n" for s in SUBJECTS[: index + 1] if s.startswith("docs"))
    return {
        "pyproject.toml": PYPROJECT.format(name=NAME, version=version, package=PACKAGE, packages=packages),
        f"{PACKAGE}/__init__.py": PLUGIN.format(
            step_s=SLOW_STEP_S if index >= SLOW_AT else STEP_S, negate=index >= CORRUPT_AT
        ),
        "README.md": f"# {NAME}\n\nA test plugin.\n{docs}",
    }


def make_history(repo: Path) -> list[str]:
    """Create the repository at ``repo``; the full shas, oldest first (index 0: the good revision)."""
    repo.mkdir(parents=True)

    def git(*args: str) -> str:
        env = {"GIT_AUTHOR_DATE": "2026-12-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-12-01T00:00:00Z"}
        done = subprocess.run(
            ["git", "-C", str(repo), "-c", "user.name=afd-e2e", "-c", "user.email=afd-e2e@example.invalid", *args],
            capture_output=True,
            text=True,
            check=True,
            env={**env, "PATH": "/usr/bin:/bin", "HOME": str(repo)},
        )
        return done.stdout.strip()

    git("init", "-q", "-b", "main")
    shas = []
    for index, subject in enumerate(SUBJECTS):
        for path, text in _files(index).items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text, encoding="utf-8")
        git("add", "-A")
        git("commit", "-q", "-m", subject)
        shas.append(git("rev-parse", "HEAD"))
    return shas


if __name__ == "__main__":
    for number, sha in enumerate(make_history(Path(sys.argv[1]))):
        print(number, sha, SUBJECTS[number])
