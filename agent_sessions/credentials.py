"""API key secrets: generation, the stored digest and the display prefix.

A token is ``ask_`` + 43 url-safe characters (32 random bytes).  It has that
much entropy, so a single SHA-256 is a safe digest to store (nothing to brute
force); a slow password hash would only make every request slower.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_TAG = "ask_"
"""Marks a string as an agent_sessions API key (helps secret scanners and humans)."""
PREFIX_LENGTH = 12


def new_token() -> str:
    """A fresh token: the tag plus 32 random bytes, url-safe base64."""
    return TOKEN_TAG + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """Hex SHA-256 of the token (what the database keeps)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_prefix(token: str) -> str:
    """The first characters of a token, stored in clear to tell keys apart."""
    return token[:PREFIX_LENGTH]


def digests_match(token: str, hashed_secret: str) -> bool:
    """Constant-time comparison of a presented token with a stored digest."""
    return hmac.compare_digest(hash_token(token), hashed_secret)
