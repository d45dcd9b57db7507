"""What results may hold of an environment: every variable, but the values of those whose names say secret."""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "[redacted]"
# Names of variables whose values are credentials: tokens, secrets, passwords, keys, credentials, auth headers. A
# token is a name's last word (HF_TOKEN, --hf-token, BUILDKITE_AGENT_ACCESS_TOKEN), not a word inside it: vLLM's
# --max-num-batched-tokens, --dbo-decode-token-threshold and --tokenizer say what a run did and hide nothing (the
# 12-06 H100 run's results read "--dbo-decode-token-threshold=[redacted]").
SECRET_NAME = re.compile(
    r"(?:^|_)TOKEN$|SECRET|PASSW(OR)?D|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|AUTH|COOKIE|SIGNATURE",
    re.IGNORECASE,
)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` sorted by name, with the value of every secret-looking variable replaced by ``[redacted]``."""
    return {name: REDACTED if SECRET_NAME.search(name) else value for name, value in sorted(env.items())}


def redact_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    """``argv`` with the value of every secret-looking option (``--api-key X``, ``--hf-token=X``) replaced."""
    redacted: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            redacted.append(REDACTED)
            hide_next = False
            continue
        option, eq, _ = arg.partition("=")
        secret = option.startswith("-") and SECRET_NAME.search(option.lstrip("-").replace("-", "_")) is not None
        if secret and eq:
            redacted.append(f"{option}={REDACTED}")
        else:
            redacted.append(arg)
            hide_next = secret
    return redacted
