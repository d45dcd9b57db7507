"""Run by path inside the Python of the ``vllm`` executable afd-e2e will launch (stdlib and the installed AFD plugin
only: afd-e2e is not there), so the plugin that will run the roles is the one that judges their AFD config.

Reads a JSON list of ``{"additional_config": {...}, "role": "ffn"}`` on stdin and passes each to the plugin's own
``afd_plugin.config.parse_afd_config(additional_config, expected_role=role)`` (CPU-safe: it imports neither vLLM
nor CUDA). Prints one JSON object: ``verdicts``, one per item, null where the plugin accepted it and its exception
(type and message) where it refused it; or ``import_error`` where the plugin's config module cannot be imported.
"""

import json
import sys


def main():
    queries = json.load(sys.stdin)
    try:
        from afd_plugin.config import parse_afd_config
    except Exception as exc:  # reported, not raised: preflight turns it into one line
        print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"}))
        return
    verdicts = []
    for query in queries:
        try:
            parse_afd_config(query["additional_config"], expected_role=query["role"])
        except (ValueError, TypeError) as exc:  # the plugin's refusals; anything else is a crash, told as one
            verdicts.append(f"{type(exc).__name__}: {exc}")
        else:
            verdicts.append(None)
    print(json.dumps({"verdicts": verdicts}))


if __name__ == "__main__":
    main()
