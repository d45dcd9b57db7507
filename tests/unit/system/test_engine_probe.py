"""Unit tier: the software probe against stand-in `vllm` scripts: the interpreter named by the shebang answers
(not afd-e2e's), shebang forms are read, and a probe that hangs or breaks is bounded and says why.

The probe of the real CPU vLLM's `vllm` is in tests/engine/test_software_probe_cpu_vllm.py."""

from __future__ import annotations

import os
import shutil
import venv
from pathlib import Path

import pytest

from afd_e2e.system import engine_probe
from afd_e2e.system.engine_probe import ProbeFailed, interpreter_of, probe_engine


def script(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
    return path


def test_an_interpreter_without_vllm_reports_none_not_afd_e2es_own(tmp_path):
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    exe = script(tmp_path / "vllm", f"#!{bare / 'bin' / 'python'}\nraise SystemExit('not really vllm')\n")
    engine = probe_engine(str(exe), env={"PATH": os.environ["PATH"]})
    assert engine.python == str(bare / "bin" / "python")
    assert engine.vllm is None and engine.torch is None and engine.general_plugins == {}


def test_shebang_forms(tmp_path):
    env_form = script(tmp_path / "a", "#!/usr/bin/env python3\n")
    assert interpreter_of(str(env_form)) == shutil.which("python3")
    long_path = script(tmp_path / "b", "#!/bin/sh\n'''exec' \"/very long/venv/bin/python\" \"$0\" \"$@\"\n' '''\n")
    assert interpreter_of(str(long_path)) == "/very long/venv/bin/python"
    kit = script(tmp_path / "kit", '#!/bin/sh\n# vllm console script\nexec "/usr/bin/python3" -m vllm.main "$@"\n')
    assert interpreter_of(str(kit)) == "/usr/bin/python3"  # the GPU kit's wrapper (../shared/gpu-vllm/setup.sh)
    with pytest.raises(ProbeFailed, match="cannot read the Python it runs"):
        interpreter_of(str(script(tmp_path / "d", "#!/bin/sh\necho no exec here\n")))
    with pytest.raises(ProbeFailed, match="has no #! line"):
        interpreter_of(str(script(tmp_path / "c", "\x7fELF")))
    with pytest.raises(ProbeFailed, match="cannot read"):
        interpreter_of(str(tmp_path / "absent"))


def test_a_probe_that_hangs_or_breaks_is_bounded_and_says_why(tmp_path, monkeypatch):
    hanging = script(tmp_path / "python-hangs", "#!/bin/sh\nexec sleep 600\n")
    exe = script(tmp_path / "vllm", f"#!{hanging}\n")
    with monkeypatch.context() as short:  # only the probe that never answers gets a short budget: it cannot make it
        short.setattr(engine_probe, "PROBE_TIMEOUT_S", 0.5)
        with pytest.raises(ProbeFailed, match=r"did not answer the probe within [01] s"):
            probe_engine(str(exe))
    # the others answer (an error) within the default, a guard a loaded machine never meets
    broken = script(tmp_path / "python-broken", "#!/bin/sh\necho 'Fatal Python error: init' >&2\nexit 1\n")
    with pytest.raises(ProbeFailed, match="exited 1: Fatal Python error: init"):
        probe_engine(str(script(tmp_path / "vllm2", f"#!{broken}\n")))
    with pytest.raises(ProbeFailed, match="cannot run /nowhere/python"):
        probe_engine(str(script(tmp_path / "vllm3", "#!/nowhere/python\n")))
