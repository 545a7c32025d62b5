"""The JupyterHub image recipe and z2jh values, rendered and validated without Docker.

No Docker daemon or Kubernetes cluster runs in CI, so the image is not built here (the
README says how); instead the Dockerfile is parsed and held to hadolint-style rules, every
file it copies must exist and not be excluded from the build context, every ``python -m
course`` command it or the JupyterHub config runs must be a real command with valid
arguments (the notebook copy runs for real), and the z2jh values are checked as YAML against
the shape KubeSpawner expects.  The image's build context is the student wheel alone;
test_wheel.py builds that wheel, lists the context and scans it for solutions.
"""

import fnmatch
import re
import shlex

import pytest
import yaml
from conftest import REPO

from course.__main__ import COMMANDS
from course.platform import hosting

HUB = REPO / "instructor" / "jupyterhub"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out, buf = [], ""
    for line in text.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):
            continue
        buf += line.rstrip("\\").strip() + " " if line.rstrip().endswith("\\") else line.strip()
        if not line.rstrip().endswith("\\"):
            word, _, rest = buf.partition(" ")
            out.append((word.upper(), rest.strip()))
            buf = ""
    return out


@pytest.fixture(scope="module")
def dockerfile():
    return instructions((HUB / "Dockerfile").read_text())


def dockerignore() -> list[str]:
    return [
        l.strip()
        for l in (REPO / ".dockerignore").read_text().splitlines()
        if l.strip() and not l.startswith("#")
    ]


