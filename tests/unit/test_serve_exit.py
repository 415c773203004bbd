"""``memoryd serve`` ends at once when its stop abandoned a compaction: an ordinary exit
waits for Lance's threads (minutes after a burst of Stores), and a supervisor then kills the
daemon, which loses the token file's map it had just saved."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    import memoryd.server

    async def serve(settings):
        # What an abandoned compaction leaves: a thread the interpreter's exit would wait on.
        threading.Thread(target=time.sleep, args=(600,), daemon=False).start()
        print("stopped", flush=True)
        return {abandoned}

    memoryd.server.serve = serve
    from memoryd import cli
    sys.exit(cli.main(["serve", "--data-dir", sys.argv[1]]))
    """
)


def run(tmp_path: Path, abandoned: bool, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT.format(abandoned=abandoned), str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_serve_exits_at_once_with_status_0_when_its_stop_abandoned_a_compaction(
    tmp_path: Path,
) -> None:
    done = run(tmp_path, True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "stopped" in done.stdout


def test_serve_exits_as_usual_otherwise(tmp_path: Path) -> None:
    """Without an abandoned compaction the exit is the interpreter's (here it waits for the
    thread, which proves the first test's exit did not)."""
    try:
        run(tmp_path, False, timeout=20)
    except subprocess.TimeoutExpired as waiting:
        out = waiting.stdout.decode() if isinstance(waiting.stdout, bytes) else waiting.stdout
        assert "stopped" in (out or ""), "the daemon never reached its exit"
        return
    raise AssertionError("the exit did not wait for a running thread")


FAILED_START = textwrap.dedent(
    """
    import sys, threading, time, types
    import memoryd.server
    from memoryd.core.errors import ConfigError

    class Daemon:
        # A start that fails after the store began a compaction (its writer compacts once
        # idle; a load of a big store takes minutes), e.g. the metrics port or the review
        # key: the stop abandons the compaction, then the error goes on up.
        def __init__(self, settings):
            self.keys = None
            self.repository = types.SimpleNamespace(abandoned_compaction=False)

        async def start(self):
            raise ConfigError("cannot listen on the metrics port")

        async def stop(self):
            threading.Thread(target=time.sleep, args=(600,), daemon=False).start()
            self.repository.abandoned_compaction = True
            print("stopped", flush=True)

    memoryd.server.Daemon = Daemon
    from memoryd import cli
    sys.exit(cli.main(["serve", "--data-dir", sys.argv[1]]))
    """
)


def test_a_failed_start_whose_stop_abandoned_a_compaction_exits_at_once_with_status_2(
    tmp_path: Path,
) -> None:
    """A start that fails still ends at once when its stop abandoned a compaction."""
    done = subprocess.run(
        [sys.executable, "-c", FAILED_START, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "stopped" in done.stdout
    assert done.returncode == 2, done.stderr
