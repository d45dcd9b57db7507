"""The warm ``vllm bench serve`` client: run by the ``vllm`` executable's own interpreter (as a file, so it imports
nothing of afd-e2e, which that environment may not have), it imports vLLM's CLI once and then runs each command
it reads in a child forked from that warm state.

Why: importing vLLM takes 8-15 s of a CPU core, and a phase runs many ``vllm bench serve`` commands on one
server (a warmup and the repetitions, every level of a capacity sweep, a sequential series). Each child runs the
console script's own entry point (``vllm.entrypoints.cli.main:main``) with the command as its ``sys.argv``, in a
fresh copy of the process: what one run sets up (its event loop, seeds, tokenizer) cannot reach the next.
The import leaves native pool threads behind (torch's, and on a GPU machine more; Python 3.12 warns of them at each
fork, in the client's log): the child never uses them, and a child that hung anyway is bounded like any bench, by
its repetition's timeout, which stops the whole client.

Protocol, one JSON object a line: on stdin ``{"argv": [...], "log": PATH}``; on stdout ``{"returncode": N}`` when
that command's child has ended (its stdout and stderr went to PATH). Stdin closed: the client exits. The client's
own output (the import's warnings) is its stderr. The harness stops it, with any child, through its process group.
Its arguments (``--server URL``) only name, in ``ps``, the server its commands measure.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback


def _warm(cli_main) -> None:
    """Import what a ``vllm bench serve`` imports, by parsing ``vllm bench serve --help`` as the CLI does."""
    saved_argv, saved_stdout = sys.argv, os.dup(1)
    sys.argv = ["vllm", "bench", "serve", "--help"]
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the help text: not on the protocol's stdout (at the descriptor: loggers keep sys.stdout)
    os.close(devnull)
    try:
        cli_main()
    except SystemExit:
        pass
    finally:
        sys.stdout.flush()
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)
        sys.argv = saved_argv


def _child(cli_main, argv: list[str], log: str) -> int:
    """In the forked child: the command's output to ``log``, the CLI run; the exit status. The child keeps its
    parent's title: a new one (setproctitle) would overwrite the environment's memory, where /proc reads the run's
    markers that ``afd-e2e cleanup`` finds a leftover by."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.argv = ["vllm", *argv[1:]]
    try:
        cli_main()
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # a crash of the command is its exit status, as in a process of its own
        traceback.print_exc()
        return 1


def main() -> None:
    from vllm.entrypoints.cli.main import main as cli_main

    _warm(cli_main)
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = _child(cli_main, request["argv"], request["log"])
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
