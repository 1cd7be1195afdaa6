"""A local Ray cluster for the tests: a head node and worker nodes, each a separate
`ray start --block` process on this machine (asked for loopback; see below), stopped at the end (SIGTERM to the
processes this helper started, by their ids; `ray start --block` stops its own raylet,
object store and workers on SIGTERM)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

READY = "will now block forever"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    def __init__(self, workers: int = 2, cpus: int = 1, env: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.tmp = Path(tempfile.mkdtemp(prefix="sdnpu-ray-", dir="/tmp"))  # short: Ray's socket paths
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **(env or {}))
        ray = str(Path(sys.executable).parent / "ray")
        self.ray = ray if os.path.exists(ray) else "ray"
        # --node-ip-address=127.0.0.1: Ray itself replaces a loopback address with this
        # machine's own network address (ray._private.services.resolve_ip_for_localhost, so that
        # other machines could reach the node); the nodes still talk only on this machine.
        common = ["--block", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}", "--object-store-memory=80000000", "--disable-usage-stats"]
        try:
            self._start("head", [self.ray, "start", "--head", f"--port={self.port}", "--include-dashboard=false",
                                 f"--temp-dir={self.tmp / 'ray'}", *common])
            for i in range(workers):
                self._start(f"worker{i + 1}", [self.ray, "start", f"--address={self.address}", *common])
        except BaseException:
            self.stop(keep_logs=True)
            raise

    def _start(self, name: str, cmd: list[str], env: dict[str, str] | None = None, tries: int = 3, timeout: float = 240) -> None:
        """Start one node and wait until it has joined; a node that times out joining (an
        overloaded machine: Ray gives a raylet 30 s to register) is started again."""
        for attempt in range(tries):
            log = self.tmp / f"{name}.{attempt}.log"
            with open(log, "wb") as f:
                p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env={**self.env, **(env or {})}, start_new_session=True)
            t0 = time.monotonic()
            while time.monotonic() - t0 < timeout:
                text = log.read_text(errors="replace")
                if READY in text:
                    self.procs.append(p)
                    return
                if p.poll() is not None:
                    break
                time.sleep(0.5)
            self._kill(p)
        raise RuntimeError(f"ray node {name} did not start; see {self.tmp}/{name}.*.log")

    @staticmethod
    def _kill(p: subprocess.Popen[bytes]) -> None:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)  # its own session: only what it started
                p.wait(10)

    def stop(self, keep_logs: bool = False) -> None:
        """Stop the nodes (workers first); remove the cluster's folder unless keep_logs."""
        for p in reversed(self.procs):
            self._kill(p)
        self.procs.clear()
        if not keep_logs:
            shutil.rmtree(self.tmp, ignore_errors=True)
