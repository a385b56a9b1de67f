"""Notice a Python-backend stub that died while its server runs on.

Triton's Python backend runs each model instance in a stub process. When a stub dies (killed, out
of memory, a crash in native code), Triton keeps reporting the server and the model ready while
every request to that model fails with "Stub process '<instance>' is not healthy", so a health
probe would keep the broken server in rotation. The servers trtbuild starts poll a StubWatch and,
when a stub died, stop the whole server and exit with an error saying so: readiness is gone with
the server, and a supervisor (Kubernetes, systemd, Docker's restart policy) starts a fresh one.

    watch = StubWatch(workdir, "127.0.0.1:8000")   # after the server is ready: its stubs now
    ...
    death = watch.check()                          # None, or one sentence naming the instance and pid

Stubs are found by the server's private work directory on their command line; the instance name is
the stub's second-to-last argument. A stub that went away because its model was unloaded (the model
is then not ready) is not a death; a reloaded model's new stub, with the same instance name, is
watched in its place.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from .leftovers import Leftover, describe, gone, processes_naming

STUB = b"triton_python_backend_stub"


def live_stubs(marker: str) -> dict[str, Leftover]:
    """{instance name: stub} of the live stubs whose command line names `marker`."""
    found = {}
    for pid in processes_naming(marker):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a for a in args if a]
        if len(args) >= 3 and args[0].endswith(STUB):
            stub = describe(pid)
            if stub is not None and not gone(stub):
                found[args[-2].decode(errors="replace")] = stub
    return found


def model_of(instance: str) -> str:
    """The model of an instance named as Triton names default instance groups: <model>_<group>_<index>."""
    parts = instance.rsplit("_", 2)
    return parts[0] if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit() else instance


class StubWatch:
    """The stubs of one server (see the module docstring); `seen` keeps every stub ever watched, with
    its shared memory and model folder, for leftovers.clean_up."""

    def __init__(self, marker: str, http_url: str):
        self.marker, self.http_url = marker, http_url
        self.instances = live_stubs(marker)
        self.seen: dict[int, Leftover] = {s.pid: s for s in self.instances.values()}

    def _model_ready(self, model: str) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.http_url}/v2/models/{model}/ready", timeout=2) as r:
                return r.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def check(self) -> str | None:
        """One sentence if a watched stub died while Triton still reports its model ready, else None."""
        now = live_stubs(self.marker)
        self.seen.update({s.pid: s for s in now.values()})
        for instance, stub in self.instances.items():
            if instance not in now and gone(stub) and self._model_ready(model_of(instance)):
                return (f"the Python-backend stub of model instance '{instance}' (pid {stub.pid}) died, and Triton "
                        "keeps reporting the model ready while failing every request to it")
        self.instances = {**self.instances, **now}
        return None
