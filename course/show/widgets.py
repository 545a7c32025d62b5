"""The one slider panel every lesson uses.

    panel = course.show.widgets.SliderPanel(
        {"grid-stride": run_add},                    # name -> run(**params) -> Timing
        sliders={"threads_per_block": [32, 64, 128, 256, 512, 1024],
                 "blocks": [1, 8, 64, 512]},
        nbytes=lambda p: 3 * N * 4)                  # bytes moved per call -> GB/s axis
    panel                                            # last expression in a cell: shows it

Moving a slider re-launches every variant at the new setting and redraws the plot in
place (a PNG in an ``ipywidgets.Image``: no extension beyond ipywidgets 8).  "Sweep"
runs the whole range of the x slider.  Everything can be driven from code too:
``panel.set(threads_per_block=128)``, ``panel.sweep()``, ``panel.results``.

Only settings that can launch can be chosen.  ``constraint(**params)`` says why a setting
cannot (a sentence) or returns None; a slider offers only values that some valid setting
has, and when a move lands on a setting that cannot launch, the other sliders move to the
nearest one that can (the panel says which moved and why).  The default must be valid.
:meth:`SliderPanel.selectable` lists every setting a user can reach, without running any.

In simulator mode the plot is never the simulator's CPU time (a laptop's threads say
nothing of a GPU's speed): with ``record="04_matmul/v3"`` it is the GPU's time and
bandwidth or FLOP/s recorded for the whole grid (``records.py``, ``python -m course bench
sliders``), marked with the device and the date, and ``counts(**params)`` adds what the
simulator can honestly say of the same launch (``simcounts.py``: sectors per request,
bank-conflict ways, occupancy, the roofline floor).  On a GPU the live measurement is
plotted and the record drawn dashed beside it.
"""

from __future__ import annotations

import itertools

import ipywidgets as W

from ..measure import perf
from ..measure.timing import Timing
from ..platform import runtime
from . import panel_view as view
from . import plots, records, settings


