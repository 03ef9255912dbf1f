"""Access levels of crowd records and the filter that enforces them.

Every stored record carries its ``owner`` and an ``access`` level:

- ``public``: anyone, even without an account (for a future anonymous read path);
- ``registered``: any registered user (every authenticated caller);
- ``private``: the owner only;
- ``shared``: the owner, the users in ``shared_users`` and the members of the
  groups in ``shared_groups``.

The visibility filter is built on the server from the *authenticated* user,
never from anything the caller sends.

Example:
    >>> AccessSpec.build("shared", users=["bob"], groups=["hpc"]).to_fields()
    {'access': 'shared', 'shared_users': ['bob'], 'shared_groups': ['hpc']}
    >>> AccessSpec.build("secret")
    Traceback (most recent call last):
    ...
    raytuner.errors.InvalidInputError: access: 'secret' is not an access level (allowed: public, registered, private, shared)
    >>> visibility_filter(None)
    {'access': 'public'}
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from raytuner.crowd.names import check_group, check_username
from raytuner.errors import InvalidInputError

__all__ = ["Access", "ACCESS_LEVELS", "AccessSpec", "User", "visibility_filter"]

Access = Literal["public", "registered", "private", "shared"]
ACCESS_LEVELS: tuple[str, ...] = get_args(Access)


@dataclass(frozen=True)
class User:
    """A registered user: the identity queries and uploads act as."""

    username: str
    email: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class AccessSpec:
    """A validated access level with its shared-with lists (only ``shared`` has them)."""

    access: Access
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    @classmethod
    def build(cls, access: Any, users: Iterable[Any] = (), groups: Iterable[Any] = ()) -> AccessSpec:
        """Validate an access specification, naming the bad field and the allowed values.

        Args:
            access: ``public``, ``registered``, ``private`` or ``shared``.
            users: usernames a ``shared`` record is shared with.
            groups: groups a ``shared`` record is shared with.
        """
        if not isinstance(access, str) or access not in ACCESS_LEVELS:
            raise InvalidInputError("access", f"{access!r} is not an access level", allowed=ACCESS_LEVELS)
        if isinstance(users, (str, bytes)) or isinstance(groups, (str, bytes)):
            field = "shared_with_users" if isinstance(users, (str, bytes)) else "shared_with_groups"
            raise InvalidInputError(field, "must be a list of names, not one string")
        user_list = tuple(sorted({check_username(u, f"shared_with_users[{i}]") for i, u in enumerate(users)}))
        group_list = tuple(sorted({check_group(g, f"shared_with_groups[{i}]") for i, g in enumerate(groups)}))
        if access == "shared" and not (user_list or group_list):
            raise InvalidInputError("shared_with_users", "access 'shared' needs at least one user or group")
        if access != "shared" and (user_list or group_list):
            field = "shared_with_users" if user_list else "shared_with_groups"
            raise InvalidInputError(
                field, f"only access 'shared' takes users or groups, not {access!r}", allowed=["shared"]
            )
        return cls(access, user_list, group_list)  # type: ignore[arg-type]  # access was checked against ACCESS_LEVELS

    def to_fields(self) -> dict[str, Any]:
        """The document fields that store this specification."""
        return {"access": self.access, "shared_users": list(self.users), "shared_groups": list(self.groups)}


def visibility_filter(user: User | None) -> dict[str, Any]:
    """The MongoDB filter selecting the records ``user`` may see (``None``: anonymous, public only).

    Args:
        user: the caller (``None``: anonymous, public records only).

    >>> visibility_filter(User("bob", "bob@example.org", ("hpc",)))["$or"][-1]
    {'access': 'shared', 'shared_groups': {'$in': ['hpc']}}
    """
    if user is None:
        return {"access": "public"}
    clauses: list[dict[str, Any]] = [
        {"access": {"$in": ["public", "registered"]}},
        {"owner": user.username},
        {"access": "shared", "shared_users": user.username},
    ]
    if user.groups:
        clauses.append({"access": "shared", "shared_groups": {"$in": list(user.groups)}})
    return {"$or": clauses}
