"""``afd-e2e install-agent`` (also ``scripts/install-agent`` from a checkout): install afd-e2e on a GPU agent beside
its vLLM environment, for provisioning teams (docs/provisioning.md).

    install-agent --venv DIR [--python PY] (--wheels DIR [SOURCE] | SOURCE [--index-url URL])
    install-agent --into PY (--wheels DIR [SOURCE] | SOURCE [--index-url URL])

It installs only what it is pointed at, because no package named afd-e2e is published on a package index: whoever
registers that name there would get their code run on every agent that resolved it (dependency confusion). So
SOURCE is a wheel file built from this repository, a local checkout, or a git URL pinned to a commit or a tag
(``git+https://.../afd-e2e@v0.1.0``); --wheels DIR installs offline from a folder of wheels (``--no-index
--find-links DIR``, SOURCE then defaults to afd-e2e, and the folder must hold an afd-e2e wheel: scripts/build-wheelhouse
makes a complete one, py-spy included); a bare name or requirement is resolved from an index only when --index-url
names that index explicitly.

--venv DIR makes (or reuses) a virtual environment of afd-e2e's own that sees the vLLM environment's packages: a
.pth file in it names that environment's site-packages (the interpreter of the `vllm` on PATH, or --python), and
PYTHONPATH is inherited as usual (the gpu-vllm kit puts vLLM there). --into PY installs into that vLLM environment
itself. Either way no package the environment already has is changed: pip's dry-run report comes first, and any
package it would upgrade, downgrade or shadow stops the install with the conflict named (exit 2).

Then it runs the software check (`afd-e2e preflight`'s software checks: the `vllm` executable's Python, the AFD
plugin's entry point) and `afd-e2e agent-tags`, and prints the plugin's `venv` option and the tags to configure.
Exit 0 installed and the software check passed; 1 the software check failed; 2 refused (bad input, a conflict).
Standard library only (and afd_e2e.system.engine_probe, which is too): scripts/install-agent runs it from a checkout
before afd-e2e is installed anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from afd_e2e.system.engine_probe import ProbeFailed, interpreter_of

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
SOFTWARE_CHECKS = ("vllm", "afd plugin", "routing strategy", "nvidia-ml-py")
PTH_NAME = "afd_e2e_sees_vllm_env.pth"
COMMIT = re.compile(r"[0-9a-f]{40}")  # a git URL pinned to a commit
TAG = re.compile(r"v?\d+(\.\d+)+([.-]?(a|b|rc|post|dev)\d*)?")  # or to a release tag: v0.1.0, 1.2rc1
PIP: dict[str, list[str]] = {}  # a venv made without pip -> the base's pip pointed at it
PIP_SOURCES = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX")
# What a Python reports about itself: its site-packages folders and every distribution it can import.
DESCRIBE = """
import json, site, sysconfig
from importlib import metadata
dists = {}
for d in metadata.distributions():
    name = (d.metadata["Name"] or "").lower().replace("_", "-").replace(".", "-")
    if name and name not in dists:
        dists[name] = d.version
paths = sysconfig.get_paths()
print(json.dumps({"site": list(dict.fromkeys([paths["purelib"], paths["platlib"], *site.getsitepackages()])),
                  "dists": dists, "prefix": __import__("sys").prefix}))
"""


class Refused(Exception):
    """Bad input or a conflict: one line naming the problem and the fix."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem} (fix: {fix})")


def say(line: str) -> None:
    print(f"[install-agent] {line}", flush=True)


