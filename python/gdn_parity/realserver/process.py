"""Server processes: start one in a session of its own, wait for its health, stop its group.

A server is the leader of a new session and process group; everything sglang starts
under it (scheduler, detokenizer, JIT compilers) stays in that group. Stopping sends
SIGTERM to the group, SIGKILL after the grace period, and then checks ``/proc`` until no
process of the group is left (a zombie counts as gone). The leader also gets
``PR_SET_PDEATHSIG`` = SIGKILL, so a runner killed outright (SIGKILL, which no handler
sees) takes it along, and sglang's own children follow their parent
(``kill_itself_when_parent_died``). SIGINT and SIGTERM are held while a server is spawned
and registered and while servers are stopped, so an interrupt cannot leave one behind:
it takes effect once the stop is done.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gdn_parity.errors import GdnParityError
from gdn_parity.realserver.launch import Launch

HEALTH_PATH = "/health_generate"
LOG_TAIL_LINES = 40
POLL_S = 0.25  # between health requests
HEALTH_REQUEST_S = 30.0  # at most, for one health request (sglang's waits up to 20 s)
GONE_WAIT_S = 10.0  # after SIGKILL, for the group's processes to disappear
HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}
PR_SET_PDEATHSIG = 1  # linux/prctl.h
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


class StartFailure(GdnParityError):
    """A server that did not come up; ``tail`` is its log's last lines."""

    def __init__(self, message: str, tail: list[str]) -> None:
        super().__init__(message)
        self.tail = tail


@dataclass(frozen=True)
class Stopped:
    how: str  # "SIGTERM", "SIGKILL after 30 s", "exited with status 1 before the stop; ..."
    leftover: tuple[int, ...]  # pids of the group still alive after the stop (should be none)


@contextmanager
def signals_held() -> Iterator[set[signal.Signals]]:
    """SIGINT and SIGTERM wait (are blocked in this thread) within; the mask before it."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield old
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def hold_signals_in_this_thread() -> None:
    """For a helper thread: SIGINT and SIGTERM go to the main thread, where they are handled
    (and held while servers stop), never to this one."""
    signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)


def _child_setup(parent: int, mask: set[signal.Signals]) -> Callable[[], None]:
    """``preexec_fn``: die with the runner, and take signals as the runner did before it
    held them (a child inherits the mask of the thread that forks it)."""

    def setup() -> None:
        if _LIBC is not None:
            _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the runner died before prctl
                os.kill(os.getpid(), signal.SIGKILL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    return setup


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``, from ``/proc``."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def how_it_exited(status: int) -> str:
    if status < 0:
        return f"was killed by {signal.Signals(-status).name}"
    return f"exited with status {status}"


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    try:
        text = log.read_bytes().decode(errors="replace")
    except OSError as exc:
        return [f"(its log {log} cannot be read: {exc.strerror})"]
    return text.splitlines()[-lines:]


def _healthy(url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


class ServerProcess:
    def __init__(self, launch: Launch, popen: subprocess.Popen) -> None:
        self.launch = launch
        self.popen = popen
        self.up_after_s: float | None = None
        self.stopped: Stopped | None = None

    @classmethod
    def spawn(
        cls, launch: Launch, environ: Mapping[str, str], mask: set[signal.Signals]
    ) -> ServerProcess:
        launch.log.parent.mkdir(parents=True, exist_ok=True)
        with open(launch.log, "ab") as log:
            popen = subprocess.Popen(
                launch.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=launch.cwd,
                env={**environ, **launch.env},
                start_new_session=True,
                preexec_fn=_child_setup(os.getpid(), mask),
            )
        return cls(launch, popen)

    def exit_status(self) -> int | None:
        return self.popen.poll()

    def wait_healthy(self, limit: float) -> float:
        """Seconds until ``GET /health_generate`` answered 200; StartFailure when the process
        exits first or ``limit`` seconds pass (the caller stops it)."""
        label, url = self.launch.label, self.launch.url + HEALTH_PATH
        started = time.monotonic()
        while True:
            status = self.popen.poll()
            if status is not None:
                raise StartFailure(
                    f"server {label} {how_it_exited(status)} before it answered GET {HEALTH_PATH}",
                    log_tail(self.launch.log),
                )
            remaining = limit - (time.monotonic() - started)
            if remaining <= 0:
                raise StartFailure(
                    f"server {label} did not answer GET {HEALTH_PATH} with 200 within {limit:g} s",
                    log_tail(self.launch.log),
                )
            if _healthy(url, min(remaining, HEALTH_REQUEST_S)):
                self.up_after_s = time.monotonic() - started
                return self.up_after_s
            time.sleep(max(0.0, min(POLL_S, limit - (time.monotonic() - started))))

    def _alive(self) -> bool:
        return self.popen.poll() is None or bool(group_members(self.popen.pid))

    def _wait_gone(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self._alive():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, grace: float) -> Stopped:
        """SIGTERM to the group, SIGKILL after ``grace`` seconds; what it took."""
        pgid = self.popen.pid
        before = self.popen.poll()
        _signal_group(pgid, signal.SIGTERM)
        how = "SIGTERM"
        if not self._wait_gone(grace):
            _signal_group(pgid, signal.SIGKILL)
            how = f"SIGKILL after {grace:g} s"
            self._wait_gone(GONE_WAIT_S)
        if before is not None:
            how = f"{how_it_exited(before)} before the stop; the rest of its group: {how}"
        self.stopped = Stopped(how, tuple(group_members(pgid)))
        return self.stopped


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


class ServerPool:
    """The servers up now; leaving it (normally, on an exception or an interrupt) stops each."""

    def __init__(self, grace: float, environ: Mapping[str, str]) -> None:
        self.grace = grace
        self.environ = environ
        self.running: dict[str, ServerProcess] = {}

    def __enter__(self) -> ServerPool:
        return self

    def spawn(self, launch: Launch) -> ServerProcess:
        """Start ``launch``'s process, registered before an interrupt can be taken."""
        with signals_held() as mask:
            process = ServerProcess.spawn(launch, self.environ, mask)
            self.running[launch.label] = process
        return process

    def stop(self, label: str) -> Stopped:
        with signals_held():
            return self.running.pop(label).stop(self.grace)

    def __exit__(self, *exc: object) -> None:
        with signals_held():
            for label in reversed(list(self.running)):
                self.running.pop(label).stop(self.grace)