class SliderPanel:
    """Sliders for launch parameters, a re-run on change, and a time/bandwidth plot."""

    def __init__(
        self,
        variants,
        sliders: dict,
        *,
        x: str | None = None,
        nbytes=None,
        flops=None,
        constraint=None,
        title: str = "",
        value: dict | None = None,
        record=None,
        counts=None,
        budget_s: float = 2.0,
        runs: int = 23,
    ):
        if callable(variants):
            variants = {"kernel": variants}
        if not variants or not sliders:
            raise ValueError("SliderPanel needs at least one variant and one slider")
        for name, options in sliders.items():
            if len(options) == 0:
                raise ValueError(f"slider {name!r} has no options")
        self.variants = dict(variants)
        self.budget_s, self.runs_per_setting = budget_s, runs  # see too_slow()
        rec = records.load(record) if isinstance(record, str) else record
        self.record: records.Record | None = rec
        self.replay = rec is not None and runtime.MODE != "gpu"
        if rec is not None and self.replay:  # the simulator shows the GPU's grid: nothing timed
            sliders, x = rec.sliders, rec.x
            value = {k: v for k, v in (rec.value or {}).items() if k in sliders}
        self.x = x or next(iter(sliders))
        if self.x not in sliders:
            raise ValueError(f"x={self.x!r} is not one of the sliders {list(sliders)}")
        self.nbytes, self.flops, self.constraint = nbytes, flops, constraint
        sliders = settings.launchable(sliders, self.why_not)
        start = self._start(sliders, value or {})
        self._adjusting = False  # True while the panel moves sliders itself
        self.note = ""  # which sliders the last move adjusted, and why
        self.title = (rec.title or title) if (rec is not None and self.replay) else title
        self.counts = counts
        self.counted: dict = {}
        self.results: dict[tuple, dict[str, Timing]] = {}
        self.runs = 0  # kernel launches done through the panel (for tests)
        self.sliders = {
            name: W.SelectionSlider(
                options=list(opts),
                description=name,
                value=start[name],
                continuous_update=False,
                style={"description_width": "initial"},
                layout=W.Layout(width="420px"),
            )
            for name, opts in sliders.items()
        }
        self.sweep_button = W.Button(
            description=f"Sweep {self.x}",
            icon="play",
            tooltip=f"run every value of {self.x}",
            layout=W.Layout(width="auto"),
        )
        self.status = W.HTML()
        self.image = W.Image(format="png")
        self.image.layout.max_width = "100%"
        for s in self.sliders.values():
            s.observe(self._on_change, names="value")
        self.sweep_button.on_click(lambda _b: self.sweep())
        mode = W.HTML(view.mode_html(self.record))
        self.widget = W.VBox(
            [
                W.HTML(f"<b>{self.title}</b>") if self.title else W.HTML(""),
                mode,
                *self.sliders.values(),
                self.sweep_button,
                self.status,
                self.image,
            ]
        )
        self.update()

    # -- state -------------------------------------------------------------------------
    @property
    def params(self) -> dict:
        """The current slider values."""
        return {k: s.value for k, s in self.sliders.items()}

    def _key(self, params: dict) -> tuple:
        return tuple(params[k] for k in self.sliders)

    def set(self, **params) -> None:
        """Move sliders from code and re-run once.  One slider moves like a user's (the
        others follow to a valid setting); several at once must name a valid setting."""
        for k, v in params.items():
            if k not in self.sliders:
                raise KeyError(f"no slider {k!r}; sliders are {list(self.sliders)}")
            if v not in self.sliders[k].options:
                raise ValueError(f"{k}={v!r} is not one of {list(self.sliders[k].options)}")
        target = dict(self.params, **params)
        if len(params) > 1 and (why := self.why_not(target)):
            raise ValueError(f"{params} is not a valid setting: {why}")
        self._move(target, moved=set(params))

    def why_not(self, params: dict) -> str | None:
        """Why ``params`` cannot launch (the constraint's sentence), or None."""
        return (self.constraint(**params) or None) if self.constraint else None

    def resolve(self, params: dict, moved=()) -> dict:
        """``params`` if valid, else the nearest valid setting that keeps the sliders in
        ``moved`` where they are (fewest option steps; the x slider moves last)."""
        if not self.why_not(params):
            return dict(params)
        options = {k: list(s.options) for k, s in self.sliders.items()}
        best = settings.nearest(options, params, set(moved), self.why_not, self.x)
        if best is None:
            raise ValueError(f"no valid setting has { ({k: params[k] for k in moved}) }")
        return best

    def selectable(self) -> list[dict]:
        """Every setting a user can land on from the default by moving one slider at a
        time (what the panel runs; nothing is launched to list them)."""
        seen, todo = {}, [self._default]
        while todo:
            p = todo.pop()
            key = self._key(p)
            if key in seen:
                continue
            seen[key] = p
            for k, s in self.sliders.items():
                for v in s.options:
                    todo.append(self.resolve(dict(p, **{k: v}), moved={k}))
        return list(seen.values())

    def _start(self, sliders: dict, value: dict) -> dict:
        for k, v in value.items():
            if k not in sliders:
                raise KeyError(f"no slider {k!r}; sliders are {list(sliders)}")
            if v not in sliders[k]:
                raise ValueError(f"default {k}={v!r} is not one of {list(sliders[k])}")
        start = {k: value.get(k, settings.middle(opts)) for k, opts in sliders.items()}
        if value and len(value) == len(sliders) and (why := self.why_not(start)):
            raise ValueError(f"the default {start} is not a valid setting: {why}")
        if self.why_not(start):
            start = settings.nearest(
                {k: list(o) for k, o in sliders.items()}, start, set(value), self.why_not, self.x
            )
            if start is None:
                raise ValueError(f"no valid setting has the default {value}")
        self._default = start
        return start

    def _move(self, target: dict, moved) -> None:
        """Put the sliders at ``target`` (or the nearest valid setting) and re-run once."""
        fixed = self.resolve(target, moved)
        shifted = [k for k in fixed if fixed[k] != target[k]]
        said = ", ".join(f"{k} = {v}" for k, v in target.items())
        self.note = (
            (
                ", ".join(f"{k} {target[k]} \u2192 {fixed[k]}" for k in shifted)
                + f": {said} cannot launch ({self.why_not(target)})"
            )
            if shifted
            else ""
        )
        self._adjusting = True
        try:
            for k, v in fixed.items():
                self.sliders[k].value = v
        finally:
            self._adjusting = False
        self.update()

    def _on_change(self, change) -> None:
        if self._adjusting:
            return
        moved = {k for k, s in self.sliders.items() if s is change["owner"]}
        self._move(self.params, moved)

    # -- running -----------------------------------------------------------------------
    def too_slow(self, params: dict) -> str:
        """On a GPU, why ``params`` is shown from the record instead of run: its recorded
        time for every variant, times ``runs`` launches a setting takes (course.benchmark:
        3 warm-up + 20 timed), is over ``budget_s``; '' when it is run."""
        rec = self.record
        rows = (rec.at(params) if rec else None) or {}
        if rec is None or runtime.MODE != "gpu" or not rows:
            return ""
        ms = sum(r.get("median_ms") or 0.0 for r in rows.values())
        if ms * self.runs_per_setting <= self.budget_s * 1e3:
            return ""
        said = ", ".join(f"{k} = {v}" for k, v in params.items())
        return (
            f"{said} takes {ms / 1e3:.3g} s a launch on {rec.device}: its "
            f"{self.runs_per_setting} launches would keep the slider waiting "
            f"{ms * self.runs_per_setting / 1e3:.0f} s, so the panel shows the record of "
            f"{rec.date} instead of running it"
        )

    def measure(self, params: dict) -> dict[str, Timing] | None:
        """Run every variant at ``params`` (cached); None if the constraint rejects them;
        {} when too slow to run on a GPU (:meth:`too_slow`: the record stands in)."""
        key = self._key(params)
        if key in self.results:
            return self.results[key]
        if self.too_slow(params):
            return {}
        if self.constraint:
            why = self.constraint(**params)
            if why:
                return None
        out = {}
        for name, fn in ({} if self.replay else self.variants).items():
            t = fn(**params)
            out[name] = t if isinstance(t, Timing) else Timing([float(t)], label=name)
            self.runs += 1
        self.results[key] = out
        return out

    def update(self) -> None:
        """Run at the current setting and redraw."""
        params = self.params
        why = self.constraint(**params) if self.constraint else None
        if why:
            self.status.value = f"<span style='color:#a00'>Not a valid setting: {why}</span>"
        else:
            try:
                res = self.measure(params)
                counted = self._count(params)
                slow = self.too_slow(params)
                self.status.value = (
                    (
                        view.recorded_html(self.record, params)
                        + f"<br><small>{_escape(slow)}</small>"
                        if slow
                        else view.status_html(res, params, self.nbytes, self.flops, self.record)
                    )
                    + view.counts_html(counted, self.record, params)
                    + (f"<br><small>moved {_escape(self.note)}</small>" if self.note else "")
                )
            except Exception as exc:  # noqa: BLE001 - show the error beside the sliders
                self.status.value = (
                    f"<span style='color:#a00'>{type(exc).__name__}: "
                    f"{_escape(str(exc))[:400]}</span>"
                )
        self.redraw()

    def sweep(self) -> None:
        """Run every value of the x slider at the other sliders' current values."""
        params = self.params
        opts = list(self.sliders[self.x].options)
        for i, v in enumerate(opts):
            self.status.value = f"sweeping {self.x}: {v} ({i + 1}/{len(opts)})..."
            p = dict(params, **{self.x: v})
            if not (self.constraint and self.constraint(**p)):
                self.measure(p)
        self.status.value = f"swept {len(opts)} values of {self.x}"
        self.redraw()

    def sweep_all(self) -> None:
        """Run every combination of every slider (for a heat map or a report)."""
        for combo in itertools.product(*(s.options for s in self.sliders.values())):
            p = dict(zip(self.sliders, combo))
            if not (self.constraint and self.constraint(**p)):
                self.measure(p)
        self.redraw()

    def _count(self, params: dict) -> dict:
        """What the simulator can say of this launch (``counts``), once per setting."""
        key = self._key(params)
        if self.counts and key not in self.counted:
            self.counted[key] = self.counts(**params)
        return self.counted.get(key, {})

    # -- drawing -----------------------------------------------------------------------
    def redraw(self) -> None:
        if runtime.MODE != "gpu":  # never the simulator's CPU time as a speed
            fig = view.recorded_figure(
                self.record, self.x, list(self.sliders[self.x].options), self.params, self.title
            )
            self.image.value = plots.png_bytes(fig)
            return plots.close(fig)
        rate = self.nbytes or self.flops
        fig, axes = plots.figure(figsize=(9, 3.4) if rate else (5.5, 3.4), ncols=2 if rate else 1)
        ax_t = axes[0] if rate else axes
        params = self.params
        xs = list(self.sliders[self.x].options)
        times: dict = {}
        rates: dict = {}
        for name in self.variants:
            times[name], rates[name] = [], []
            for v in xs:
                p = dict(params, **{self.x: v})
                t = self.results.get(self._key(p), {}).get(name)
                times[name].append(t.median_ms if t else None)
                rates[name].append(
                    view.rate(t, p, self.nbytes, self.flops) if (t and rate) else None
                )
        if self.record:  # the record beside the live figures, dashed
            rt, rr = view.recorded(self.record, self.x, xs, params)
            times.update({f"{n} ({self.record.date} record)": v for n, v in rt.items()})
            rates.update({f"{n} ({self.record.date} record)": v for n, v in rr.items()})
        numeric = all(isinstance(v, (int, float)) for v in xs)
        plots.sweep(
            xs if numeric else list(range(len(xs))),
            times,
            xlabel=self.x,
            ylabel="time (ms)",
            axes=ax_t,
            highlight=params[self.x] if numeric else xs.index(params[self.x]),
            logx=numeric and settings.is_pow2(xs),
            logy=True,
            title=self.title,
            dashed=[n for n in times if n.endswith(" record)")],
        )
        if rate:
            c = perf.measured_ceilings() if runtime.MODE == "gpu" else {}
            ceiling = (
                c.get("copy_gbps")
                if self.nbytes
                else (c.get("fp32_tflops") and c["fp32_tflops"] * 1e3)
            )
            plots.sweep(
                xs if numeric else list(range(len(xs))),
                rates,
                xlabel=self.x,
                ylabel="GB/s" if self.nbytes else "GFLOP/s",
                axes=axes[1],
                highlight=params[self.x] if numeric else xs.index(params[self.x]),
                logx=numeric and settings.is_pow2(xs),
                ceiling=ceiling,
                ceiling_label="measured copy bandwidth" if self.nbytes else "FP32 peak",
                dashed=[n for n in rates if n.endswith(" record)")],
            )
        self.image.value = plots.png_bytes(fig)
        plots.close(fig)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.widget)


def _escape(s: str) -> str:
    import html

    return html.escape(s)
