"""A throwaway JupyterLab server and a headless Chromium driving it (for tests/test_browser.py).

Everything stateful (Jupyter config/data/runtime dirs, IPython, matplotlib, the Lab settings
and Chromium's profile) lives under one temporary HOME, so a test run neither reads nor
writes the user's set-up.  The server is stopped by PID (its whole process group) in
``JupyterLab.stop``, which the test calls from a ``finally``/fixture teardown.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Lab settings written into the fresh settings dir: no autosave (never write outputs back),
# no news/update toasts over the notebook, every cell kept in the DOM (no virtual windowing).
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def find_chromium() -> str | None:
    """Path of Debian's chromium, None if there is none.  $COURSE_CHROMIUM, when set,
    is the only candidate (so ``COURSE_CHROMIUM=/nonexistent`` shows the skip/fail path)."""
    env = os.environ.get("COURSE_CHROMIUM")
    candidates = [env] if env else [*CHROMIUM_CANDIDATES, shutil.which("chromium")]
    return next((p for p in candidates if p and os.path.isfile(p) and os.access(p, os.X_OK)), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    """``jupyter lab`` on 127.0.0.1:<free port>, no token, everything under ``home``."""

    def __init__(self, root: Path, home: Path, log: Path, drop_env=()):
        self.root, self.home, self.log_path = Path(root), Path(home), Path(log)
        self.drop_env = tuple(drop_env)  # variables the server and its kernels must not see
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    # -- life cycle --------------------------------------------------------------------
    def env(self) -> dict:
        h = self.home
        env = dict(os.environ)
        env.update(
            HOME=str(h),
            JUPYTER_CONFIG_DIR=str(h / "jupyter-config"),
            JUPYTER_DATA_DIR=str(h / "jupyter-data"),
            JUPYTER_RUNTIME_DIR=str(h / "jupyter-runtime"),
            IPYTHONDIR=str(h / "ipython"),
            MPLCONFIGDIR=str(h / "matplotlib"),
            JUPYTERLAB_SETTINGS_DIR=str(h / "lab-settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(h / "lab-workspaces"),
            XDG_CONFIG_HOME=str(h / ".config"),
            XDG_CACHE_HOME=str(h / ".cache"),
            JUPYTER_PLATFORM_DIRS="1",
            PYTHONUNBUFFERED="1",
        )
        for name in ("MPLBACKEND",) + self.drop_env:  # conftest's Agg; what `import course` set
            env.pop(name, None)
        return env

    def write_config(self) -> None:
        h = self.home
        for d in (
            "jupyter-config",
            "jupyter-data",
            "jupyter-runtime",
            "ipython",
            "matplotlib",
            "lab-settings",
            "lab-workspaces",
            ".config",
            ".cache",
        ):
            (h / d).mkdir(parents=True, exist_ok=True)
        config = {
            "IdentityProvider": {"token": ""},
            "ServerApp": {
                "ip": "127.0.0.1",
                "port": self.port,
                "port_retries": 0,
                "open_browser": False,
                "allow_root": True,
                "password": "",
                "root_dir": str(self.root),
                # only for DELETE /api/kernels from the test itself
                "disable_check_xsrf": True,
            },
            "LabApp": {
                "user_settings_dir": str(h / "lab-settings"),
                "workspaces_dir": str(h / "lab-workspaces"),
                "news_url": None,
                "expose_app_in_browser": True,
                "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
            },
            "LanguageServerManager": {"autodetect": False},
        }
        (h / "jupyter-config" / "jupyter_server_config.json").write_text(json.dumps(config))
        for rel, value in LAB_SETTINGS.items():
            p = h / "lab-settings" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(value))

    def start(self, timeout: float = 60) -> None:
        self.write_config()
        # $COURSE_JUPYTER: another install's `jupyter` (e.g. a fresh `pip install -e .`).
        jupyter = Path(
            os.environ.get("COURSE_JUPYTER") or Path(sys.executable).with_name("jupyter")
        )
        # The config file in JUPYTER_CONFIG_DIR is read anyway; the flags make `ps` readable.
        cmd = [
            str(jupyter) if jupyter.exists() else "jupyter",
            "lab",
            "--no-browser",
            "--allow-root",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            f"--ServerApp.root_dir={self.root}",
        ]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.root,
            env=self.env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter lab exited with {self.proc.returncode}:\n" + self.log_tail()
                )
            try:
                self.api("status")
                return
            except OSError:
                time.sleep(0.25)
        raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n" + self.log_tail())

    def stop(self) -> None:
        """Stop the server by PID (SIGTERM to its process group, SIGKILL if it lingers)."""
        if self.proc is None:
            return
        pid = self.proc.pid
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                try:
                    os.killpg(pid, sig)  # its own session: the server and its kernels
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        try:  # kernels it started live in the same process group; make sure none is left
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._log.close()
        self.proc = None

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    # -- REST --------------------------------------------------------------------------
    def api(self, path: str):
        with urllib.request.urlopen(f"{self.url}/api/{path}", timeout=5) as r:
            return json.loads(r.read())

    def delete(self, path: str) -> None:
        req = urllib.request.Request(f"{self.url}/api/{path}", method="DELETE")
        urllib.request.urlopen(req, timeout=10).close()

    def kernel_for(self, rel: str) -> dict | None:
        """The kernel (as /api/kernels lists it) of the session for notebook ``rel``."""
        ids = [
            s["kernel"]["id"]
            for s in self.api("sessions")
            if s.get("path") == rel and s.get("kernel")
        ]
        return next((k for k in self.api("kernels") if k["id"] in ids), None)

    def wait_kernel_ready(self, rel: str, timeout: float = 90) -> dict:
        """Wait until the notebook's kernel is up, idle and has a browser connection."""
        deadline = time.time() + timeout
        kernel = None
        while time.time() < deadline:
            try:
                kernel = self.kernel_for(rel)
            except OSError as exc:  # e.g. a 500 while the session is being created: poll on
                kernel = {"error": repr(exc)}
            if (
                kernel
                and kernel.get("execution_state") == "idle"
                and kernel.get("connections", 0) >= 1
            ):
                return kernel
            time.sleep(0.25)
        raise TimeoutError(
            f"{rel}: no connected idle kernel after {timeout} s (last seen: {kernel})"
        )

    def shutdown_kernels(self) -> None:
        try:
            kernels = self.api("kernels")
        except OSError:
            return  # stop() ends them anyway, with the server's process group
        for k in kernels:
            try:
                self.delete(f"kernels/{k['id']}")
            except OSError:
                pass


