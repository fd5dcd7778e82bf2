"""Telemetry belongs to the process that configured it: a child forked from it exports nothing
until it configures its own (the batch exporters' threads do not survive a fork)."""

import os

from jobqueue import telemetry
from tests.support.telemetry import memory_telemetry


def test_a_forked_child_is_not_active_until_it_configures_its_own() -> None:
    """kills: telemetry-pid-kept-after-fork"""
    memory_telemetry()
    assert telemetry.active()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which reports through the pipe
        seen = f"{int(telemetry.active())}"
        telemetry.mark_active_for_tests()
        seen += f"{int(telemetry.active())}"
        os.write(write, seen.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        seen = pipe.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert seen == "01"  # not active after the fork; active once it configured its own
    assert telemetry.active()  # the parent still is
