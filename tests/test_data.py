"""course.platform.data: the shipped real faces, resizing, deterministic augmentation, clear errors."""

import hashlib
import shutil

import numpy as np
import pytest

from course.platform import data


def test_shipped_file_matches_its_checksum():
    raw = data.FACES_FILE.read_bytes()
    assert hashlib.sha256(raw).hexdigest() == data.FACES_SHA256
    faces = data.real_faces()
    assert faces.shape == (100, 25, 25) and faces.dtype == np.uint8
    assert faces.std() > 20, "real faces have contrast"


def test_default_is_the_100_real_faces_at_lecture_shape():
    D = data.load_faces()
    assert D.shape == (100, 55 * 45) and D.dtype == np.float32
    assert 0.0 <= D.min() and D.max() <= 1.0
    assert len({row.tobytes() for row in D}) == 100  # 100 different faces


def test_small_m_and_other_shapes():
    D = data.load_faces(7, shape=(12, 10))
    assert D.shape == (7, 120)
    np.testing.assert_array_equal(D, data.load_faces(None, shape=(12, 10))[:7])


def test_augmentation_is_deterministic_and_prefix_stable():
    a = data.load_faces(350, shape=(20, 16))
    b = data.load_faces(9000, shape=(20, 16), progress=False)
    np.testing.assert_array_equal(a, b[:350])
    np.testing.assert_array_equal(a, data.load_faces(350, shape=(20, 16)))
    assert not np.array_equal(a[100], a[0]), "augmented copies differ from the originals"
    assert np.abs(a[100:200].mean(axis=0) - a[:100].mean(axis=0)).mean() < 0.08


def test_augmentation_reaches_the_lecture_size_quickly():
    import time

    t0 = time.perf_counter()
    D = data.load_faces(20_000, progress=False)
    assert D.shape == (20_000, 2475)
    assert time.perf_counter() - t0 < 20


@pytest.mark.parametrize("m", [0, -5])
def test_nonpositive_m(m):
    with pytest.raises(ValueError, match="positive"):
        data.load_faces(m)


def test_non_integer_m():
    with pytest.raises(TypeError):
        data.load_faces(2.5)


@pytest.mark.parametrize("shape", [(55,), (0, 45), (55, 45, 1), "55x45", (5.5, 4)])
def test_wrong_shape(shape):
    with pytest.raises(ValueError, match="shape"):
        data.load_faces(3, shape=shape)


def test_corrupted_file_is_detected(tmp_path, monkeypatch):
    bad = tmp_path / "lfw_faces_25x25.npy"
    shutil.copy(data.FACES_FILE, bad)
    raw = bytearray(bad.read_bytes())
    raw[-10] ^= 0xFF
    bad.write_bytes(bytes(raw))
    monkeypatch.setattr(data, "FACES_FILE", bad)
    with pytest.raises(data.FaceDataError, match="corrupted"):
        data.load_faces(3)


def test_missing_file_is_explained(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "FACES_FILE", tmp_path / "nope.npy")
    with pytest.raises(data.FaceDataError, match="not found"):
        data.load_faces()


def test_as_images_round_trip():
    D = data.load_faces(3)
    imgs = data.as_images(D)
    assert imgs.shape == (3, 55, 45)
    with pytest.raises(ValueError):
        data.as_images(D, shape=(10, 10))


def test_no_scikit_image_at_runtime():
    import sys

    data.load_faces(150, shape=(10, 8))
    assert "skimage" not in sys.modules
