"""Who is signed in to the dashboard: a crowd user behind a random cookie token.

A user signs in with an API key or a one-time token signed with their private
key (``raytuner crowd keys token``). The browser's cookie (signed by Flask)
holds a random token; the server maps it to the id of the key that
authenticated and its user (never the key itself). The key is checked again
every ``RECHECK_SECONDS``, so a revoked key stops working within that time.

The pages: ``/signin`` (a form that posts the key in its body, never in a URL; no page,
URL or log line ever shows it) and ``/signout``; every page's header says who is signed in.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from flask import Blueprint, redirect, request, session

from raytuner.crowd import Unauthenticated
from raytuner.crowd.access import User
from raytuner.crowd.keys import parse_key
from raytuner.dashboard.pages import render
from raytuner.dashboard.state import config, repository
from raytuner.signing import DASHBOARD_SIGN_IN, parse_signed

__all__ = ["blueprint", "signed_in_user", "sign_in", "sign_out", "form_token", "RECHECK_SECONDS"]

log = logging.getLogger(__name__)

#: The blueprint of these pages.
blueprint = Blueprint("signin", __name__)

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
            :data:`~raytuner.signing.DASHBOARD_SIGN_IN`).
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


@blueprint.app_context_processor
def signed_in() -> dict[str, Any]:
    """Who every page's header says is signed in (``user``: a user name, or ``None``)."""
    user = signed_in_user()
    return {"user": user and user.username}


@blueprint.route("/signin", methods=["GET", "POST"])
def page() -> Any:
    """The sign-in form; posted, the sign-in (then to the crowd's pages) or why it was refused."""
    if request.method == "GET":
        return render("crowd/signin.html", "Sign in", form=form_token())
    if not form_token(request.form.get("form", "")):
        return render(
            "crowd/signin.html",
            "Sign in",
            error="form: this sign-in form is stale or from another site; sign in from this page",
            status=400,
            form=form_token(),
        )
    try:
        user = sign_in(request.form.get("api_key", ""))
    except Unauthenticated:
        error = "that API key or token was not accepted"
        return render("crowd/signin.html", "Sign in", error=error, status=401, form=form_token())
    log.info("dashboard sign-in of %s", user.username)
    return redirect("/crowd", code=303)


@blueprint.post("/signout")
def signout() -> Any:
    """Forget this browser's sign-in (then to the crowd's pages)."""
    sign_out()
    return redirect("/crowd", code=303)
