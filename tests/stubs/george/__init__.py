"""A stand-in for ``george``, which GPTune's GPTuneBand code imports at module level (``GPTune/model.py``).

GPTune uses george only in its HODLR and george-based models, which ``MB_LCM`` with GPTune-Demo's
``Model_GPy_LCM`` never builds; any use raises, so a test that reached george would fail, not pass quietly.
"""

__all__: list[str] = []  # ``from george import *`` takes nothing


def __getattr__(name: str) -> object:
    raise AttributeError(f"george.{name}: the test's stand-in for george was used; GPTune's path under test needs none")
