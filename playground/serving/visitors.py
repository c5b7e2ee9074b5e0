"""Who a visitor is: a signed-in account, a browser's server-signed token or an API session, and the client address
a request comes from (anonymous visitors are bounded per address: playground.serving.quotas).

Plain Python: the web UI (playground.ui.sessions, playground.ui.state) reads the request; this module says what it
means. The registry of who owns which package keeps only keyed hashes of addresses (address_key), never an IP.

    PLAYGROUND_TRUST_FORWARDED        take the client address from X-Forwarded-For (on by default on a Space, where
                                      the proxy sets it); PLAYGROUND_PROXY_HOPS counts proxies from the right instead
                                      of taking the first address
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from playground.settings import env_flag, env_number, env_str, on_space

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
    with it every browser's identity, outlives a restart when the models do."""
    path = folder / ".browser-secret"
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError:
        secret = ""
    if len(secret) < 32:
        fd, tmp = tempfile.mkstemp(prefix=".secret-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: mode 600 from the start
            f.write(secrets.token_urlsafe(32))
        try:
            if secret:  # damaged: replaced
                os.replace(tmp, path)
            else:  # none yet: made only where none is, so two processes starting at once share one
                os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            Path(tmp).unlink(missing_ok=True)
        secret = path.read_text(encoding="utf-8").strip()
    return secret.encode()


PERSONAL = Visitor("personal", admin=True)  # the one person of a personal app


# ----------------------------------------------------------------------------------------------------------
# Where a request comes from


def trust_forwarded() -> bool:
    return env_flag("PLAYGROUND_TRUST_FORWARDED", default=on_space())


def client_address(forwarded_for: str | None, peer: str | None) -> str:
    """The client's address: behind a trusted proxy (a Space's), the one X-Forwarded-For names (the first, or the
    PLAYGROUND_PROXY_HOPS-th from the right when proxies append); else the socket's peer."""
    if forwarded_for and trust_forwarded():
        hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
        count = int(env_number("PLAYGROUND_PROXY_HOPS", 0))
        if hops:
            return hops[-count] if 0 < count <= len(hops) else hops[0]
    return peer or "unknown"
