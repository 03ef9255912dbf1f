"""The crowd repository's users and API keys (the ``users`` and ``api_keys`` collections).

:class:`UserAccounts` is the part of
:class:`~raytuner.crowd.repository.CrowdRepository` that registers users,
sets their groups, makes, lists and revokes their API keys, registers their
Ed25519 public keys and authenticates a caller: a user is ``{_id:
username, email, groups, created}`` (a unique index on ``email``), an API key
``{_id: key id, username, salt, hash, created, revoked, revoked_at}`` of
which only ``sha256(salt + secret)`` is kept (:mod:`raytuner.crowd.keys`),
a public key ``{_id: key id, username, kind: "ed25519", public_key, created,
revoked, revoked_at}`` (:mod:`raytuner.signing`). A signed
credential's nonce is kept in ``signatures`` (``{_id: "<key id>:<nonce>",
at}``, expiring after :data:`NONCE_SECONDS`), so it is accepted once.

Example:
    >>> repo = CrowdRepository("mongodb://127.0.0.1:27017")             # doctest: +SKIP
    >>> repo.add_user("alice", "alice@example.org", groups=["hpc"])      # doctest: +SKIP
    User(username='alice', email='alice@example.org', groups=('hpc',))
    >>> key = repo.create_key("alice")                                   # doctest: +SKIP
    >>> repo.authenticate(key).username                                  # doctest: +SKIP
    'alice'
"""

from __future__ import annotations

import datetime as _dt
import logging
import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import pymongo
from pymongo.collection import Collection
from pymongo.errors import DuplicateKeyError

from raytuner.crowd.access import User
from raytuner.crowd.errors import AccessDenied, Unauthenticated
from raytuner.crowd.keys import matches, new_key, parse_key
from raytuner.crowd.names import check_email, check_group, check_username
from raytuner.errors import InvalidInputError
from raytuner.signing import WINDOW_SECONDS, is_signed, key_id_of, parse_signed, public_key_text, verify

__all__ = ["UserAccounts", "KeyInfo", "NONCE_SECONDS"]

log = logging.getLogger(__name__)

_USER_INDEXES = [pymongo.IndexModel([("email", 1)], unique=True, name="email_unique")]
_KEY_INDEXES = [pymongo.IndexModel([("username", 1)], name="username")]

#: Seconds a signed credential's nonce is remembered: past the window either way, so a replay is always seen.
NONCE_SECONDS = 2 * WINDOW_SECONDS + 60
_NONCE_INDEXES = [pymongo.IndexModel([("at", 1)], expireAfterSeconds=NONCE_SECONDS, name="expiry")]


@dataclass(frozen=True)
class KeyInfo:
    """A stored key's public part (never the secret)."""

    key_id: str
    username: str
    created: _dt.datetime
    revoked: bool
    kind: str = "api_key"


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