def ignored(rel: str) -> bool:
    """Docker's rule: the last pattern that matches the path (or a folder above it) decides;
    a ``!`` pattern lets the path back in."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    out = False
    for rule in dockerignore():
        pat = rule.lstrip("!")
        if any(fnmatch.fnmatch(x, pat) and x.count("/") == pat.count("/") for x in prefixes):
            out = not rule.startswith("!")
    return out


def test_base_image_is_a_pinned_jupyter_stack(dockerfile):
    args = dict(a.split("=", 1) for i, a in dockerfile if i == "ARG" and "=" in a)
    base = [a for i, a in dockerfile if i == "FROM"]
    assert len(base) == 1
    image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base[0])
    name, _, tag = image.partition(":")
    assert name.startswith("quay.io/jupyter/") and tag and tag != "latest", image


def test_runs_as_the_notebook_user_and_adds_nothing_from_urls(dockerfile):
    users = [a for i, a in dockerfile if i == "USER"]
    assert users and users[-1] in ("${NB_UID}", "$NB_UID", "1000"), users
    assert not [a for i, a in dockerfile if i == "ADD"], "use COPY (hadolint DL3020)"
    runs = " ".join(a for i, a in dockerfile if i == "RUN")
    assert not re.search(r"\b(curl|wget)\b", runs), "nothing is downloaded but packages"


def test_pip_installs_skip_the_cache_and_apt_is_not_needed(dockerfile):
    for i, a in dockerfile:
        if i == "RUN" and "pip install" in a:
            assert "--no-cache-dir" in a, a  # hadolint DL3042
        if i == "RUN" and "apt-get install" in a:
            assert "--no-install-recommends" in a and "rm -rf /var/lib/apt/lists" in a


def test_the_image_copies_the_student_wheel_alone(dockerfile):
    """The build context is the wheel (test_wheel.py builds one, lists the context and scans
    it): no notebook with solutions, no hidden case, no key is ever sent to Docker."""
    copies = [a for i, a in dockerfile if i == "COPY"]
    sources = [p for a in copies for p in shlex.split(a)[:-1] if not p.startswith("--")]
    assert sources == ["dist/course-*.whl"], sources
    assert not ignored("dist/course-0.1.0-py3-none-any.whl")
    for secret in (
        "notebooks/01_vector_add.ipynb",
        "instructor/hidden/vector_add.py",
        "instructor/README.md",
        "course/__init__.py",
        "setup.py",
        ".venv",
        ".git",
        ".whl",
        "dist/other.tar.gz",
    ):
        assert ignored(secret), f"{secret} is in the build context"
    runs = " && ".join(a for i, a in dockerfile if i == "RUN")
    assert "pip install --no-cache-dir /tmp/course-dist/course-*.whl" in runs
    assert "pip wheel --no-deps -w dist ." in (HUB / "Dockerfile").read_text()


def course_commands(text: str):
    for m in re.finditer(r"python -m course (\w+)([^&;\n]*)", text):
        yield m.group(1), shlex.split(m.group(2).replace('"${COURSE_NOTEBOOKS}"', "X"))


def test_course_commands_in_the_image_exist(dockerfile):
    runs = " && ".join(a for i, a in dockerfile if i == "RUN")
    found = list(course_commands(runs))
    assert {c for c, _ in found} == {"doctor", "notebooks"}
    for command, _args in found:
        assert command in COMMANDS


@pytest.fixture(scope="module")
def hub():
    return yaml.safe_load((HUB / "config.yaml").read_text())


def test_z2jh_values_have_the_shape_kubespawner_reads(hub):
    su = hub["singleuser"]
    assert set(hub) == {"singleuser"}
    assert su["image"]["name"] and str(su["image"]["tag"]) not in ("", "latest")
    assert su["cmd"] == "jupyterhub-singleuser"
    assert su["defaultUrl"].endswith("/notebooks/00_start_here.ipynb")
    profiles = su["profileList"]
    assert sum(bool(p.get("default")) for p in profiles) == 1
    for p in profiles:
        assert set(p) <= {"display_name", "description", "default", "kubespawner_override"}
        assert set(p["kubespawner_override"]) <= {
            "environment",
            "extra_resource_limits",
            "node_selector",
            "tolerations",
            "image",
            "cpu_limit",
            "mem_limit",
        }


def test_gpu_mig_and_cpu_profiles(hub):
    over = [p["kubespawner_override"] for p in hub["singleuser"]["profileList"]]
    limits = [o.get("extra_resource_limits", {}) for o in over]
    assert {"nvidia.com/gpu": "1"} in limits
    mig = [k for lim in limits for k in lim if k.startswith("nvidia.com/mig-")]
    assert mig == ["nvidia.com/mig-2g.20gb"]
    cpu = [o for o, lim in zip(over, limits) if not lim]
    assert cpu and cpu[0]["environment"]["NUMBA_ENABLE_CUDASIM"] == "1"
    # what the comments promise: a 2g.20gb slice (19.6 GiB) keeps the lecture sizes, a
    # 1g.10gb slice (9.6 GiB) gets the small ones
    assert hosting.mig_profile("NVIDIA H100 80GB HBM3 MIG 2g.20gb") == "2g.20gb"
    assert hosting.lecture_fits(19.6) and not hosting.lecture_fits(9.6)
    assert f"({hosting.LECTURE_NEEDS_GIB:g} GB needed)" in (HUB / "config.yaml").read_text()


def test_post_start_hook_copies_student_notebooks_and_keeps_work(hub, tmp_path):
    from course.grading.classroom.distribute import notebooks_main as main

    cmd = hub["singleuser"]["lifecycleHooks"]["postStart"]["exec"]["command"]
    assert cmd[:4] == ["python", "-m", "course", "notebooks"]  # student copies by default
    home = hub["singleuser"]["defaultUrl"].split("/lab/tree/")[1].split("/")[0]
    assert cmd[cmd.index("--to") + 1] == f"/home/jovyan/{home}"
    args = cmd[4:]
    args[args.index("--to") + 1] = str(tmp_path / home)
    assert main(args) == 0
    nb = tmp_path / home / "notebooks" / "01_vector_add.ipynb"
    text = nb.read_text()
    assert "# YOUR CODE HERE" in text and "### BEGIN SOLUTION" not in text
    nb.write_text(text.replace("# YOUR CODE HERE", "# my work"))
    assert main(args) == 0 and "# my work" in nb.read_text()  # a restart keeps it


def test_readme_says_how_to_build_and_deploy():
    text = (REPO / "README.md").read_text() + (REPO / "instructor" / "README.md").read_text()
    assert "docker build -f instructor/jupyterhub/Dockerfile" in text
    assert "instructor/jupyterhub/config.yaml" in text


def test_lecture_memory_need_covers_every_measured_notebook():
    import json

    reports = sorted((REPO / "assets" / "benchmarks").glob("notebook-memory-*.json"))
    assert reports, "run python -m course.bench.notebook_memory on a GPU"
    for r in reports:
        data = json.loads(r.read_text())
        measured = {row["notebook"].removesuffix(".ipynb") for row in data["rows"]}
        stems = {p.stem for p in (REPO / "notebooks").glob("*.ipynb")}
        assert stems - measured <= set(hosting.NOT_YET_MEASURED_GIB), stems - measured
        assert all(
            gib < hosting.LECTURE_NEEDS_GIB for gib, _why in hosting.NOT_YET_MEASURED_GIB.values()
        )
        assert not [row for row in data["rows"] if row["error"]]
        worst = max(row["added_gib"] for row in data["rows"])
        assert worst < hosting.LECTURE_NEEDS_GIB <= worst + 2, (r.name, worst)
