"""The old home of :mod:`raytuner.signing`, kept for code that imports ``raytuner.crowd.signatures``.

Import from :mod:`raytuner.signing` instead: it is the same code, and it
loads without the crowd repository's server side (pymongo).

>>> from raytuner.crowd.signatures import Signer
>>> import raytuner.signing
>>> Signer is raytuner.signing.Signer
True
"""

from raytuner.signing import *  # noqa: F403 - every public name, under the old path
from raytuner.signing import __all__ as __all__
