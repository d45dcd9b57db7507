"""The package at one commit, installed beside the agent's environment, never into it.

``pip install --no-deps --no-build-isolation --no-index --target <cache>/packages/<sha> git+file://<repo>@<sha>``:
- ``--target`` a folder per commit, put first on the case processes' ``PYTHONPATH``: the agent's venv (its vLLM,
  torch, the harness itself) is untouched, so a probe cannot break the next one or the nightly, and the folders of
  two commits never mix. Entry points (``vllm.general_plugins``) are read from the folder's dist-info, which comes
  first on ``sys.path``, so it wins over a copy of the same package in the venv.
- ``--no-deps``: a probe changes one thing, the package; its dependencies are the agent's.
- ``--no-build-isolation --no-index``: the build uses the venv's own setuptools and never reaches an index (GPU
  agents often have none).
- ``git+file://...@<sha>``: pip checks out exactly that commit and records it in ``direct_url.json``
  (``vcs_info.commit_id``), which is what the check after the install reads: the version installed is the one asked.
Built once per commit: a folder is renamed into place only when complete (``installed.json`` beside it), and a
commit that does not build is remembered (``<sha>.failed``, the pip log's end), so a resumed search skips it again
without rebuilding.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

INSTALL_TIMEOUT_S = 600.0
POLL_S = 0.1
LOG_TAIL_LINES = 6
MARKER = "installed.json"


@dataclass(frozen=True)
class Installed:
    """The folder to prepend to ``PYTHONPATH``, the distribution found in it and the commit it records."""

    path: Path
    name: str
    version: str
    commit: str
    seconds: float
    cached: bool


@dataclass(frozen=True)
class NotInstalled:
    """Why the commit could not be installed (it is then ``skipped``)."""

    reason: str
    seconds: float


PIP_GENERIC_ERRORS = ("error: subprocess-exited-with-error", "error: metadata-generation-failed")


def pip_error(log: str) -> str:
    """The line of a failed pip run that says what broke (the build backend's own ``error:``, not pip's wrapper
    lines), else the log's last lines."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith("error") and line not in PIP_GENERIC_ERRORS]
    return errors[-1] if errors else " | ".join(lines[-LOG_TAIL_LINES:])


def packages_dir(cache: Path) -> Path:
    return cache / "packages"


def _recorded_commit(target: Path) -> tuple[str, str, str] | None:
    """(name, version, commit) of the one distribution in ``target`` that pip installed from git, or None."""
    for info in sorted(target.glob("*.dist-info")):
        direct = info / "direct_url.json"
        if not direct.is_file():
            continue
        commit = json.loads(direct.read_text(encoding="utf-8")).get("vcs_info", {}).get("commit_id", "")
        fields = dict(
            line.split(": ", 1) for line in (info / "METADATA").read_text(encoding="utf-8").splitlines() if ": " in line
        )
        return fields.get("Name", info.name), fields.get("Version", "?"), commit
    return None


def check_installed(target: Path, sha: str) -> tuple[str, str] | str:
    """(name, version) when ``target`` holds the package at ``sha`` and a Python with it first on PYTHONPATH loads
    that copy; otherwise the sentence why not."""
    found = _recorded_commit(target)
    if found is None:
        return f"no distribution installed from git in {target}"
    name, version, commit = found
    if commit != sha:
        return f"{name} in {target} records commit {commit or 'none'}, not {sha}"
    probe = "import importlib.metadata as m, sys; d = m.distribution(sys.argv[1]); print(d.locate_file(''))"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    done = subprocess.run([sys.executable, "-c", probe, name], capture_output=True, text=True, env=env, check=False)
    loaded = done.stdout.strip()
    if done.returncode != 0 or Path(loaded).resolve() != target.resolve():
        return f"a Python with {target} first on PYTHONPATH loads {name} from {loaded or 'nowhere'}, not from it"
    return name, version


def install_at(
    repo: Path, sha: str, cache: Path, *, cancelled: Callable[[], bool], clock: Callable[[], float] = time.monotonic
) -> Installed | NotInstalled | None:
    """The package at ``sha`` in its cache folder (built now or found); None when cancelled meanwhile."""
    start = clock()
    root = packages_dir(cache)
    target, failed = root / sha, root / f"{sha}.failed"
    if (target / MARKER).is_file():
        marker = json.loads((target / MARKER).read_text(encoding="utf-8"))
        return Installed(target, marker["name"], marker["version"], sha, clock() - start, cached=True)
    if failed.is_file():
        return NotInstalled(failed.read_text(encoding="utf-8").strip(), clock() - start)
    root.mkdir(parents=True, exist_ok=True)
    building = root / f".{sha}.building-{os.getpid()}"
    shutil.rmtree(building, ignore_errors=True)
    log = root / f".{sha}.log"
    argv = [
        *(sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index"),
        *("--disable-pip-version-check", "--no-input", "--quiet", "--target", str(building)),
        f"git+file://{repo.resolve()}@{sha}",
    ]
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        while process.poll() is None:
            if cancelled() or clock() - start > INSTALL_TIMEOUT_S:
                process.terminate()
                process.wait()
                shutil.rmtree(building, ignore_errors=True)
                if cancelled():
                    return None
                return NotInstalled(f"pip install ran past {INSTALL_TIMEOUT_S:.0f} s", clock() - start)
            time.sleep(POLL_S)
    if process.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        reason = f"pip install failed (exit {process.returncode}): {pip_error(log.read_text('utf-8', 'replace'))} (log {log})"
        failed.write_text(reason + "\n", encoding="utf-8")
        return NotInstalled(reason, clock() - start)
    checked = check_installed(building, sha)
    if isinstance(checked, str):
        shutil.rmtree(building, ignore_errors=True)
        return NotInstalled(f"installed, but the check failed: {checked}", clock() - start)
    name, version = checked
    (building / MARKER).write_text(json.dumps({"name": name, "version": version, "commit": sha}) + "\n")
    os.replace(building, target)
    return Installed(target, name, version, sha, clock() - start, cached=False)