def describe_python(python: str) -> dict:
    done = subprocess.run([python, "-c", DESCRIBE], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise Refused(f"{python} cannot describe itself: {done.stderr.strip()[-300:]}", "name a working Python")
    return json.loads(done.stdout)


def vllm_python() -> str:
    """The interpreter of the `vllm` on PATH (its #! line or a wrapper's exec line), found as the software check
    finds it (afd_e2e.system.engine_probe)."""
    vllm = shutil.which("vllm")
    if vllm is None:
        raise Refused("no `vllm` on PATH to find the vLLM environment", "put vLLM's bin on PATH or pass --python")
    try:
        return interpreter_of(vllm)
    except ProbeFailed as exc:
        raise Refused(str(exc), "pass --python, the vLLM environment's Python") from exc


def make_venv(venv: Path, base: str) -> str:
    """A venv of afd-e2e's own whose site-packages also lists the base environment's (a .pth file)."""
    python = venv / "bin" / "python"
    if not python.exists():
        say(f"virtual environment {venv} from {base}")
        made = subprocess.run([base, "-m", "venv", str(venv)], check=False)
        if made.returncode != 0:  # no ensurepip there: a venv without pip, run by the base's pip (--python)
            subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    else:
        say(f"virtual environment {venv} (already there)")
    base_site = describe_python(base)["site"]
    own = describe_python(str(python))["site"][0]
    (Path(own) / PTH_NAME).write_text("".join(f"{folder}\n" for folder in base_site if folder != own))
    if subprocess.run([str(python), "-m", "pip", "--version"], capture_output=True, check=False).returncode != 0:
        PIP[str(python)] = [base, "-m", "pip", "--python", str(python)]
    return str(python)


def pip(python: str) -> list[str]:
    """How to run pip for ``python``: its own, or the base's pointed at it."""
    return PIP.get(python, [python, "-m", "pip"])


def check_source(source: str | None, wheels: Path | None, index_url: str | None) -> str:
    """What to install, refused unless it names what it is: a wheel file, a local checkout, a git URL pinned to a
    commit or a tag, or (from --wheels DIR or an explicit --index-url) a name."""
    if wheels is not None and index_url is not None:
        raise Refused("--wheels and --index-url both given", "install offline from --wheels, or from --index-url")
    if wheels is not None:
        if not wheels.is_dir():
            raise Refused(f"--wheels {wheels} is not a folder", "pass the folder holding afd-e2e's wheels")
        if source is None and not list(wheels.glob("afd_e2e-*.whl")):
            raise Refused(
                f"--wheels {wheels} holds no afd-e2e wheel", f"build the folder: scripts/build-wheelhouse {wheels}"
            )
        return source or "afd-e2e"
    if source is None:
        raise Refused(
            "nothing to install: afd-e2e is not published on a package index",
            "pass --wheels DIR (scripts/build-wheelhouse), a wheel file or a pinned git URL",
        )
    if source.startswith("git+") or " @ git+" in source:
        ref = source.rsplit("@", 1)[-1].split("#", 1)[0]  # no @: the URL itself, which is neither
        if not (COMMIT.fullmatch(ref) or TAG.fullmatch(ref)):
            raise Refused(
                f"{source} is not pinned to a commit or a tag",
                "end the URL with @<40-hex commit> or @vX.Y.Z, so every agent installs the code that was reviewed",
            )
        return source
    if source.endswith(".whl") or "/" in source or source.startswith("."):
        if not Path(source).exists():
            raise Refused(f"{source} does not exist", "pass the path of afd-e2e's wheel or checkout")
        return str(Path(source).resolve())
    if index_url is None:
        raise Refused(
            f"{source} is a bare name, which a package index would resolve (no afd-e2e is published on one: whoever "
            "registers the name gets its code run here)",
            "pass --wheels DIR, a wheel file or a pinned git URL; or name the index you trust with --index-url URL",
        )
    return source


def pip_args(wheels: Path | None, index_url: str | None = None) -> list[str]:
    if wheels:
        return ["--no-index", "--find-links", str(wheels)]
    return ["--index-url", index_url] if index_url else []


def pip_env(wheels: Path | None, index_url: str | None) -> dict[str, str] | None:
    """For --wheels or --index-url, pip sees that source alone: no index, extra index or find-links from pip's
    configuration files or environment (which would be resolved beside it). None: pip's own setup."""
    if wheels is None and index_url is None:
        return None
    env = {k: v for k, v in os.environ.items() if k not in PIP_SOURCES}
    return {**env, "PIP_CONFIG_FILE": os.devnull}  # os.devnull: pip loads no configuration file


def conflicts(report: dict, installed: dict[str, str]) -> list[str]:
    """Each package pip would install over one the environment has, with both versions and who asks for it."""
    found = []
    for item in report.get("install", []):
        meta = item["metadata"]
        name = re.sub(r"[-_.]+", "-", meta["name"]).lower()
        if name in installed and name != "afd-e2e":
            found.append(f"{name} {installed[name]} -> {meta['version']}")
    return found


def dry_run(python: str, extra: list[str], source: str, env: dict[str, str] | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [*pip(python), "install", "--quiet", "--dry-run", "--report", str(report)]
        done = subprocess.run([*cmd, *extra, source], capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or [done.stderr.strip()]
            raise Refused(f"pip cannot resolve {source} here: {' '.join(lines)[-600:]}", "provide the wheels it names")
        return json.loads(report.read_text())


def software_check(afd_e2e: Path, profile: str) -> int:
    """afd-e2e preflight's software checks, as the run will see the vllm it launches."""
    done = subprocess.run(
        [str(afd_e2e), "preflight", "--profile", profile, "--json"], capture_output=True, text=True, check=False
    )
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        say(f"software check: afd-e2e preflight failed: {done.stderr.strip()[-400:]}")
        return EXIT_FAILED
    checks = [c for c in report["checks"] if c["name"] in SOFTWARE_CHECKS]
    for check in checks:
        fix = f" (fix: {check['fix']})" if check.get("fix") else ""
        say(f"software check {check['name']}: {check['status']}: {check['measured']}{fix}")
    software = report["software"]
    say(f"vllm executable {software['vllm_executable']}, its Python {software['vllm_python']}")
    say(f"AFD plugin entry point: {software['afd_plugin'] or 'none (vllm.general_plugins has no afd)'}")
    return EXIT_FAILED if any(c["status"] == "failed" for c in checks) else EXIT_OK


def agent_tags(afd_e2e: Path) -> str | None:
    done = subprocess.run([str(afd_e2e), "agent-tags"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        say(f"agent tags: none ({done.stderr.strip()})")
        return None
    return done.stdout.strip()


def install_afd_e2e(args: argparse.Namespace) -> int:
    source = check_source(args.source, args.wheels, args.index_url)
    extra, env = pip_args(args.wheels, args.index_url), pip_env(args.wheels, args.index_url)
    if args.into:
        python = args.into
        venv_option = describe_python(python)["prefix"]
    else:
        python = make_venv(args.venv.resolve(), args.python or vllm_python())
        venv_option = str(args.venv.resolve())
    before = describe_python(python)["dists"]
    where = (
        "offline"
        if args.wheels
        else (f"index {args.index_url}" if args.index_url else "pip's index for its requirements")
    )
    say(f"resolving {source} in {python} ({len(before)} packages there, {where})")
    changed = conflicts(dry_run(python, extra, source, env), before)
    if changed:
        raise Refused(
            f"installing {source} would change {len(changed)} package(s) this environment has: {', '.join(changed)}",
            "install wheels whose requirements admit the installed versions, or use --venv for a separate environment",
        )
    install_cmd = [*pip(python), "install", "--quiet", *extra]
    # afd-e2e itself into this environment even where the base already shows one; then what it still lacks.
    subprocess.run([*install_cmd, "--no-deps", "--ignore-installed", source], check=True, env=env)
    subprocess.run([*install_cmd, source], check=True, env=env)
    after = describe_python(python)["dists"]
    moved = [f"{n} {v} -> {after.get(n)}" for n, v in before.items() if after.get(n) != v and n != "afd-e2e"]
    if moved:
        say(f"error: the install changed {', '.join(moved)}")
        return EXIT_FAILED
    added = sorted(set(after) - set(before))
    say(f"installed {source}; {len(added)} package(s) added ({', '.join(added) or 'none'}), 0 changed")
    afd_e2e = Path(python).parent / "afd-e2e"
    if not afd_e2e.exists():
        say(f"error: {afd_e2e} is missing after the install")
        return EXIT_FAILED
    status = software_check(afd_e2e, args.profile)
    tags = agent_tags(afd_e2e)
    print()
    print("Configure the plugin step with:")
    print(f"  venv: {venv_option}")
    if tags:
        print(f'and start the agent with: buildkite-agent start --tags "queue=large-model,{tags}"')
        print(f"agent tags: {tags}")
    return status


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--venv", type=Path, help="afd-e2e's own virtual environment, seeing the vLLM environment")
    where.add_argument("--into", metavar="PYTHON", help="the vLLM environment's Python to install into")
    parser.add_argument("--python", help="the vLLM environment's Python (default: the interpreter of `vllm`)")
    parser.add_argument(
        "--wheels", type=Path, help="install offline from this folder of wheels (scripts/build-wheelhouse)"
    )
    parser.add_argument("--index-url", help="the package index to resolve a bare SOURCE name from (never implied)")
    parser.add_argument("--profile", default="tiny-cpu", help="profile whose software check to run")
    parser.add_argument(
        "source",
        nargs="?",
        help="a wheel file, a checkout, a git URL pinned to a commit or tag, or (with --wheels/--index-url) a name",
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "install-agent",
        help="install afd-e2e beside an agent's vLLM from a wheel folder, a wheel or a pinned git URL",
        description=__doc__.split("\n\n")[0],
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    try:
        return install_afd_e2e(args)
    except Refused as exc:
        print(f"install-agent: error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except subprocess.CalledProcessError as exc:
        print(f"install-agent: error: {' '.join(exc.cmd)} exited {exc.returncode}", file=sys.stderr)
        return EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    """scripts/install-agent's entry: the same command before afd-e2e is installed."""
    parser = argparse.ArgumentParser(prog="install-agent", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
