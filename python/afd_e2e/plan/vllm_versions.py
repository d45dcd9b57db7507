"""The rules of ``vllm serve``'s command line that depend on the vLLM version, in one table, so the plan adds a flag
only where the vLLM to be launched has it and preflight refuses, before any launch, a case whose argv that vLLM
would refuse after loading the model (or would not parse at all). How to add a rule: docs/guide.md, "Adding a vLLM
version's rule".

Each rule names the source it was read from (repository vllm-project/vllm):

- ``--shutdown-timeout`` (``vllm serve``): added by PR #34730, first released in v0.18.0 (``EngineArgs.add_cli_args``
  in ``vllm/engine/arg_utils.py``; ``VllmConfig.shutdown_timeout`` in ``vllm/config/vllm.py``). On SIGTERM, 0 aborts
  the in-flight requests and N drains them for up to N seconds; ``vllm/entrypoints/cli/serve.py`` then waits that
  long for its processes before it shuts them down. An older vLLM's argument parser exits on the unknown flag.
- The DBO thresholds (``--dbo-decode-token-threshold``, ``--dbo-prefill-token-threshold``): with ``--enable-dbo``
  a batch is split into ``num_ubatches`` = 2 micro-batches, and ``ParallelConfig`` (``vllm/config/parallel.py``, its
  validator after the Ray and nsight checks) raises "dbo_decode_token_threshold and dbo_prefill_token_threshold must
  be at least the number of microbatches (2)" for either below 2, since vLLM 0.30 (read in 0.32.0's source, the CPU
  kit's; issue 42 names 0.30 as the first release that refuses: not confirmed against 0.30's own tag here). On vLLM
  0.26, the GPU kit, the AFD plugin's runner uses a decode threshold of 1.

- The all2all backend of micro-batching: with ``--enable-dbo`` (``ParallelConfig.use_ubatching``), ``VllmConfig``
  (``vllm/config/vllm.py``, ``__post_init__``) asserts "Microbatching currently only supports the
  deepep_low_latency, deepep_high_throughput, and nixl_ep all2all backends", whether or not experts are parallel
  (read in 0.26.0, the GPU kit's, and 0.32.0; the 12-06 H100 run: a native DP1 DBO case failed at start-up on it, 47
  s after launch). The AFD plugin lifts the check for its roles (``afd_plugin/compat/patches/config_validation.py``),
  so an argv carrying its ``--additional-config`` AFD block is exempt.

A version is compared by its release numbers only: ``0.32.0+cpu`` is 0.32.0 and a pre-release or development build
(``0.30.0rc1``, ``0.28.1rc1.dev500+g51da0ca66``) counts as its release, which is the closer guess for a build cut
from the branch that carries the rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e.errors import UsageError

Release = tuple[int, int, int]

SHUTDOWN_TIMEOUT = "--shutdown-timeout"
ENABLE_DBO = "--enable-dbo"
_RELEASE = re.compile(r"v?(\d+)(?:\.(\d+))?(?:\.(\d+))?")


@dataclass(frozen=True)
class FlagSince:
    """A flag ``vllm serve`` has from release ``since`` on."""

    flag: str
    since: Release
    source: str  # where in vLLM it was read


@dataclass(frozen=True)
class Minimum:
    """From release ``since`` on, ``flag`` below ``minimum`` is refused wherever ``when`` is in argv."""

    flag: str
    minimum: int
    when: str
    since: Release
    source: str

    @property
    def rule(self) -> str:
        return f"{self.flag} >= {self.minimum} with {self.when} (vLLM >= {show(self.since)}, {self.source})"


FLAGS_SINCE = (FlagSince(SHUTDOWN_TIMEOUT, (0, 18, 0), "vllm/engine/arg_utils.py, PR #34730"),)
_DBO_SOURCE = "vllm/config/parallel.py ParallelConfig: at least the number of microbatches"
MINIMUMS = (
    Minimum("--dbo-decode-token-threshold", 2, ENABLE_DBO, (0, 30, 0), _DBO_SOURCE),
    Minimum("--dbo-prefill-token-threshold", 2, ENABLE_DBO, (0, 30, 0), _DBO_SOURCE),
)


@dataclass(frozen=True)
class OneOf:
    """From release ``since`` on, wherever ``when`` is in argv, ``flag`` (``default`` where absent) must be one of
    ``allowed``; an argv carrying the AFD plugin's config is exempt where ``plugin_exempt`` (the plugin patches it)."""

    flag: str
    allowed: tuple[str, ...]
    default: str
    when: str
    since: Release
    source: str
    plugin_exempt: bool

    @property
    def rule(self) -> str:
        return (
            f"{self.flag} one of {', '.join(self.allowed)} with {self.when} (vLLM >= {show(self.since)}, {self.source})"
        )


