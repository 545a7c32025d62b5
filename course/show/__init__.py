"""Display: one plot layer, one slider panel, and the figures in ``assets/``.

``plots`` (figure -> axes helpers), ``widgets`` (ipywidgets slider panels that time a kernel
as you move them; ``panel_view`` their status lines and, in the simulator, the plot of a
GPU's recorded grid, ``records``; ``simcounts`` what the simulator can count of a launch),
``figures`` (each lesson's drawings and ``python -m course figures``).
"""