# ---------------------------------------------------------------------------------------
# the page: what a person does and sees

PROMPT = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputArea-prompt"


def prompts(page) -> list[str]:
    return [t.strip() for t in page.locator(PROMPT).all_inner_texts()]


def open_notebook(
    page, lab: JupyterLab, rel: str, workspace: str, timeout_ms: int = 60_000
) -> None:
    """Open ``rel`` (a path under the server root) in its own fresh Lab workspace (so no
    tab of an earlier notebook comes back and starts a kernel), and wait for its cells."""
    page.goto(f"{lab.url}/lab/workspaces/{workspace}/tree/{rel}", wait_until="domcontentloaded")
    page.locator(PROMPT).first.wait_for(timeout=timeout_ms)


def run_all(page, lab: JupyterLab, rel: str, timeout_s: float) -> float:
    """Run > Run All Cells, as a person would; wait until the run is over; seconds taken.

    A Run All clicked before the page's kernel connection is up silently runs nothing,
    so wait for the server to show the kernel connected and idle, click, and confirm the
    first prompt changed from ``[ ]:`` (clicking again if it did not).
    """
    lab.wait_kernel_ready(rel)
    t0 = time.time()
    for attempt in range(3):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name=re.compile(r"^Run All Cells")).click()
        try:
            page.wait_for_function(
                "sel => { const p = document.querySelector(sel);"
                "         return p && !['', '[ ]:'].includes(p.textContent.trim()); }",
                arg=PROMPT,
                timeout=10_000,
            )
            break
        except Exception:  # noqa: BLE001 - playwright's TimeoutError: the click ran nothing
            if attempt == 2:
                raise AssertionError(
                    f"{rel}: Run All started nothing; prompts {prompts(page)}"
                ) from None
    # Run All queues every cell ([*]); they get numbers as they finish, and an error
    # stops the run (the cells after it go back to [ ]).  Over when no [*] is left.
    page.wait_for_function(
        "sel => { const ps = [...document.querySelectorAll(sel)];"
        "         return ps.length && !ps.some(p => p.textContent.includes('*')); }",
        arg=PROMPT,
        timeout=timeout_s * 1000,
    )
    return time.time() - t0


def notebook_json(page) -> dict:
    """The open notebook as Lab holds it (nbformat JSON, outputs included)."""
    return page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.toJSON()")


def error_outputs(nb: dict) -> list[str]:
    """'cell N: Ename: evalue' for every error output in the notebook JSON."""
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        for o in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if o.get("output_type") == "error":
                out.append(f"cell {i}: {o.get('ename')}: {o.get('evalue')}")
    return out


def visible_tracebacks(page) -> list[str]:
    """Rendered outputs that show a Python traceback (what a person would see as red)."""
    texts = page.locator(
        ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output"
        "[data-mime-type='application/vnd.jupyter.stderr']"
    ).all_inner_texts()
    return [
        t[:3000]
        for t in texts
        if "Traceback" in t or re.search(r"^\w*(Error|Exception)\b", t, re.M)
    ]


def stderr_outputs(page) -> list[str]:
    return page.locator(
        ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output"
        "[data-mime-type='application/vnd.jupyter.stderr']"
    ).all_inner_texts()
