"""`ray` on loopback only: `python ray_loopback.py start ...` is `ray start ...` except that an
address given as 127.0.0.1 stays 127.0.0.1. Ray (2.x, services.resolve_ip_for_localhost) turns
a loopback --node-ip-address or --address into this machine's own network address, so that
other machines could reach the node; the test cluster must talk on 127.0.0.0/8 only. Used by
raycluster.py for every node it starts; `loopback_driver()` does the same for the driver."""

from __future__ import annotations

import sys


def keep_loopback() -> None:
    """Make Ray keep 127.0.0.1 as given (this process only)."""
    import ray._private.services as services

    resolve = services.resolve_ip_for_localhost
    if getattr(resolve, "sdnpu_keeps_loopback", False):
        return

    def keep(host: str) -> str:
        return host if host.startswith("127.") else resolve(host)

    keep.sdnpu_keeps_loopback = True  # type: ignore[attr-defined]
    services.resolve_ip_for_localhost = keep  # callers look it up on the module


if __name__ == "__main__":
    keep_loopback()
    from ray.scripts.scripts import main

    sys.argv[0] = "ray"
    main()
