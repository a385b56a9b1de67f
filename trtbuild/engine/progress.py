"""Build progress bars: an IProgressMonitor subclass (real TensorRT or reference) driving tqdm.

TensorRT calls phase_start / step_complete / phase_finish, possibly from several threads and with
nested phases (parent_phase). Each open phase gets a tqdm bar indented by its depth. Returning
False from step_complete cancels the build; `cancel()` requests that, and so does a Ctrl-C
during the build (trtbuild.engine.interrupts: raised once the build call has returned).
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType

from .interrupts import interrupt_pending

_classes: dict[int, type] = {}


def _monitor_class(trt: ModuleType) -> type:
    cls = _classes.get(id(trt))
    if cls is not None:
        return cls

    class TqdmProgressMonitor(trt.IProgressMonitor):
        """Shows one tqdm bar per open build phase and records the phases it saw."""

        def __init__(self, enabled: bool | None = True, stream=None):
            trt.IProgressMonitor.__init__(self)
            self._enabled = enabled
            self._stream = stream if stream is not None else sys.stderr
            self._lock = threading.Lock()
            self._bars: dict[str, object] = {}
            self._depth: dict[str, int] = {}
            self._cancelled = False
            self.phases: list[str] = []          # every phase started, in order
            self.steps: dict[str, int] = {}      # steps completed per phase

        def phase_start(self, phase_name, parent_phase, num_steps):
            with self._lock:
                depth = self._depth.get(parent_phase, -1) + 1 if parent_phase else 0
                self._depth[phase_name] = depth
                self.phases.append(phase_name)
                self.steps[phase_name] = 0
                if self._enabled is not False:
                    from tqdm import tqdm

                    self._bars[phase_name] = tqdm(total=int(num_steps), desc="  " * depth + str(phase_name),
                                                  position=depth, leave=depth == 0, file=self._stream,
                                                  disable=None if self._enabled is None else False,
                                                  dynamic_ncols=True)

        def step_complete(self, phase_name, step):
            with self._lock:
                self.steps[phase_name] = self.steps.get(phase_name, 0) + 1
                bar = self._bars.get(phase_name)
                if bar is not None:
                    bar.update(1)
                return not (self._cancelled or interrupt_pending())  # Ctrl-C cancels the build

        def phase_finish(self, phase_name):
            with self._lock:
                bar = self._bars.pop(phase_name, None)
                if bar is not None:
                    bar.close()
                self._depth.pop(phase_name, None)

        def cancel(self) -> None:
            """Make the next step_complete return False, which cancels the build."""
            self._cancelled = True

        def close(self) -> None:
            """Close bars left open (a failed build may not finish its phases)."""
            with self._lock:
                for bar in self._bars.values():
                    bar.close()
                self._bars.clear()

    _classes[id(trt)] = TqdmProgressMonitor
    return TqdmProgressMonitor


def make_progress_monitor(trt: ModuleType, enabled: bool | None = True, stream=None):
    """A `trt.IProgressMonitor` showing tqdm bars.

    enabled: True always draws, None draws only when the stream is a terminal, False records
    phases without drawing (useful in tests).
    """
    return _monitor_class(trt)(enabled, stream)
