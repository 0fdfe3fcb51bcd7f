"""asyncssh, imported once for all of cwctl, without the noise of its import.

asyncssh names cryptography's DSA types when it is imported, and cryptography 48 and
later warn on each of them that DSA will be removed: ten lines of someone else's
deprecation on the stderr of every cwctl command that reaches a host, where the operator
(and a script reading one line of error) expects cwctl's own words. Only the warnings
raised from asyncssh's own modules while it is imported are silenced; cwctl never offers
a DSA key.
"""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", module=r"asyncssh(\.|$)")
    import asyncssh

__all__ = ["asyncssh"]
