"""SIGINT and SIGTERM as one clean stop for the commands that run a server until told to stop.

A background job of a non-interactive shell starts with SIGINT ignored, and Python then installs no
KeyboardInterrupt handler, so `kill -INT` would do nothing; SIGTERM (Docker, Kubernetes, `kill`) by
default ends Python without running its ``finally`` blocks, so the server's temporary directory
would stay behind. Both are turned into one KeyboardInterrupt in the main thread, which the caller's
``finally`` answers by stopping the server.

    received, restore = stop_on_signals()
    try:
        serve_until_interrupted()
    except KeyboardInterrupt:
        print(received[0])        # "SIGINT (Ctrl-C)" or "SIGTERM"
    finally:
        restore()
"""

from __future__ import annotations

import signal
import threading


def stop_on_signals():
    """([name of the signal received], restore): SIGINT and SIGTERM raise KeyboardInterrupt in the main
    thread, once (a second one while stopping is ignored, so the stop runs to its end), also where
    SIGINT was ignored at start. Outside the main thread nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        return [], lambda: None
    received: list[str] = []

    def handler(signum, _frame):
        if not received:
            received.append("SIGINT (Ctrl-C)" if signum == signal.SIGINT else signal.Signals(signum).name)
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore():
        for sig, old in previous.items():
            signal.signal(sig, old)

    return received, restore