ONE_OF = (
    OneOf(
        "--all2all-backend",
        ("deepep_low_latency", "deepep_high_throughput", "nixl_ep"),
        "allgather_reducescatter",
        ENABLE_DBO,
        (0, 26, 0),
        "vllm/config/vllm.py VllmConfig: micro-batching's all2all backends",
        plugin_exempt=True,
    ),
)


@dataclass(frozen=True)
class Breach:
    """One rule a process's argv breaks under one vLLM version: the rule, what argv says, and how to fix it."""

    rule: str
    found: str
    fix: str


def release(version: str) -> Release:
    """The release numbers of a vLLM version string (``0.32.0+cpu`` -> (0, 32, 0))."""
    match = _RELEASE.match(version.strip())
    if match is None:
        raise UsageError(
            f"vLLM version {version!r} does not start with release numbers", "give a version such as 0.26.0"
        )
    return tuple(int(part or 0) for part in match.groups())  # type: ignore[return-value]


def show(numbers: Release) -> str:
    return ".".join(map(str, numbers))


def has_flag(version: str, flag: str) -> bool:
    """Whether ``vllm serve`` of ``version`` has ``flag``; a flag the table does not list is not version-gated."""
    since = next((rule.since for rule in FLAGS_SINCE if rule.flag == flag), None)
    return since is None or release(version) >= since


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """``flag``'s value in ``argv`` as argparse reads it (the last one wins; ``--flag=v`` or ``--flag v``); None
    where absent, "" where given with no value."""
    value = None
    for index, arg in enumerate(argv):
        if arg == flag:
            following = argv[index + 1] if index + 1 < len(argv) else ""
            value = "" if following.startswith("--") else following
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
    return value


def breaches(argv: Sequence[str], version: str) -> list[Breach]:
    """Every rule of the table that ``argv`` (one ``vllm serve`` process) breaks under vLLM ``version``."""
    numbers = release(version)
    found = []
    for rule in FLAGS_SINCE:
        if numbers < rule.since and flag_value(argv, rule.flag) is not None:
            found.append(
                Breach(
                    f"{rule.flag} exists from vLLM {show(rule.since)} ({rule.source})",
                    f"{rule.flag} given to vLLM {version}",
                    f"remove {rule.flag} from engine.serve_args or the case's add_args, or install vLLM >= "
                    f"{show(rule.since)}",
                )
            )
    for rule in MINIMUMS:
        value = flag_value(argv, rule.flag)
        if numbers < rule.since or flag_value(argv, rule.when) is None or value is None:
            continue
        if value.lstrip("-").isdigit() and int(value) < rule.minimum:
            key = rule.flag.removeprefix("--dbo-").replace("-", "_")
            found.append(
                Breach(
                    rule.rule,
                    f"{rule.flag}={value} under vLLM {version}",
                    f"raise {rule.flag} to {rule.minimum} or more (the case's dbo.{key} or add_args), or run a vLLM "
                    f"older than {show(rule.since)}",
                )
            )
    for rule in ONE_OF:
        if numbers < rule.since or flag_value(argv, rule.when) is None or (rule.plugin_exempt and _afd_role(argv)):
            continue
        value = flag_value(argv, rule.flag) or rule.default
        if value not in rule.allowed:
            found.append(
                Breach(
                    rule.rule,
                    f"{rule.flag}={value}{' (the default)' if flag_value(argv, rule.flag) is None else ''} under "
                    f"vLLM {version}",
                    f"add {rule.flag}={rule.allowed[0]} to the case's add_args (with that backend's kernels installed; "
                    f"without expert parallelism it is never used), or run the case as AFD, whose plugin lifts the check",
                )
            )
    return found


def _afd_role(argv: Sequence[str]) -> bool:
    """Whether ``argv`` carries the AFD plugin's config (``--additional-config`` with its ``afd`` block)."""
    config = flag_value(argv, "--additional-config")
    if not config:
        return False
    try:
        return "afd" in json.loads(config)
    except (ValueError, TypeError):
        return False
