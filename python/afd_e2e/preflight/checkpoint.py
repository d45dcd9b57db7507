"""Where the checkpoint folder is checked before anything loads it: readable, config.json matches the profile, every
safetensors shard present, size plausible, tokenizer present, and every child told to stay off the hub.

Only stats files and reads the small JSON ones, so it takes milliseconds even for a 234 GiB checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from afd_e2e.plan import RunPlan
from afd_e2e.preflight.checks import PreflightCheck, failed, passed, skipped
from afd_e2e.profile import CheckpointSpec

FOLDER, CONFIG, MODEL, EXPERTS = "checkpoint folder", "checkpoint config", "checkpoint model", "checkpoint experts"
WEIGHTS, SIZE, TOKENIZER, OFFLINE = "checkpoint weights", "checkpoint size", "tokenizer", "hub offline"
GIB = 1024**3

# Names checkpoints use for the expert counts: Qwen3-MoE writes num_local_experts under transformers 5,
# DeepSeek n_routed_experts, GPT-OSS experts_per_token.
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")
EXPERTS_PER_TOKEN_KEYS = ("num_experts_per_tok", "experts_per_token")
# Any one of these sets is a tokenizer transformers can load.
TOKENIZER_SETS = (("tokenizer.json",), ("tokenizer.model",), ("vocab.json", "merges.txt"), ("tiktoken.model",))
REDOWNLOAD = "copy the checkpoint again from its source (an interrupted download leaves shards out)"


def check_checkpoint(
    spec: CheckpointSpec, model_path: str | None, model_env: str, plan: RunPlan
) -> list[PreflightCheck]:
    folder_check, folder = _folder(model_path, model_env)
    if folder is None:
        rest = [
            skipped(name, "needs the checkpoint folder") for name in (CONFIG, MODEL, EXPERTS, WEIGHTS, SIZE, TOKENIZER)
        ]
        return [folder_check, *rest, _offline(plan)]
    config_check, config = _config(folder)
    if config is None:
        judged = [skipped(MODEL, "needs config.json"), skipped(EXPERTS, "needs config.json")]
    else:
        judged = [_model(spec, config), _experts(spec, config)]
    weights_check, shards, declared = _weights(folder)
    size_check = _size(spec, shards, declared) if shards is not None else skipped(SIZE, "needs every weight shard")
    return [folder_check, config_check, *judged, weights_check, size_check, _tokenizer(folder), _offline(plan)]


def _folder(model_path: str | None, model_env: str) -> tuple[PreflightCheck, Path | None]:
    if not model_path:
        return failed(
            FOLDER,
            "no checkpoint path",
            "a local checkpoint folder",
            f"set {model_env}=/path/to/checkpoint or pass --model",
        ), None
    path = Path(model_path)
    if not path.is_dir():
        what = "is not a folder" if path.exists() else "does not exist"
        return failed(
            FOLDER,
            f"{path} {what}",
            "a local checkpoint folder",
            f"point {model_env} or --model at the checkpoint folder",
        ), None
    if not os.access(path, os.R_OK | os.X_OK):
        return failed(
            FOLDER, f"{path} is not readable", "a readable folder", f"give this agent's user read access to {path}"
        ), None
    return passed(FOLDER, str(path), "a local checkpoint folder"), path


def _config(folder: Path) -> tuple[PreflightCheck, dict[str, Any] | None]:
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return failed(CONFIG, "config.json missing", "config.json that parses", REDOWNLOAD), None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return failed(CONFIG, f"config.json unreadable: {problem}", "config.json that parses", REDOWNLOAD), None
    if not isinstance(config, dict):
        return failed(CONFIG, f"config.json holds a {type(config).__name__}", "a JSON object", REDOWNLOAD), None
    return passed(CONFIG, "config.json parses", "config.json that parses"), config


def _levels(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Where settings live: the top level, then ``text_config`` (multimodal checkpoints such as Qwen3.5)."""
    nested = config.get("text_config")
    return [config, nested] if isinstance(nested, dict) else [config]


def _lookup(config: dict[str, Any], keys: tuple[str, ...]) -> tuple[Any, str] | None:
    for level, where in zip(_levels(config), ("", "text_config."), strict=False):
        for key in keys:
            if key in level:
                return level[key], where + key
    return None


def _model(spec: CheckpointSpec, config: dict[str, Any]) -> PreflightCheck:
    archs = config.get("architectures") or []
    types = [level.get("model_type") for level in _levels(config) if level.get("model_type")]
    measured = f"architectures {', '.join(archs) or 'none'}; model_type {' / '.join(types) or 'none'}"
    wanted = f"architectures {' or '.join(spec.architectures)}; model_type {spec.model_type}"
    if not set(archs) & set(spec.architectures) or spec.model_type not in types:
        return failed(
            MODEL, measured, wanted, "point --model at the checkpoint this profile describes, or pick its profile"
        )
    return passed(MODEL, measured, wanted)


