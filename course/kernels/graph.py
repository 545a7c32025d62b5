"""A CUDA graph of numba launches: record a forward's launches once, replay them in one call.

numba-cuda 0.30 has no graph API, so this talks to the CUDA driver through cuda-python
(``cuda.bindings.driver``, which numba-cuda itself uses).  A graph is recorded by *stream
capture*: between ``cuStreamBeginCapture`` and ``cuStreamEndCapture`` every launch on that
stream is recorded, not run; ``cuGraphInstantiate`` turns the record into something
``cuGraphLaunch`` replays with one host call.  What it saves is the host's time per launch
(numba spends ~20-100 us of Python a launch, the GPU a few us on a small kernel), which sets
the time of a small forward such as GPT-2 at T = 64.

Two rules follow from capture, and :class:`course.kernels.gpt2.Model` keeps both:

- **Every launch on one stream of its own** (``cuda.stream()``), never numba's default one:
  the legacy default stream cannot be captured, and a launch there while another stream is
  capturing spoils the capture.  (A blocking stream, so work on the default stream before
  and after still runs in order with it: timing events and copies need nothing special.)
- **The same buffers every replay**: a graph keeps the addresses it saw, so inputs are copied
  into the buffer the capture used, and every buffer it used is kept alive with it.

In the simulator there is no driver to record anything: :func:`capture` refuses, and callers
run their launches one by one instead.
"""

from __future__ import annotations

from numba import config

HOST_ONLY = True  # no kernels here: the driver calls around them


class GraphError(RuntimeError):
    """The driver refused to record or replay a graph (with its reason)."""


def _driver():
    from cuda.bindings import driver

    return driver


def _ok(result, what: str, drv) -> tuple:
    """The driver's answer after its error code, or GraphError naming the call."""
    err, rest = result[0], tuple(result[1:])
    if err != drv.CUresult.CUDA_SUCCESS:
        text = drv.cuGetErrorString(err)
        why = text[1].decode() if len(text) > 1 and isinstance(text[1], bytes) else str(err)
        hint = ""
        if err == drv.CUresult.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
            hint = (
                " - something ran on another stream (numba's default one?) while this "
                "stream was being recorded; launch everything on the capturing stream"
            )
        raise GraphError(f"{what} failed: {why}{hint}")
    return rest


def _handle(stream) -> int:
    handle = int(stream.handle) if hasattr(stream, "handle") else int(stream)
    if not handle:
        raise GraphError("the default stream cannot be captured: launch on cuda.stream()")
    return handle


class Graph:
    """Launches recorded once on ``stream`` and replayed by :meth:`launch`.

    ``launches()`` must put every launch on ``stream`` and allocate nothing the replays need
    afresh (run it once before capturing: compiles and allocations happen then).  ``keep``:
    objects the graph's launches use (device arrays), held as long as the graph is."""

    def __init__(self, stream, launches, keep=(), driver=None):
        if config.ENABLE_CUDASIM and driver is None:
            raise GraphError("the CUDA simulator has no graphs: run the launches one by one")
        drv = driver or _driver()
        self._drv, self.keep = drv, tuple(keep)
        h = _handle(stream)
        _ok(
            drv.cuStreamBeginCapture(h, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED),
            "cuStreamBeginCapture",
            drv,
        )
        try:
            launches()
        except BaseException:
            drv.cuStreamEndCapture(h)  # leave the stream usable; the launch's error wins
            raise
        (graph,) = _ok(drv.cuStreamEndCapture(h), "cuStreamEndCapture", drv)
        try:
            try:  # launches recorded (for the report)
                self.nodes: int | None = int(drv.cuGraphGetNodes(graph, 0)[-1])
            except Exception:  # noqa: BLE001 - a count only, never worth a failure
                self.nodes = None
            (self._exe,) = _ok(drv.cuGraphInstantiate(graph, 0), "cuGraphInstantiate", drv)
        finally:
            drv.cuGraphDestroy(graph)  # the instantiated graph keeps what it needs

    def launch(self, stream) -> None:
        """Replay every recorded launch on ``stream`` (asynchronous, like a launch)."""
        if self._exe is None:
            raise GraphError("this graph was closed")
        _ok(self._drv.cuGraphLaunch(self._exe, _handle(stream)), "cuGraphLaunch", self._drv)

    def close(self) -> None:
        """Free the driver's copy now (otherwise when the graph is collected)."""
        exe, self._exe = getattr(self, "_exe", None), None
        if exe is not None:
            self._drv.cuGraphExecDestroy(exe)
        self.keep = ()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - the interpreter may be shutting down
            pass


class Replayed:
    """``fn(d_in)`` - launches only, all on ``stream`` - replayed as one graph.

    The first call runs ``fn`` once as it is (its kernels compile, its buffers are
    allocated), then records it reading a device buffer of this object's own, and replays
    the record; later calls copy their input into that buffer (on ``stream``) and replay.
    ``keep()``: further device arrays ``fn`` uses without owning them (held with the graph)."""

    def __init__(self, fn, stream, keep=tuple):
        self.fn, self.stream, self.keep = fn, stream, keep
        self.buffer = None
        self.graph: Graph | None = None

    def __call__(self, d_in) -> None:
        from numba import cuda

        if self.buffer is None:
            self.buffer = cuda.device_array(d_in.shape, d_in.dtype)
        elif (d_in.shape, d_in.dtype) != (self.buffer.shape, self.buffer.dtype):
            raise ValueError(
                f"the graph was recorded for a {self.buffer.dtype} "
                f"{self.buffer.shape} input, not {d_in.dtype} {d_in.shape}"
            )
        if d_in is not self.buffer:
            self.buffer.copy_to_device(d_in, stream=self.stream)
        if self.graph is None:
            self.fn(self.buffer)  # compile and allocate before recording
            self.stream.synchronize()
            self.graph = Graph(
                self.stream, lambda: self.fn(self.buffer), keep=(self.buffer, *self.keep())
            )
        self.graph.launch(self.stream)
