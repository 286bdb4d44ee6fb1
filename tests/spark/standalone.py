"""A Spark standalone cluster on this machine, from the pyspark installation's own ``spark-class``:
a master and workers bound to 127.0.0.1, for the cluster tests (``test_cluster.py``) and
``bench/spark_cluster.py``. Each process is started in a process group of its own and stopped
by it (its executors with it).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent
ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)


class Cluster:
    """``workers`` workers of ``cores`` cores and ``memory`` each; with ``blind``, each in a mount
    namespace of its own where ``private`` is an empty tmpfs (needs ``unshare -m``: root)."""

    def __init__(self, base: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 executor_memory: str = "512m"):
        self.workers, self.cores, self.memory, self.executor_memory = workers, cores, memory, executor_memory
        self.base, self.private = base, base / "private"
        self.private.mkdir(parents=True)
        self.port, self.ui = _free_port(), _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                        SPARK_NO_DAEMONIZE="1", PYSPARK_PYTHON=sys.executable)
        self.blind = subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        spark_class = str(SPARK_HOME / "bin" / "spark-class")
        self._spawn("master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.ui)])
        self._wait(self._bound, "the master")
        for n in range(1, self.workers + 1):
            work = self.base / f"worker{n}"
            work.mkdir()
            cmd = [spark_class, "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                   "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(_free_port()), "--work-dir", str(work)]
            if self.blind:  # PRIVATE is an empty tmpfs for this worker and its executors
                cmd = ["unshare", "-m", "sh", "-c", f'mount -t tmpfs none "{self.private}" && exec "$@"', "sh", *cmd]
            self._spawn(f"worker{n}", cmd)
        self._wait(lambda: sum(w["state"] == "ALIVE" for w in _json(f"http://127.0.0.1:{self.ui}/json/")["workers"]) == self.workers,
                   f"{self.workers} workers")

    def _bound(self) -> bool:
        """Whether the master is up, and where: a port taken meanwhile (another cluster's on
        this machine) makes Spark take the next, which its log says."""
        import re

        log = (self.base / "master.log").read_text(errors="replace")
        rpc = re.search(r"Starting Spark master at spark://127\.0\.0\.1:(\d+)", log)
        ui = re.search(r"Bound MasterWebUI to 127\.0\.0\.1, and started at http://[^:]+:(\d+)", log)
        if not (rpc and ui):
            return False
        self.port, self.ui = int(rpc.group(1)), int(ui.group(1))
        self.url = f"spark://127.0.0.1:{self.port}"
        return True

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = open(self.base / f"{name}.log", "wb")
        self.procs.append(subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                           start_new_session=True))

    def _wait(self, ready, what: str, timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if ready():
                    return
            except (OSError, ValueError):  # not up yet
                pass
            time.sleep(0.5)
        raise RuntimeError(f"{what} did not start in {timeout:.0f} s; see {self.base}/*.log")

    def stop(self) -> None:
        for p in reversed(self.procs):  # each in a process group of its own: its executors too
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)

    def executors(self) -> list[int]:
        """The pids of the executor JVMs of this cluster's workers."""
        ours = {str(p.pid) for p in self.procs}
        found = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                cmd = (d / "cmdline").read_bytes()
                pgid = (d / "stat").read_text().rsplit(")", 1)[1].split()[2]
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" in cmd and pgid in ours:
                found.append(int(d.name))
        return found

    def audit(self, *args: str, python: str = sys.executable, conf: tuple[str, ...] = (),
              env: dict | None = None, **popen) -> subprocess.Popen:
        cmd = [python, "-m", "auditor", "audit", "--engine", "spark", "--spark-master", self.url, "--quiet",
               "--spark-conf", f"spark.executor.memory={self.executor_memory}",
               "--spark-conf", "spark.driver.host=127.0.0.1", "--spark-conf", "spark.driver.bindAddress=127.0.0.1",
               *(x for c in conf for x in ("--spark-conf", c)), *args]
        return subprocess.Popen(cmd, cwd=ROOT, env=dict(self.env, **(env or {})), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, **popen)


