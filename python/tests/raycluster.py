"""A local Ray cluster for the tests, on loopback only: a head node and worker nodes, each a
separate `ray start --block` process on this machine, every one bound to 127.0.0.1 (GCS,
raylets, object managers, workers; no dashboard), stopped at the end (SIGTERM to the processes
this helper started, by their ids; `ray start --block` stops its own raylet, object store and
workers on SIGTERM).

Ray replaces a loopback --node-ip-address / --address with this machine's own network address
(see ray_loopback.py); the nodes are started through ray_loopback.py, which keeps 127.0.0.1,
and `connect()` does the same for the driver. While the cluster lives a thread reads the TCP
and UDP sockets of its processes (the nodes, every process below them, and the driver) from
/proc and records any whose local or remote address is outside 127.0.0.0/8 (::1 and
::ffff:127.x count as loopback; 0.0.0.0 only as the remote end of a listening or unconnected
socket): `violations` must stay empty."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from ray_loopback import keep_loopback

READY = "will now block forever"
LAUNCHER = str(Path(__file__).with_name("ray_loopback.py"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _addr(hexaddr: str) -> str:
    """An address of /proc/net/{tcp,udp}{,6} ("0100007F:1F90") as text, without the port."""
    h = hexaddr.split(":")[0]
    if len(h) == 8:
        return socket.inet_ntop(socket.AF_INET, bytes.fromhex(h)[::-1])
    raw = b"".join(bytes.fromhex(h[i:i + 8])[::-1] for i in range(0, 32, 8))  # four host-order words
    return socket.inet_ntop(socket.AF_INET6, raw)


def is_loopback(a: str) -> bool:
    return a.startswith("127.") or a == "::1" or a.startswith("::ffff:127.")


def _unspecified(a: str) -> bool:
    return a in ("0.0.0.0", "::")


def process_tree(roots: set[int]) -> set[int]:
    """The roots and every process below them (by parent id), and every process in a session
    a root leads (Ray's processes stay in the session of the `ray start` that began them)."""
    parent: dict[int, int] = {}
    session: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parent[int(d)], session[int(d)] = int(fields[1]), int(fields[3])
        except (OSError, IndexError, ValueError):
            continue
    out = {p for p in roots if p in parent}
    grew = True
    while grew:
        n = len(out)
        out |= {p for p, pp in parent.items() if pp in out or session.get(p) in roots}
        grew = len(out) != n
    return out


def sockets_of(pids: set[int]) -> list[dict[str, Any]]:
    """The TCP and UDP sockets (IPv4 and IPv6) these processes hold: proto, local, remote,
    state (hex, 0A = listen), pid, command."""
    owner: dict[str, int] = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    owner[link[8:-1]] = pid
        except OSError:
            continue
    out: list[dict[str, Any]] = []
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = Path(f"/proc/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[9] in owner:
                pid = owner[f[9]]
                try:
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                except OSError:
                    comm = "?"
                out.append({"proto": proto, "local": _addr(f[1]), "lport": int(f[1].rsplit(":", 1)[1], 16), "remote": _addr(f[2]),
                            "rport": int(f[2].rsplit(":", 1)[1], 16), "state": f[3], "pid": pid, "command": comm})
    return out


def off_loopback(s: dict[str, Any]) -> bool:
    """A socket that is bound or connected to an address outside 127.0.0.0/8."""
    if not is_loopback(s["local"]):
        return True
    return not (is_loopback(s["remote"]) or (_unspecified(s["remote"]) and s["rport"] == 0))


class LocalCluster:
    def __init__(self, workers: int = 2, cpus: int = 1, env: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.tmp = Path(tempfile.mkdtemp(prefix="sdnpu-ray-", dir="/tmp"))  # short: Ray's socket paths
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", **(env or {}))
        self.violations: list[dict[str, Any]] = []
        self.seen: set[tuple[str, str, int, str, int]] = set()  # loopback sockets of the cluster's processes
        self.samples = 0
        self._watching = threading.Event()
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watching.set()
        self._watcher.start()
        common = ["--block", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}", "--object-store-memory=80000000",
                  "--disable-usage-stats"]
        try:
            self._start("head", [sys.executable, LAUNCHER, "start", "--head", f"--port={self.port}", "--include-dashboard=false",
                                 f"--temp-dir={self.tmp / 'ray'}", *common])
            for i in range(workers):
                self._start(f"worker{i + 1}", [sys.executable, LAUNCHER, "start", f"--address={self.address}", *common])
        except BaseException:
            self.stop(keep_logs=True)
            raise

    def connect(self, **kw: Any) -> None:
        """ray.init for this process as the cluster's driver, on 127.0.0.1."""
        import ray

        keep_loopback()
        ray.init(address=self.address, _node_ip_address="127.0.0.1", **kw)

    def check(self) -> None:
        """One look at the sockets of the cluster's processes and of this one (the driver)."""
        pids = process_tree({p.pid for p in self.procs}) | {os.getpid()}
        for s in sockets_of(pids):
            if off_loopback(s):
                self.violations.append(s)
            else:
                self.seen.add((s["command"], s["local"], s["lport"], s["remote"], s["rport"]))
        self.samples += 1

    def _watch(self) -> None:
        while self._watching.is_set():
            self.check()
            time.sleep(0.25)

    def _start(self, name: str, cmd: list[str], env: dict[str, str] | None = None, tries: int = 3, timeout: float = 240) -> None:
        """Start one node and wait until it has joined; a node that times out joining (an
        overloaded machine: Ray gives a raylet 30 s to register) is started again."""
        for attempt in range(tries):
            log = self.tmp / f"{name}.{attempt}.log"
            with open(log, "wb") as f:
                p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env={**self.env, **(env or {})}, start_new_session=True)
            self.procs.append(p)
            t0 = time.monotonic()
            while time.monotonic() - t0 < timeout:
                text = log.read_text(errors="replace")
                if READY in text:
                    return
                if p.poll() is not None:
                    break
                time.sleep(0.5)
            self._kill(p)
            self.procs.remove(p)
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
        """Stop the nodes (workers first) and the socket watch; remove the cluster's folder
        unless keep_logs."""
        if self.procs:
            self.check()
        self._watching.clear()
        self._watcher.join()
        for p in reversed(self.procs):
            self._kill(p)
        self.procs.clear()
        if not keep_logs:
            shutil.rmtree(self.tmp, ignore_errors=True)
