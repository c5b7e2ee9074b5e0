"""Who a visitor is: a signed-in account, a browser's server-signed token or an API session, and the client address
a request comes from (anonymous visitors are bounded per address: playground.serving.quotas).

Plain Python: the web UI (playground.ui.sessions, playground.ui.state) reads the request; this module says what it
means. The registry of who owns which package keeps only keyed hashes of addresses (address_key), never an IP.

    PLAYGROUND_TRUST_FORWARDED        take the client address from X-Forwarded-For (on by default on a Space, where
                                      the proxy sets it)
    PLAYGROUND_PROXY_HOPS             which X-Forwarded-For entry, counted from the right, is the client (default 0:
                                      the rightmost one that is not an internal address)

Only the right-hand end of X-Forwarded-For can be trusted: a client may send the header itself, and a proxy that
appends (nginx's $proxy_add_x_forwarded_for, what uvicorn's ProxyHeadersMiddleware expects: it reads the list from
the right) puts the address it saw after whatever the client wrote; a proxy that overwrites leaves that one address
alone. The rightmost entry is the client's in both cases; internal hops (10/8, 172.16/12, 192.168/16, 100.64/10,
loopback, link-local, fc00::/7: the platform's own proxies) are skipped from the right. A Space's peer address is
its proxy's (an internal 10.x address), so without the header every visitor would be one.

ZeroGPU's X-IP-Token is a JWT that the Hub adds and ZeroGPU's device API verifies; spaces only decodes it
(spaces.zero.utils.jwt_payload) and this app has no key to check its signature, so a client could write any token:
it is not used to tell visitors apart.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from playground.settings import env_flag, env_int, env_number, env_str, on_space

TOKEN_PATTERN = re.compile(r"^([A-Za-z0-9_-]{16,64})\.([A-Za-z0-9_-]{22})$")  # a visitor id, its signature


@dataclass(frozen=True)
class Visitor:
    """Who is asking: "hf:<username>" when signed in, "anon:<token>" for a browser, "session:<id>" for an API client."""

    key: str
    signed_in: bool = False
    admin: bool = False  # the Space's owner: sees and deletes every package (never the shipped ones)
    address: str = ""  # address_key of the client address it came from: anonymous visitors are bounded per address

    @classmethod
    def signed(cls, username: str) -> "Visitor":
        owner = env_str("SPACE_AUTHOR_NAME")
        return cls(f"hf:{username}", signed_in=True, admin=bool(owner) and username.lower() == owner.lower())

    @classmethod
    def browser(cls, token: str, secret: bytes, address: str = "") -> "Visitor | None":
        """The anonymous visitor a token the server issued (issue_token) names; None for any other string."""
        visitor_id = verify_token(token, secret)
        return cls(f"anon:{visitor_id}", address=address) if visitor_id else None

    @classmethod
    def session(cls, session_id: str, address: str = "") -> "Visitor":
        return cls(f"session:{session_id}", address=address)


def _signature(visitor_id: str, secret: bytes) -> str:
    digest = hmac.new(secret, b"visitor:" + visitor_id.encode(), hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def issue_token(secret: bytes) -> str:
    """A new anonymous visitor's token: a random id and its HMAC under the server's secret. Only the server can make
    one, so a client cannot name itself somebody else, nor pick a fresh identity without asking the server (which
    bounds what one address may hold: Quotas.models_per_address)."""
    visitor_id = secrets.token_urlsafe(18)
    return f"{visitor_id}.{_signature(visitor_id, secret)}"


class NewVisitors:
    """How many fresh visitor tokens one client address was handed in the last hour, bounded
    (PLAYGROUND_NEW_VISITORS_PER_HOUR, default 30: a classroom behind one address still gets one each): a token is
    a visitor with a quota of their own, so handing them out without bound would bound nothing."""

    def __init__(self, per_hour: int | None = None, window_s: float = 3600, addresses: int = 100_000):
        self.per_hour = per_hour or env_int("PLAYGROUND_NEW_VISITORS_PER_HOUR", 30)
        self.window_s, self.addresses = window_s, addresses
        self.issued: dict[str, deque[float]] = {}  # address -> when its tokens were issued, oldest first
        self.lock = threading.Lock()

    def allow(self, address: str, now: float | None = None) -> bool:
        """Count one more token for this address, or False when it had its hour's share."""
        now = time.monotonic() if now is None else now
        with self.lock:
            times = self.issued.pop(address, deque())  # re-inserted last: the dict's order is least recent first
            while times and now - times[0] > self.window_s:
                times.popleft()
            allowed = len(times) < self.per_hour
            if allowed:
                times.append(now)
            self.issued[address] = times
            while len(self.issued) > self.addresses:
                del self.issued[next(iter(self.issued))]
            return allowed


