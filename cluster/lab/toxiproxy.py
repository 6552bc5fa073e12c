"""A small client of the Toxiproxy HTTP API (the real toxiproxy-server, v2).

Owns: creating proxies, adding and removing toxics, resetting. Used by the local launcher to put a
proxy in front of every broker listener and by network faults. Loopback targets only.
Must not: decide which links a fault cuts (cluster/lab/local.py and chaos/ do).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

from cluster.access.errors import TxnlabError

STREAMS = ("upstream", "downstream")
TOXIC_PREFIX = "txnlab-"                 # every toxic txnlab adds: txnlab-<name>-<stream>
ISOLATE_TOXIC = {"name": "isolate", "type": "timeout", "attributes": {"timeout": 0}}


class ToxiproxyError(TxnlabError, RuntimeError):
    pass


@dataclass(frozen=True)
class Proxy:
    name: str
    listen: str
    upstream: str


class Toxiproxy:
    def __init__(self, api: str, timeout: float = 5.0):
        self.api = api.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201, 204)) -> Any:
        try:
            resp = requests.request(method, self.api + path, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise ToxiproxyError(f"toxiproxy at {self.api} unreachable: {exc}") from exc
        if resp.status_code not in ok:
            raise ToxiproxyError(f"{method} {path} -> {resp.status_code}: {resp.text.strip()}")
        return resp.json() if resp.content else None

    def version(self) -> str:
        return str(self._call("GET", "/version"))

    def proxies(self) -> dict[str, dict]:
        return self._call("GET", "/proxies")

    def ensure_proxy(self, proxy: Proxy) -> None:
        """Create the proxy, or leave it be when one of that name already has the same addresses."""
        existing = self.proxies().get(proxy.name)
        if existing and existing["listen"] == proxy.listen and existing["upstream"] == proxy.upstream:
            return
        if existing:
            self._call("DELETE", f"/proxies/{proxy.name}")
        _require_loopback(proxy.listen)
        _require_loopback(proxy.upstream)
        self._call("POST", "/proxies", {"name": proxy.name, "listen": proxy.listen,
                                        "upstream": proxy.upstream, "enabled": True})

    def add_toxic(self, proxy: str, name: str, toxic_type: str, stream: str,
                  attributes: dict[str, Any], toxicity: float = 1.0) -> None:
        if stream not in STREAMS:
            raise ValueError(f"stream must be one of {STREAMS}, got {stream!r}")
        self._call("POST", f"/proxies/{proxy}/toxics", {"name": name, "type": toxic_type, "stream": stream,
                                                        "toxicity": toxicity, "attributes": attributes})

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}", ok=(200, 204, 404))

    def toxics(self) -> dict[str, list[dict]]:
        """Active toxics by proxy name (proxies without toxics left out)."""
        return {name: p["toxics"] for name, p in self.proxies().items() if p.get("toxics")}

    def reset(self) -> None:
        """Remove every toxic and re-enable every proxy."""
        self._call("POST", "/reset")


def toxic_names(links: list[str], toxic: dict) -> list[tuple[str, str]]:
    """(proxy, toxic name) of every toxic add_toxic_on_links adds for `toxic` on links."""
    name = TOXIC_PREFIX + toxic.get("name", toxic["type"])
    return [(proxy, f"{name}-{stream}") for proxy in links for stream in toxic.get("streams", STREAMS)]


def add_toxic_on_links(toxiproxy: Toxiproxy, links: list[str], toxic: dict) -> list[str]:
    """Add `toxic` {type, attributes, [name], [streams], [toxicity]} to every proxy in links (each stream
    it names, both by default), named txnlab-<name or type>-<stream>; the proxy names."""
    for proxy, name in toxic_names(links, toxic):
        toxiproxy.add_toxic(proxy, name, toxic["type"], name.rsplit("-", 1)[1], dict(toxic.get("attributes", {})),
                            toxic.get("toxicity", 1.0))
    return links


def restore_proxies(toxiproxy: Toxiproxy, proxies: list[Proxy]) -> None:
    """Every proxy with the addresses its layout gives: created, or put back where a fault pointed it elsewhere."""
    for proxy in proxies:
        toxiproxy.ensure_proxy(proxy)


def _require_loopback(address: str) -> None:
    host = address.rsplit(":", 1)[0]
    if host not in ("127.0.0.1", "localhost", "[::1]"):
        raise ToxiproxyError(f"refusing non-loopback address {address!r}: txnlab only targets loopback")
