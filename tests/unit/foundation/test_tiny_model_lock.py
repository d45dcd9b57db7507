"""Unit tier: two builds of the tiny model into one folder at once (CI's embedded default and the engine tier from a
fresh clone): one builds, the other waits for it and keeps its model. The builders are stand-ins that record what
they do (the real ones need torch and transformers, in the engine tier's vLLM environment); the first holds its
build until the test has seen the second either wait on the lock or start a build of its own."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

from afd_e2e import tiny_model
from unit.timing import wait_until


def _build(out: str, log: str, release: str) -> None:
    """One builder process: the real ``build_tiny_model`` with stand-in writers that log each start and end; the
    tokenizer's waits for ``release``."""

    def writer(name: str):
        def write(folder: Path) -> None:
            with open(log, "a") as handle:
                handle.write(f"{name} start {os.getpid()}\n")
            if name == "tokenizer":
                wait_until(lambda: Path(release).exists(), what="the test's release")
            (folder / "config.json").write_text("{}")
            with open(log, "a") as handle:
                handle.write(f"{name} end {os.getpid()}\n")

        return write

    tiny_model.build_tokenizer = writer("tokenizer")
    tiny_model.build_model = writer("model")
    tiny_model.build_tiny_model(Path(out))


def _waiting_on(lock: Path) -> bool:
    """A process blocked on ``lock``: /proc/locks lists a waiter with '->' and the file's device:inode last."""
    inode = f":{lock.stat().st_ino}"
    return any(
        words[1:2] == ["->"] and words[-3].endswith(inode)
        for words in (line.split() for line in Path("/proc/locks").read_text().splitlines())
    )


def test_a_second_build_waits_for_the_first_and_keeps_its_model(tmp_path):
    out, log, release = tmp_path / ".tiny-model", tmp_path / "log", tmp_path / "release"
    context = multiprocessing.get_context("fork")
    first, second = (context.Process(target=_build, args=(str(out), str(log), str(release))) for _ in range(2))
    first.start()
    wait_until(lambda: log.exists() and "tokenizer start" in log.read_text(), what="the first build")
    second.start()
    wait_until(
        lambda: _waiting_on(tmp_path / ".tiny-model.lock") or log.read_text().count("tokenizer start") == 2,
        what="the second build to wait on the lock or start building",
    )
    release.touch()
    for builder in (first, second):
        builder.join()
    assert (first.exitcode, second.exitcode) == (0, 0)
    pid = first.pid
    assert log.read_text().splitlines() == [
        f"{step} {pid}" for step in ("tokenizer start", "tokenizer end", "model start", "model end")
    ], "one build, the first's; the second kept it"
    assert (out / "afd-e2e-tiny-model.json").is_file()
