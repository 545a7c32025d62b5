"""Display: one plot layer, one slider panel, and the figures in ``assets/``.

Floor 7: may import anything below (kernels, exercises, the tracer, the hardware view)
except ``grading``.  ``plots`` (figure -> axes helpers), ``widgets`` (ipywidgets slider
panels that time a kernel as you move them), ``figures`` (each lesson's drawings and
``python -m course figures``).
"""
