"""Errors of the crowd repository: who is asking, and whether they may.

Both are :class:`~raytuner.errors.RaytunerError`; neither message ever
contains the API key that was presented.

Example:
    >>> str(Unauthenticated()).startswith("api_key: not a valid, unrevoked API key or signed credential")
    True
"""

from __future__ import annotations

from raytuner.errors import RaytunerError

__all__ = ["Unauthenticated", "AccessDenied"]


class Unauthenticated(RaytunerError):
    """The API key is missing, malformed, unknown, wrong or revoked (the message never says which).

    Args:
        message: the text (never says which check failed).
    """

    grpc_status = "UNAUTHENTICATED"

    def __init__(
        self,
        message: str = "not a valid, unrevoked API key or signed credential (a signed one counts "
        "once, within a minute of the server's clock)",
    ) -> None:
        super().__init__(f"api_key: {message}")


class AccessDenied(RaytunerError):
    """An authenticated user asked for something that is not theirs to do."""

    grpc_status = "PERMISSION_DENIED"
