"""Lesson 11's CUDA graph (course/kernels/graph.py, ``gpt2.Model(graph=True)``): every launch
of a graph model's forward goes to the model's own stream (a launch on numba's default stream
would spoil a capture on the GPU), its logits equal the eager model's, and the driver calls
around the capture - checked against a fake driver, since the simulator has none."""

import enum
import types

import numpy as np
import pytest
from numba import cuda
from numba.cuda.simulator import kernel as simkernel

from course.kernels import gpt2 as G
from course.kernels import graph as gr

RNG = np.random.default_rng(1111)


def _launch_streams(monkeypatch):
    """The stream (or None) of every kernel launch from now on, in order."""
    seen = []
    original = simkernel.FakeCUDAKernel.__getitem__

    def getitem(self, configuration):
        seen.append(configuration[2] if len(configuration) > 2 else None)
        return original(self, configuration)

    monkeypatch.setattr(simkernel.FakeCUDAKernel, "__getitem__", getitem)
    return seen


HS32 = G.Config(vocab_size=37, n_positions=9, n_embd=64, n_layer=1, n_head=2)  # in place


@pytest.mark.parametrize("cfg", [G.MICRO, HS32], ids=["permute passes", "flash in place"])
def test_a_graph_models_launches_all_go_to_its_stream_and_match_the_eager_logits(monkeypatch, cfg):
    params = G.jitter(G.init_params(cfg, seed=21), seed=22)
    tokens = RNG.integers(0, cfg.vocab_size, (1, 3))
    eager = G.forward(tokens, params, cfg)
    model = G.Model(params, cfg, 1, 3, graph=True)
    assert model.in_place == (cfg is HS32)
    assert model.stream != 0 and model.replayed is None  # the simulator: no graph, one stream
    seen = _launch_streams(monkeypatch)
    got = model(model.tokens(tokens)).copy_to_host().reshape(eager.shape)
    assert np.array_equal(got, eager)
    assert len(seen) >= 8 and all(s is model.stream for s in seen), seen
    # the eager model launches on numba's default stream, as before (once is enough)
    if cfg is HS32:
        return
    seen.clear()
    plain = G.Model(params, cfg, 1, 3)
    plain(plain.tokens(tokens))
    assert plain.stream == 0 and all(s in (0, None) for s in seen)


@pytest.mark.parametrize(
    "owner,name,cfg",
    [(G.v6, "launch", G.MICRO), (G.attn, "flash_in_place", HS32)],
    ids=["v6", "flash in place"],
)
def test_a_launcher_that_drops_the_stream_is_caught(monkeypatch, owner, name, cfg):
    # mutant: a launcher ignores the stream it is given (its launches go to stream 0)
    params = G.init_params(cfg, seed=23)
    tokens = RNG.integers(0, cfg.vocab_size, (1, 3))
    original = getattr(owner, name)
    monkeypatch.setattr(owner, name, lambda *a, stream=0, **k: original(*a, **k))
    model = G.Model(params, cfg, 1, 3, graph=True)
    seen = _launch_streams(monkeypatch)
    model(model.tokens(tokens))
    assert any(s is not model.stream for s in seen)


def test_graph_needs_the_v6_and_flash_build():
    params = G.init_params(G.MICRO)
    for opts in ({"matmul": "v4"}, {"attention": "naive"}, {"matmul": "v1_naive"}):
        with pytest.raises(ValueError, match="graph=True needs"):
            G.Model(params, G.MICRO, 1, 3, graph=True, **opts)


class _Result(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901


class FakeDriver:
    """The few cuda.bindings.driver calls graph.py makes, recorded; ``fail`` names a call
    that answers CUDA_ERROR_STREAM_CAPTURE_INVALIDATED."""

    CUresult = _Result
    CUstreamCaptureMode = types.SimpleNamespace(CU_STREAM_CAPTURE_MODE_RELAXED=2)

    def __init__(self, fail=None):
        self.calls, self.fail, self.capturing = [], fail, False

    def _answer(self, name, *rest):
        self.calls.append(name)
        if name == self.fail:
            return (_Result.CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, *([None] * len(rest)))
        return (_Result.CUDA_SUCCESS, *rest)

    def cuStreamBeginCapture(self, h, mode):
        assert mode == 2 and h == 7
        self.capturing = True
        return self._answer("begin")

    def cuStreamEndCapture(self, h):
        self.capturing = False
        return self._answer("end", "graph")

    def cuGraphGetNodes(self, graph, n):
        return self._answer("nodes", None, 5)

    def cuGraphInstantiate(self, graph, flags):
        return self._answer("instantiate", "exe")

    def cuGraphDestroy(self, graph):
        return self._answer("destroy")

    def cuGraphLaunch(self, exe, h):
        assert exe == "exe"
        return self._answer("launch")

    def cuGraphExecDestroy(self, exe):
        return self._answer("exec-destroy")

    def cuGetErrorString(self, err):
        return (_Result.CUDA_SUCCESS, b"operation not permitted when stream is capturing")


class FakeStream:
    handle = 7

    def synchronize(self):
        pass


def test_graph_records_once_replays_and_says_why_it_failed():
    drv = FakeDriver()
    recorded = []
    g = gr.Graph(FakeStream(), lambda: recorded.append(drv.capturing), driver=drv)
    assert recorded == [True] and g.nodes == 5
    g.launch(FakeStream())
    g.launch(FakeStream())
    assert drv.calls == ["begin", "end", "nodes", "instantiate", "destroy", "launch", "launch"]
    g.close()
    with pytest.raises(gr.GraphError, match="closed"):
        g.launch(FakeStream())

    # a spoiled capture: the driver's reason and what to do about it
    with pytest.raises(
        gr.GraphError,
        match="cuStreamEndCapture failed: operation not "
        "permitted.*launch everything on the capturing stream",
    ):
        gr.Graph(FakeStream(), lambda: None, driver=FakeDriver(fail="end"))
    # a launch that raises while recording: the capture is ended, the launch's error wins
    drv = FakeDriver()
    with pytest.raises(ZeroDivisionError):
        gr.Graph(FakeStream(), lambda: 1 / 0, driver=drv)
    assert drv.calls == ["begin", "end"] and not drv.capturing
    with pytest.raises(gr.GraphError, match="default stream cannot be captured"):
        gr.Graph(0, lambda: None, driver=FakeDriver())
    with pytest.raises(gr.GraphError, match="simulator has no graphs"):
        gr.Graph(FakeStream(), lambda: None)


def test_replayed_runs_once_records_once_then_copies_and_replays(monkeypatch):
    drv = FakeDriver()
    real = gr.Graph
    monkeypatch.setattr(gr, "Graph", lambda s, f, keep=(): real(s, f, keep, driver=drv))
    inputs = []
    rep = gr.Replayed(lambda d: inputs.append(d.copy_to_host()), FakeStream())
    a, b = (cuda.to_device(RNG.integers(0, 9, (2, 3)).astype(np.int32)) for _ in range(2))
    rep(a)
    assert len(inputs) == 2 and drv.calls.count("launch") == 1  # run, recorded, replayed
    assert all(np.array_equal(x, a.copy_to_host()) for x in inputs)
    rep(b)  # the record reads the same buffer, now holding b
    assert len(inputs) == 2 and drv.calls.count("launch") == 2 and drv.calls.count("begin") == 1
    assert np.array_equal(rep.buffer.copy_to_host(), b.copy_to_host())
    assert rep.graph.keep[0] is rep.buffer
    with pytest.raises(ValueError, match="recorded for a int32 \\(2, 3\\) input"):
        rep(cuda.to_device(np.zeros((2, 4), np.int32)))
