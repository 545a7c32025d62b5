"""Rebuild data/faces/lfw_faces_25x25.npy from scikit-image's bundled LFW subset.

Needs scikit-image only here (``pip install scikit-image``, or the ``rebuild-data`` extra);
the course itself reads the .npy file with numpy and never imports scikit-image.

    python data/faces/make_faces.py            # writes the .npy and prints its SHA-256

skimage/data/lfw_subset.npy holds 200 images of 25 x 25 pixels (float64 in [0, 1]): the
first 100 are faces, the last 100 are background patches.  We keep the 100 faces as uint8
(value = round(255 * x)), 62.5 KB in all.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "lfw_faces_25x25.npy"
NUM_FACES = 100


def main() -> int:
    try:
        import skimage
    except ImportError:
        print(
            "scikit-image is needed to rebuild the face set: pip install scikit-image",
            file=sys.stderr,
        )
        return 1
    src = Path(os.path.dirname(skimage.__file__)) / "data" / "lfw_subset.npy"
    images = np.load(src)
    if images.shape != (200, 25, 25):
        raise SystemExit(f"unexpected shape {images.shape} in {src}")
    faces = images[:NUM_FACES]
    if faces.min() < 0 or faces.max() > 1:
        raise SystemExit("expected values in [0, 1]")
    faces_u8 = np.round(faces * 255.0).astype(np.uint8)
    err = np.abs(faces_u8 / 255.0 - faces).max()
    np.save(OUT, faces_u8, allow_pickle=False)
    digest = hashlib.sha256(OUT.read_bytes()).hexdigest()
    print(f"scikit-image {skimage.__version__}: {src}")
    print(
        f"wrote {OUT.name}: {faces_u8.shape} uint8, {OUT.stat().st_size} bytes, "
        f"max rounding error {err:.2e}"
    )
    print(f"sha256 {digest}  (update FACES_SHA256 in course/platform/data.py if it changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