def verify_token(token, secret: bytes) -> str | None:
    """The visitor id of a token issue_token made with this secret; None for anything else."""
    match = TOKEN_PATTERN.match(token) if isinstance(token, str) else None
    if match is None or not hmac.compare_digest(match.group(2), _signature(match.group(1), secret)):
        return None
    return match.group(1)


def address_key(address: str, secret: bytes) -> str:
    """What the registry keeps of a client address (Visitor.address): a keyed hash, so that the models folder holds
    no visitor's IP address while one address's visitors still count together."""
    if not address:
        return ""
    return "addr:" + hmac.new(secret, b"address:" + address.encode(), hashlib.sha256).hexdigest()[:20]


def server_secret(folder: Path) -> bytes:
    """The key that signs visitor tokens: kept beside the models (mode 600, never sent to a browser) so that it, and
    with it every browser's identity, outlives a restart when the models do. Made where none is by a hard link, so
    that two processes starting at once share one; on a Storage Bucket mount, which has no hard links (hf-mount
    answers ENOTSUP for a file not yet committed) and whose rename is a copy and a delete, by a plain rename when
    the file is still missing: the last writer wins there, and what is read back is what every process uses."""
    path = folder / ".browser-secret"
    secret = _read_secret(path)
    if len(secret) < 32:
        fresh = secrets.token_urlsafe(32)
        fd, tmp = tempfile.mkstemp(prefix=".secret-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: mode 600 from the start
            f.write(fresh)
        try:
            if secret:  # damaged: replaced
                os.replace(tmp, path)
            else:  # none yet: made only where none is
                os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError:  # no hard links here (a bucket mount)
            if not path.exists():
                os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
        secret = _read_secret(path)
        secret = secret if len(secret) >= 32 else fresh  # not readable back yet: this process's own, for now
    return secret.encode()


def _read_secret(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


PERSONAL = Visitor("personal", admin=True)  # the one person of a personal app


# ----------------------------------------------------------------------------------------------------------
# Where a request comes from


def trust_forwarded() -> bool:
    return env_flag("PLAYGROUND_TRUST_FORWARDED", default=on_space())


INTERNAL_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "::1/128",
    "fc00::/7", "fe80::/10"))  # a platform's own proxies and load balancers, never a visitor on the internet


def internal(address: str) -> bool:
    """An address of a private network (a proxy inside the platform); False for anything that is no IP address."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in INTERNAL_NETWORKS if network.version == ip.version)


def client_address(forwarded_for: str | None, peer: str | None) -> str:
    """The client's address: behind a trusted proxy (a Space's), the rightmost X-Forwarded-For entry that is not an
    internal hop (or the PLAYGROUND_PROXY_HOPS-th from the right), which a client cannot write; else the socket's
    peer."""
    if forwarded_for and trust_forwarded():
        hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
        count = int(env_number("PLAYGROUND_PROXY_HOPS", 0))
        if 0 < count <= len(hops):
            return network_of(hops[-count])
        if hops:
            return network_of(next((h for h in reversed(hops) if not internal(h)), hops[-1]))
    return network_of(peer or "unknown")


def network_of(address: str) -> str:
    """What one client is bounded by: its IPv4 address, or the /64 network of an IPv6 one (an ISP gives each
    customer a /64 or more, so its single addresses are as many as a client wants)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    return str(ipaddress.ip_network(f"{ip}/64", strict=False)) if ip.version == 6 else address
