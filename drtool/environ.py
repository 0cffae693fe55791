"""Which environment variables hold secrets, and the environment the programs drtool starts get.

drtool reads its own secrets from its environment (``DRTOOL_PASSPHRASE``, the store's ``AWS_*`` keys, Vault
tokens, registry passwords). Nothing it starts needs them: lab servers, etcdutl and etcdctl, git, the
trial OpenBao, ``ip``, Go builds. So every child gets ``child_env``: the parent's environment without any
secret-bearing name, plus what that child needs passed explicitly (MinIO its root keys, MLflow the keys of
its own bucket). A server that inherited ``DRTOOL_PASSPHRASE`` would show it to anyone who can read its
``/proc/<pid>/environ`` or its crash dumps, for as long as it runs (docs/threat-model.md).

Restore plans use the same rule: ``${VAR}`` never expands a secret-bearing name (``drtool.plans.loader``).
The rule is a denylist on names, deliberately broad: a false positive costs a renamed variable, a false
negative a leaked key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# whole families: drtool's own settings, cloud and Vault credentials, MinIO's root keys
SECRET_PREFIXES = ("DRTOOL_", "AWS_", "AZURE_", "GOOGLE_", "GCP_", "VAULT_", "BAO_", "MINIO_")
# where drtool's credentials come from (drtool.config.credentials_from_env); a plan step's process does not
# inherit them
CREDENTIAL_ENV = ("DRTOOL_PASSPHRASE", "DRTOOL_PASSPHRASE_FILE", "DRTOOL_KEYFILE", "DRTOOL_RECOVERY_SHARES_FILE")
# words a secret's name carries (PASS: PASSWORD, PASSPHRASE, PASSWD, ASKPASS; KEY: SSLKEYLOGFILE too)
SECRET_WORDS = ("PASS", "TOKEN", "SECRET", "KEY", "CREDENTIAL", "PRIVATE", "COOKIE")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says (or may say) that it holds a secret."""
    upper = name.upper()
    return upper.startswith(SECRET_PREFIXES) or any(word in upper for word in SECRET_WORDS)


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a program drtool starts: this process's, minus every secret-bearing name, plus
    ``extra`` (what the child needs, given on purpose)."""
    return {k: v for k, v in os.environ.items() if not is_secret_name(k)} | dict(extra or {})
