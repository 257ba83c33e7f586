"""The ``blowfish-te`` console script: the command line (:mod:`blowfish_te.cli`) with an interrupt
that always works. Only the standard library is imported before the interrupt handler is set."""

from __future__ import annotations

import os
import signal
import sys
import threading

from ._program import EXIT_INTERRUPTED, PROGRAM


def _interrupted(signum, frame) -> None:
    sys.stderr.write("\ninterrupted\n")
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def entry() -> None:
    """Run the command line in a worker thread while the main thread waits for it: Ctrl-C exits
    with status 130 within a fraction of a second at any stage — while the library loads, plans,
    or an engine's native code counts records (which checks for interrupts only much later).
    Errors end in one ``Error:`` line and status 1, usage errors in status 2."""
    signal.signal(signal.SIGINT, _interrupted)
    if sys.argv[1:] == ["--version"]:  # answered without loading the command line (click, numpy, scipy)
        from ._version import __version__

        sys.stdout.write(f"{PROGRAM}, version {__version__}\n")
        sys.stdout.flush()
        sys.exit(0)
    status = [1]

    def work() -> None:
        import click

        from .cli import main
        from .errors import first_line

        try:
            code = main.main(standalone_mode=False)
            status[0] = code if isinstance(code, int) else 0
        except click.ClickException as err:
            err.show()
            status[0] = err.exit_code
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
        except SystemExit as err:
            status[0] = err.code if isinstance(err.code, int) else 1
        except Exception as err:  # the group reports library errors; this catches the rest as one line
            click.echo(f"Error: {first_line(err)}", err=True)

    worker = threading.Thread(target=work, name=PROGRAM, daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.05)
    sys.stdout.flush()
    sys.exit(status[0])