def _experts(spec: CheckpointSpec, config: dict[str, Any]) -> PreflightCheck:
    expected = [
        (EXPERT_KEYS, spec.num_experts, "experts"),
        (EXPERTS_PER_TOKEN_KEYS, spec.num_experts_per_tok, "per token"),
    ]
    expected = [(keys, want, label) for keys, want, label in expected if want is not None]
    if not expected:
        return skipped(EXPERTS, "the profile declares no expert counts")
    measured, wanted, wrong = [], [], False
    for keys, want, label in expected:
        found = _lookup(config, keys)
        wanted.append(f"{want} {label}")
        if found is None:
            measured.append(f"no {' / '.join(keys)}")
            wrong = True
        else:
            value, key = found
            measured.append(f"{key}={value}")
            wrong = wrong or value != want
    if wrong:
        return failed(
            EXPERTS, ", ".join(measured), ", ".join(wanted), "point --model at the checkpoint this profile describes"
        )
    return passed(EXPERTS, ", ".join(measured), ", ".join(wanted))


def _weights(folder: Path) -> tuple[PreflightCheck, list[Path] | None, int | None]:
    """Whether every shard the index lists (or the single model.safetensors) exists; the shards when they all do,
    and the tensor bytes the index declares (shard files are a little larger: their headers)."""
    index = folder / "model.safetensors.index.json"
    wanted = "every shard model.safetensors.index.json lists, or one model.safetensors"
    if index.is_file():
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
            names = sorted(set(data["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            return failed(WEIGHTS, f"{index.name} unreadable: {type(exc).__name__}", wanted, REDOWNLOAD), None, None
        metadata = data.get("metadata")
        declared = metadata.get("total_size") if isinstance(metadata, dict) else None
        shards = [folder / name for name in names]
        missing = [s.name for s in shards if not s.is_file()]
        if missing:
            shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
            return (
                failed(WEIGHTS, f"{len(missing)} of {len(shards)} shards missing: {shown}", wanted, REDOWNLOAD),
                None,
                None,
            )
        declared_size = declared if isinstance(declared, int) else None
        return passed(WEIGHTS, f"{len(shards)} shards, all present", wanted), shards, declared_size
    single = folder / "model.safetensors"
    if single.is_file():
        return passed(WEIGHTS, "model.safetensors", wanted), [single], None
    return failed(WEIGHTS, "no safetensors weights", wanted, REDOWNLOAD), None, None


def _size(spec: CheckpointSpec, shards: list[Path], declared: int | None) -> PreflightCheck:
    total = sum(s.stat().st_size for s in shards)
    measured = f"{total / GIB:.1f} GiB in {len(shards)} file(s)"
    wanted = f">= {spec.min_size_gib:g} GiB"
    if declared is not None and total < declared:
        return failed(
            SIZE, f"{measured}, less than the {declared / GIB:.1f} GiB the index declares", wanted, REDOWNLOAD
        )
    if total < spec.min_size_gib * GIB:
        return failed(SIZE, measured, wanted, "a truncated or different checkpoint: " + REDOWNLOAD)
    return passed(SIZE, measured, wanted)


def _tokenizer(folder: Path) -> PreflightCheck:
    wanted = " or ".join("+".join(names) for names in TOKENIZER_SETS)
    for names in TOKENIZER_SETS:
        if all((folder / name).is_file() for name in names):
            return passed(TOKENIZER, "+".join(names), wanted)
    return failed(
        TOKENIZER, "no tokenizer files", wanted, "copy the tokenizer files from the model's repository into the folder"
    )


def _offline(plan: RunPlan) -> PreflightCheck:
    """Children must never reach for the hub: a missing file would otherwise start a 234 GiB download."""
    online = sorted(
        {f"{case.id}/{p.name}" for case in plan.cases for p in case.processes if p.env_set.get("HF_HUB_OFFLINE") != "1"}
    )
    if online:
        return failed(
            OFFLINE,
            f"HF_HUB_OFFLINE not 1 for {', '.join(online)}",
            "HF_HUB_OFFLINE=1 on every child",
            "do not override HF_HUB_OFFLINE in the profile's env",
        )
    return passed(
        OFFLINE,
        f"HF_HUB_OFFLINE=1 on all {sum(len(c.processes) for c in plan.cases)} children",
        "HF_HUB_OFFLINE=1 on every child",
    )
