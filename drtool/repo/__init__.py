"""The repository: drtool's store format on top of a backend (chunks, manifests, key slots, config).

Layering (strict, top to bottom): repository -> crypto -> backend. Nothing below knows what is above.
"""

from drtool.repo.repository import Repository

__all__ = ["Repository"]
