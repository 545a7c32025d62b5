"""Every figure in assets/ is drawn by code in the repo (python -m course figures)."""

from conftest import REPO

from course.show import figures


def test_every_asset_png_has_a_drawing_function():
    drawn = set(figures.registry())
    committed = {p.name for p in (REPO / "assets").glob("*.png")}
    assert committed <= drawn, f"figures without code: {sorted(committed - drawn)}"
    assert drawn <= committed, (
        f"figures not committed (run python -m course figures): {sorted(drawn - committed)}"
    )


def test_figures_redraw(tmp_path):
    paths = figures.draw(outdir=tmp_path)
    assert paths and all(
        p.stat().st_size > 5000 and p.read_bytes()[:4] == b"\x89PNG" for p in paths
    )
