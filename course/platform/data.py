"""Face data for lessons 05-07: 100 real faces, resized, and a deterministic augmentation.

The lecture (CSE P 524, Lecture 9) uses CelebA: m = 202,599 grayscale images of
55 x 45 = 2,475 pixels.  We cannot download it, so ``data/faces/`` ships 100 real faces
from Labeled Faces in the Wild (through scikit-image's bundled ``lfw_subset.npy``, see
``data/faces/README.md``) and :func:`load_faces` stretches them to any m:

- images 0..99 are the real faces, resized with Pillow to ``shape``;
- image i >= 100 is real face ``i % 100`` with a random horizontal flip, a shift of up to
  2 pixels, a brightness/contrast change and a little noise, all drawn from a generator
  seeded by i's chunk, so the same m always gives the same array.
The copies are *not* new people: the mean face and eigenfaces of 202,599 images are those
of the 100 faces, slightly blurred.  The sizes and the memory traffic are the lecture's.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

import numpy as np

from . import resources

FACES_FILE = resources.path("data", "faces", "lfw_faces_25x25.npy")
FACES_SHA256 = "b92d0ed3bfa64306652418ed1eaed9698d011131ae737e824eaa66c30607d53b"
NUM_REAL = 100
LECTURE_M = 202_599  # CelebA images in the lecture
LECTURE_SHAPE = (55, 45)  # rows x cols of one image in the lecture: n = 2,475 pixels
CHUNK = 8192  # images augmented per step (one generator per chunk)
MAX_SHIFT = 2  # pixels


class FaceDataError(RuntimeError):
    """The shipped face file is missing or corrupted."""


def real_faces(path: Path | None = None) -> np.ndarray:
    """The 100 real faces as stored: uint8, shape (100, 25, 25); checksum verified."""
    path = Path(path or FACES_FILE)
    if not path.exists():
        raise FaceDataError(
            f"face data file not found: {path} (it ships with the course; "
            "rebuild it with `python data/faces/make_faces.py`)"
        )
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if path == FACES_FILE and digest != FACES_SHA256:
        raise FaceDataError(
            f"face data file {path} is corrupted: SHA-256 {digest[:16]}... "
            f"expected {FACES_SHA256[:16]}...; restore it from git "
            "(`git checkout data/faces`) or rebuild it with make_faces.py"
        )
    import io

    faces = np.load(io.BytesIO(raw), allow_pickle=False)
    if faces.dtype != np.uint8 or faces.ndim != 3 or faces.shape[0] != NUM_REAL:
        raise FaceDataError(
            f"{path} holds {faces.dtype} {faces.shape}, expected uint8 ({NUM_REAL}, rows, cols)"
        )
    return faces


def _check_shape(shape) -> tuple[int, int]:
    try:
        rows, cols = (int(s) for s in shape)
        ok = tuple(shape) == (rows, cols)
    except (TypeError, ValueError):
        ok = False
    if not ok or rows < 1 or cols < 1:
        raise ValueError(
            f"shape must be (rows, cols) with two positive integers, e.g. "
            f"{LECTURE_SHAPE}; got {shape!r}"
        )
    return rows, cols


def resized_faces(shape=LECTURE_SHAPE) -> np.ndarray:
    """The 100 real faces resized with Pillow (bicubic) to ``shape``: float32 in [0, 1]."""
    from PIL import Image

    rows, cols = _check_shape(shape)
    out = np.empty((NUM_REAL, rows, cols), dtype=np.float32)
    for i, face in enumerate(real_faces()):
        img = Image.fromarray(face, mode="L").resize((cols, rows), Image.Resampling.BICUBIC)
        out[i] = np.asarray(img, dtype=np.float32) / np.float32(255.0)
    return out


def load_faces(
    m: int | None = None, shape=LECTURE_SHAPE, progress: bool | None = None
) -> np.ndarray:
    """Face matrix D: float32, shape (m, rows * cols), one image per row, values in [0, 1].

    ``m=None``: the 100 real faces.  ``m <= 100``: the first m real faces.  ``m > 100``:
    the real faces followed by deterministic augmented copies (see the module docstring).
    ``progress``: print a progress line (default: when m > 50,000).
    """
    if m is None:
        m = NUM_REAL
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)):
        raise TypeError(f"m must be an integer number of images, got {m!r}")
    m = int(m)
    if m <= 0:
        raise ValueError(f"m must be a positive number of images, got {m}")
    rows, cols = _check_shape(shape)
    base = resized_faces((rows, cols))
    n = rows * cols
    D = np.empty((m, n), dtype=np.float32)
    first = min(m, NUM_REAL)
    D[:first] = base[:first].reshape(first, n)
    if m <= NUM_REAL:
        return D
    if progress is None:
        progress = m > 50_000
    padded = np.pad(base, ((0, 0), (MAX_SHIFT, MAX_SHIFT), (MAX_SHIFT, MAX_SHIFT)), mode="edge")
    r_idx = np.arange(rows)[None, :, None]
    c_idx = np.arange(cols)[None, None, :]
    t0 = time.perf_counter()
    for start in range(NUM_REAL, m, CHUNK):
        stop = min(m, start + CHUNK)
        D[start:stop] = _augment(padded, start, stop, r_idx, c_idx).reshape(stop - start, n)
        if progress:
            _progress(stop, m, t0)
    if progress:
        print(file=sys.stderr, flush=True)
    return D


def _augment(padded, start, stop, r_idx, c_idx) -> np.ndarray:
    """Augmented copies for images start..stop-1 (vectorized over the chunk)."""
    # Parameters are drawn for a whole CHUNK (and noise from its own generator), so
    # image i gets the same augmentation whatever m is.
    rng = np.random.default_rng([20240, start])
    noise_rng = np.random.default_rng([20241, start])
    count = stop - start
    cols = padded.shape[2] - 2 * MAX_SHIFT
    src = np.arange(start, stop) % NUM_REAL
    dy = rng.integers(-MAX_SHIFT, MAX_SHIFT + 1, CHUNK)[:count, None, None]
    dx = rng.integers(-MAX_SHIFT, MAX_SHIFT + 1, CHUNK)[:count, None, None]
    flip = rng.random(CHUNK)[:count] < 0.5
    cc = np.where(flip[:, None, None], cols - 1 - c_idx, c_idx)  # mirrored columns
    img = padded[src[:, None, None], r_idx + MAX_SHIFT + dy, cc + MAX_SHIFT + dx]
    contrast = rng.uniform(0.8, 1.2, CHUNK).astype(np.float32)[:count, None, None]
    bright = rng.uniform(-0.08, 0.08, CHUNK).astype(np.float32)[:count, None, None]
    mu = img.mean(axis=(1, 2), keepdims=True, dtype=np.float32)
    img = (img - mu) * contrast + mu + bright
    noise = noise_rng.standard_normal(img.shape, dtype=np.float32)
    noise *= np.float32(0.02)
    img += noise
    np.clip(img, 0.0, 1.0, out=img)
    return img


def _progress(done: int, total: int, t0: float) -> None:
    frac = done / total
    bar = "#" * int(30 * frac)
    print(
        f"\rloading faces [{bar:<30}] {done:,}/{total:,} images ({time.perf_counter() - t0:.1f} s)",
        end="",
        file=sys.stderr,
        flush=True,
    )


def as_images(D: np.ndarray, shape=LECTURE_SHAPE) -> np.ndarray:
    """Rows of D as images: (m, rows, cols) (a view when possible)."""
    rows, cols = _check_shape(shape)
    D = np.asarray(D)
    if D.ndim == 1:
        D = D[None, :]
    if D.shape[-1] != rows * cols:
        raise ValueError(f"rows of D have {D.shape[-1]} pixels, shape {shape} needs {rows * cols}")
    return D.reshape(D.shape[0], rows, cols)


def face_matrix(D) -> np.ndarray:
    """``D`` as a C-contiguous float32 (m images, n pixels) array, or a clear ValueError."""
    D = np.asarray(D)
    if D.ndim != 2 or D.shape[0] < 1 or D.shape[1] < 1:
        raise ValueError(
            f"D must be a 2-D array (m images, n pixels) with m, n >= 1; got shape {D.shape}"
        )
    if D.dtype != np.float32:
        raise ValueError(f"D must be float32 (the lecture's value_t), got {D.dtype}")
    return np.ascontiguousarray(D)
