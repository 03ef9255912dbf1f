"""Who is signed in to the dashboard: a crowd user behind a random cookie token.

A user signs in with an API key or a one-time token signed with their private
key (``raytuner crowd keys token``). The browser's cookie (signed by Flask)
holds a random token; the server maps it to the id of the key that
authenticated and its user (never the key itself). The key is checked again
every ``RECHECK_SECONDS``, so a revoked key stops working within that time.
"""

from __future__ import annotations

import secrets
import time

from flask import session

from raytuner.crowd import Unauthenticated
from raytuner.crowd.access import User
from raytuner.crowd.keys import parse_key
from raytuner.crowd.signatures import DASHBOARD_SIGN_IN, parse_signed
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
    key_id, user, checked = held
    if time.monotonic() - checked > RECHECK_SECONDS:
        try:
            user = repository().user_of_key(key_id)
        except Unauthenticated:
            config()["signins"].pop(token, None)
            return None
        config()["signins"][token] = (key_id, user, time.monotonic())
    return user


def sign_in(credential: str) -> User:
    """Sign this browser in with an API key or a signed sign-in token: a new random token in its cookie.

    Raises :class:`~raytuner.crowd.Unauthenticated` when the credential is not accepted.

    Args:
        credential: what the user gave (an API key, or a token signed for
            :data:`~raytuner.crowd.signatures.DASHBOARD_SIGN_IN`).
    """
    user = repository().authenticate(credential, DASHBOARD_SIGN_IN)
    signed = parse_signed(credential)
    key_id = signed.key_id if signed is not None else parse_key(credential)[0]  # type: ignore[index]
    token = secrets.token_urlsafe(32)
    config()["signins"][token] = (key_id, user, time.monotonic())
    session["token"] = token
    return user


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
