"""The running dashboard's state, kept on its Flask application: the history source, the crowd, the sign-ins."""

from __future__ import annotations

from typing import Any

from flask import current_app

__all__ = ["config", "repository"]


def config() -> dict[str, Any]:
    """The running application's raytuner state: ``store`` (its history source), ``crowd`` and ``signins``."""
    return current_app.config["RAYTUNER"]


def repository() -> Any:
    """The crowd repository the application shows (``None`` when it shows none)."""
    return config().get("crowd")
