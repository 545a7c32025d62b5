"""The platform: GPU or simulator, the device, where the course's files are.

``runtime`` picks the mode before numba loads and says what the device is; ``hosting`` knows
Colab, JupyterHub and MIG slices; ``resources`` finds the notebooks, faces and profiles in a
checkout or an installed wheel; ``data`` loads the face set; ``doctor`` explains a broken
set-up.
"""
