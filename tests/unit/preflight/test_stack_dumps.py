"""Unit tier: preflight says whether a failed case's stacks can be dumped here: py-spy present and allowed to read a
process (the live probe given a hang guard, not the product's 5 s: a loaded machine is slow, never unable)."""

from __future__ import annotations

from afd_e2e.forensics.pyspy import find_pyspy
from afd_e2e.preflight.stack_dumps import check_stack_dumps, has_cap_sys_ptrace, judge_stack_dumps
from afd_e2e.results.status import Status
from unit.timing import GUARD_S


def test_this_agent_is_judged_by_a_real_dump():
    [check] = check_stack_dumps(timeout_s=GUARD_S)
    if find_pyspy() is None:
        assert check.status is Status.WARNED and "py-spy not found" in check.measured
    else:
        assert check.status is Status.PASSED, check
        assert "dumped a Python process" in check.measured


def test_no_pyspy_is_a_warning_with_the_install_line():
    [check] = check_stack_dumps(find=lambda: None)
    assert check.status is Status.WARNED
    assert check.fix == "pip install 'py-spy>=0.4.3,<0.5' into afd-e2e's environment"


def test_a_refused_dump_names_the_ptrace_scope_and_the_fix():
    check = judge_stack_dumps(
        "/venv/bin/py-spy", "ptrace not permitted (...): Error: Operation not permitted", 1, False
    )
    assert check.status is Status.WARNED
    assert "kernel.yama.ptrace_scope = 1: only a process's ancestors may read it" in check.measured
    assert check.fix == "give the agent CAP_SYS_PTRACE (docker: --cap-add SYS_PTRACE) or set kernel.yama.ptrace_scope=0"
    assert judge_stack_dumps("/p", None, 3, True).measured == "/p dumped a Python process (CAP_SYS_PTRACE)"


def test_cap_sys_ptrace_is_read_from_the_effective_set():
    assert has_cap_sys_ptrace("Name:\tx\nCapEff:\t000001ffffffffff\n")  # root's full set
    assert not has_cap_sys_ptrace("CapEff:\t00000000a80425fb\n")  # Docker's default set: no SYS_PTRACE