class UserAccounts:
    """Users and their API keys; the crowd repository's first part (see the module documentation).

    A class that mixes it in sets ``users``, ``api_keys`` and ``signatures``
    (the collections, journaled writes) and ``_errors(action, field)``
    (driver errors as :class:`~raytuner.errors.StoreError`).
    """

    users: Collection[dict[str, Any]]
    api_keys: Collection[dict[str, Any]]
    signatures: Collection[dict[str, Any]]

    def _errors(self, action: str, field: str = "records") -> AbstractContextManager[None]:
        raise NotImplementedError

    def _create_account_indexes(self) -> None:
        """Create the users' and keys' indexes if missing."""
        self.users.create_indexes(_USER_INDEXES)
        self.api_keys.create_indexes(_KEY_INDEXES)
        self.signatures.create_indexes(_NONCE_INDEXES)

    def add_user(self, username: str, email: str, groups: Iterable[str] = ()) -> User:
        """Register a user; a taken username or e-mail address raises :class:`InvalidInputError`.

        Args:
            username: the new user's name.
            email: the user's e-mail address (stored lower-cased).
            groups: the groups the user belongs to.

        >>> repo.add_user("alice", "Alice@Example.org", ["hpc"])       # doctest: +SKIP
        User(username='alice', email='alice@example.org', groups=('hpc',))
        """
        username = check_username(username)
        email = check_email(email)
        if isinstance(groups, str):
            raise InvalidInputError("groups", "must be a list of group names, not one string")
        group_list = tuple(sorted({check_group(g, f"groups[{i}]") for i, g in enumerate(groups)}))
        with self._errors("add a user", "username"):
            try:
                self.users.insert_one({"_id": username, "email": email, "groups": list(group_list), "created": _now()})
            except DuplicateKeyError as exc:
                field = "email" if "email" in (exc.details or {}).get("keyPattern", {}) else "username"
                raise InvalidInputError(
                    field, f"{email if field == 'email' else username!r} is already registered"
                ) from None
        log.info("added crowd user %s (groups %s)", username, list(group_list))
        return User(username, email, group_list)

    def set_groups(self, username: str, groups: Iterable[str]) -> User:
        """Replace a user's groups (takes effect on their next call).

        Args:
            username: a registered user.
            groups: the user's groups from now on.
        """
        username = check_username(username)
        group_list = sorted({check_group(g, f"groups[{i}]") for i, g in enumerate(groups)})
        with self._errors("set groups", "username"):
            doc = self.users.find_one_and_update(
                {"_id": username}, {"$set": {"groups": group_list}}, return_document=pymongo.ReturnDocument.AFTER
            )
        if doc is None:
            raise InvalidInputError("username", f"no user {username!r}")
        return User(doc["_id"], doc["email"], tuple(doc["groups"]))

    def get_user(self, username: str) -> User:
        """The registered user ``username``.

        Args:
            username: a registered user's name.
        """
        username = check_username(username)
        with self._errors("read a user", "username"):
            doc = self.users.find_one({"_id": username})
        if doc is None:
            raise InvalidInputError("username", f"no user {username!r}")
        return User(doc["_id"], doc["email"], tuple(doc.get("groups", ())))

    def create_key(self, username: str) -> str:
        """A new API key for ``username``, returned once: only its salted hash is kept.

        A user may hold several keys. The key is never logged; its id is.

        Args:
            username: a registered user's name.
        """
        username = self.get_user(username).username
        key, key_id, salt, hashed = new_key()
        with self._errors("create an API key", "username"):
            self.api_keys.insert_one(
                {"_id": key_id, "username": username, "salt": salt, "hash": hashed, "created": _now(), "revoked": False}
            )
        log.info("created crowd API key %s for %s", key_id, username)
        return key

    def revoke_key(self, key_id: str, *, api_key: str | None = None) -> None:
        """Revoke the key ``key_id`` (an API key's part after ``rt_``, or a public key's id); it no longer authenticates.

        With ``api_key`` the caller must own the key (else :class:`AccessDenied`);
        without it, this is the administrator's call.

        Args:
            key_id: the key's id.
            api_key: the caller's key, when the caller is not the administrator.
        """
        if not isinstance(key_id, str) or len(key_id) != 16 or any(c not in "0123456789abcdef" for c in key_id):
            raise InvalidInputError("key_id", f"{key_id!r} is not a key id", allowed=["16 lower-case hex digits"])
        caller = self.authenticate(api_key, "revoke_key") if api_key is not None else None
        with self._errors("revoke an API key", "key_id"):
            doc = self.api_keys.find_one({"_id": key_id}, {"username": 1})
            if doc is None:
                raise InvalidInputError("key_id", f"no key with id {key_id!r}")
            if caller is not None and doc["username"] != caller.username:
                raise AccessDenied(f"key {key_id} is not a key of {caller.username}")
            self.api_keys.update_one({"_id": key_id}, {"$set": {"revoked": True, "revoked_at": _now()}})
        log.info("revoked crowd key %s", key_id)

    def list_keys(self, username: str) -> list[KeyInfo]:
        """The public part of ``username``'s keys, oldest first.

        Args:
            username: a user's name.
        """
        username = check_username(username)
        with self._errors("list API keys", "username"):
            docs = list(self.api_keys.find({"username": username}, {"salt": 0, "hash": 0}).sort("created", 1))
        return [
            KeyInfo(d["_id"], d["username"], d["created"], bool(d.get("revoked")), d.get("kind", "api_key"))
            for d in docs
        ]

    def register_public_key(self, username: str, public_key: Any) -> str:
        """Register ``username``'s Ed25519 public key; returns its key id (the private key stays with the user).

        The user then signs each call (:class:`~raytuner.signing.Signer`). Revoke it
        like an API key, by its id.

        Args:
            username: a registered user's name.
            public_key: the public key text (``raytuner crowd keys generate`` prints it) or a PEM block.
        """
        text = public_key_text(public_key)
        username = self.get_user(username).username
        key_id = key_id_of(text)
        with self._errors("register a public key", "public_key"):
            try:
                self.api_keys.insert_one(
                    {
                        "_id": key_id,
                        "username": username,
                        "kind": "ed25519",
                        "public_key": text,
                        "created": _now(),
                        "revoked": False,
                    }
                )
            except DuplicateKeyError:
                raise InvalidInputError("public_key", f"already registered (key id {key_id})") from None
        log.info("registered crowd public key %s for %s", key_id, username)
        return key_id

    def authenticate(self, api_key: Any, method: str | None = None) -> User:
        """The caller's user; :class:`Unauthenticated` when the credential is malformed, unknown, wrong or revoked.

        The credential is an API key, or a credential signed for ``method``
        (:mod:`raytuner.signing`): one signed for another method,
        more than ``WINDOW_SECONDS`` from the server's clock, or seen before
        is refused. A secret is compared in constant time. The credential
        never reaches the message or the log; the caller is not told why it
        failed, the server's log says so with the key id.

        Args:
            api_key: the API key or signed credential a caller presented.
            method: the action called, which a signed credential must be signed for (``None``: none
                is accepted).
        """
        if is_signed(api_key):
            return self._signed_user(api_key, method)
        parsed = parse_key(api_key)
        if parsed is None:
            log.info("rejected a malformed API key")
            raise Unauthenticated()
        key_id, secret = parsed
        with self._errors("check an API key", "api_key"):
            entry = self.api_keys.find_one({"_id": key_id})
            if (
                entry is None
                or entry.get("revoked")
                or entry.get("kind", "api_key") != "api_key"
                or not matches(entry["salt"], entry["hash"], secret)
            ):
                log.info("rejected API key id %s", key_id)
                raise Unauthenticated()
        return self._owner(entry)

    def _signed_user(self, credential: str, method: str | None) -> User:
        signed = parse_signed(credential)
        if signed is None or method is None:
            log.info(
                "rejected a malformed signed credential"
                if signed is None
                else "rejected a signed credential where only API keys are accepted"
            )
            raise Unauthenticated()
        if abs(time.time() - signed.timestamp) > WINDOW_SECONDS:
            log.info("rejected an expired signed credential of key id %s", signed.key_id)
            raise Unauthenticated()
        with self._errors("check a signed credential", "api_key"):
            entry = self.api_keys.find_one({"_id": signed.key_id})
            if (
                entry is None
                or entry.get("revoked")
                or entry.get("kind") != "ed25519"
                or not verify(entry["public_key"], signed, method)
            ):
                log.info("rejected a signed credential of key id %s", signed.key_id)
                raise Unauthenticated()
            try:  # a credential counts once: its nonce is taken, or it is a replay
                self.signatures.insert_one({"_id": f"{signed.key_id}:{signed.nonce}", "at": _now()})
            except DuplicateKeyError:
                log.info("rejected a replayed signed credential of key id %s", signed.key_id)
                raise Unauthenticated() from None
        return self._owner(entry)

    def user_of_key(self, key_id: str) -> User:
        """The user of the unrevoked key ``key_id`` (either kind); :class:`Unauthenticated` otherwise.

        For a caller that authenticated earlier (the dashboard's sign-in) and checks that the
        key still stands, without holding the credential.

        Args:
            key_id: the key's id.
        """
        with self._errors("check a key", "key_id"):
            entry = self.api_keys.find_one({"_id": key_id}) if isinstance(key_id, str) else None
        if entry is None or entry.get("revoked"):
            raise Unauthenticated()
        return self._owner(entry)

    def _owner(self, entry: dict[str, Any]) -> User:
        with self._errors("read a key's user", "api_key"):
            doc = self.users.find_one({"_id": entry["username"]})
        if doc is None:
            log.info("rejected key id %s: its user is gone", entry["_id"])
            raise Unauthenticated()
        return User(doc["_id"], doc["email"], tuple(doc.get("groups", ())))

    def _unknown_users(self, usernames: Sequence[str], field: str) -> list[str]:
        """The names in ``usernames`` that are not registered users, in their order."""
        with self._errors("check the shared-with users", field):
            known = {d["_id"] for d in self.users.find({"_id": {"$in": list(usernames)}}, {"_id": 1})}
        return [u for u in usernames if u not in known]

    def _usernames(self, names: Sequence[str]) -> list[str]:
        """``names`` with e-mail addresses replaced by their users' names, sorted."""
        emails = [n for n in names if "@" in n]
        out = {n for n in names if "@" not in n}
        if emails:
            with self._errors("resolve user e-mail addresses", "configuration_space.user_configurations"):
                out |= {d["_id"] for d in self.users.find({"email": {"$in": emails}}, {"_id": 1})}
        return sorted(out)
