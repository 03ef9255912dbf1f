"""Who is signed in to the dashboard: a crowd user behind a random cookie token, the key kept in memory only.

The browser's cookie (signed by Flask) holds a random token; the server maps
it to the API key and the user it authenticated. The key is checked again
every ``RECHECK_SECONDS``, so a revoked key stops working within that time.
"""

from __future__ import annotations

import secrets
import time

from flask import session

from raytuner.crowd import Unauthenticated
from raytuner.crowd.access import User
from raytuner.dashboard.state import config, repository

__all__ = ["signed_in_user", "sign_in", "sign_out", "form_token", "RECHECK_SECONDS"]

#: Seconds a sign-in is trusted before its key is checked again (a revoked key stops working within this).
RECHECK_SECONDS = 30.0


def signed_in_user() -> User | None:
    """The crowd user of this browser's sign-in, or ``None`` (signed out, or the key no longer works)."""
    token = session.get("token")
    held = config()["signins"].get(token) if token else None
    if held is None:
        return None
    key, user, checked = held
    if time.monotonic() - checked > RECHECK_SECONDS:
        try:
            user = repository().authenticate(key)
        except Unauthenticated:
            config()["signins"].pop(token, None)
            return None
        config()["signins"][token] = (key, user, time.monotonic())
    return user  # type: ignore[no-any-return]


def sign_in(key: str, user: User) -> None:
    """Remember that this browser is ``user`` (after ``key`` authenticated): a new random token in its cookie.

    Args:
        key: the API key that authenticated (kept in the server's memory only).
        user: the user it belongs to.
    """
    token = secrets.token_urlsafe(32)
    config()["signins"][token] = (key, user, time.monotonic())
    session["token"] = token


def sign_out() -> None:
    """Forget this browser's sign-in."""
    token = session.pop("token", None)
    if token:
        config()["signins"].pop(token, None)


def form_token(given: str | None = None) -> str | bool:
    """The sign-in form's token against cross-site posts: a new one (``given`` ``None``) or whether ``given`` is it.

    Args:
        given: the token a posted form carried (``None``: make the token for a new form).
    """
    if given is None:
        session["form"] = secrets.token_urlsafe(16)
        return str(session["form"])
    return bool(given) and secrets.compare_digest(given, str(session.pop("form", "")))
