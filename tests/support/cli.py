"""The `kasir` command run in-process with Typer's test runner: what a user sees (stdout, stderr, the exit code)
without starting a Python for every case. tests/ops/test_cli.py keeps one run of the real binary per command family.

Both ways run kasir.cli.main, as the console script does, with COLUMNS=80 and no terminal (a pipe):

- `kasir` / `kasir_beside_app`: with the settings the session's app installed (its database), for tests that
  make rows through the app and then read or change them with the command.
- `run_kasir`: with only the KASIR_ variables a test gives, as a new process reads them, for the command's own
  errors and output.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import ValidationError
from typer.testing import CliRunner, Result

from kasir.cli import main as kasir_main
from kasir.cli_support import console, err_console
from kasir.config import configure, get_settings

runner = CliRunner()


def kasir(*args: str) -> Result:
    """`kasir ARGS` with the settings this process has installed (the session app's, its database)."""
    return _invoke(args, {})


async def kasir_beside_app(*args: str) -> Result:
    """The CLI on a thread while the session's event loop keeps running.

    A sync test would freeze that loop, possibly with the app's worker inside a SQLite write
    transaction, and the CLI would wait for that lock until it gave up.
    """
    return await asyncio.to_thread(kasir, *args)


def run_kasir(*args: str, env: Mapping[str, str], cwd: Path | None = None) -> Result:
    """`kasir ARGS` with only `env` in the environment (KASIR_ variables), run from `cwd`.

    Nothing of the test process leaks in (its KASIR_ variables, the settings the session installed) and nothing
    of the command leaks out (the settings and KASIR_PUBLIC_URL it sets, the logging `kasir worker` sets up).

    From a sync test (def, not async def): the commands call asyncio.run, which cannot run inside the
    session's loop, and the settings they install are the process's, which no request of the session's app
    may see meanwhile (its loop stands still during a sync test). Give each run its own KASIR_DATA_DIR; a
    database the session's app writes only to read it (its frozen worker may hold SQLite's write lock).
    """
    assert threading.current_thread() is threading.main_thread(), "run_kasir from a sync test, not a thread"
    overrides: dict[str, str | None] = {name: None for name in os.environ if name.startswith("KASIR_")}
    overrides.update(env)
    with _process_state_restored(), contextlib.chdir(cwd or Path.cwd()):
        configure(None)  # the command reads the environment, as a new process would
        return _invoke(args, overrides)


def _invoke(args: tuple[str, ...], env: Mapping[str, str | None]) -> Result:
    """kasir.cli.main, what the console script runs (where a bad setting or an unreachable database becomes one
    line), with `env` and COLUMNS=80 (a pipe's width). An exception main() lets through propagates: the test
    fails with the traceback a user would have seen."""
    excepthook = sys.excepthook  # Typer installs its own
    with runner.isolation(env={"COLUMNS": "80", **env}) as (stdout, stderr, output):
        # What a pipe gives a new process: Rich decides colours when kasir.cli_support is imported (pytest -s on
        # a terminal would give it some) and reads COLUMNS as it prints.
        for stream in (console, err_console):
            assert stream.color_system is None, "kasir's consoles were made on a terminal: run pytest without -s"
            assert stream.width == 80, stream.width
        code = 0
        saved_argv, sys.argv = sys.argv, ["kasir", *args]
        try:
            kasir_main()
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 0 if exit_.code is None else 1
        finally:
            sys.argv = saved_argv
            sys.excepthook = excepthook
            sys.stdout.flush()
            sys.stderr.flush()
        return Result(
            runner=runner,
            stdout_bytes=stdout.getvalue(),
            stderr_bytes=stderr.getvalue(),
            output_bytes=output.getvalue(),
            return_value=None,
            exit_code=code,
            exception=None,
        )


@contextlib.contextmanager
def _process_state_restored() -> Iterator[None]:
    environ = dict(os.environ)
    try:
        settings = get_settings()  # reading them installs them if nothing had, as any first get_settings() does
    except ValidationError:
        settings = None
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        configure(settings)
        root.handlers[:] = handlers
        root.setLevel(level)
