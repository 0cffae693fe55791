"""TSIG keys from BIND key files (``key "name" { algorithm hmac-sha256; secret "..."; };``, as ``tsig-keygen``
writes them), so the secret stays in a file the operator controls: never in argv, config or logs."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import dns.name
import dns.tsig
import dns.tsigkeyring

from drtool.errors import UsageError

_KEY = re.compile(
    r'key\s+"?(?P<name>[^"\s{]+)"?\s*\{(?P<body>[^}]*)\}',
    re.IGNORECASE | re.DOTALL,
)
_ALGORITHM = re.compile(r"algorithm\s+\"?(?P<value>[A-Za-z0-9.-]+)\"?\s*;", re.IGNORECASE)
_SECRET = re.compile(r'secret\s+"(?P<value>[A-Za-z0-9+/=\s]+)"\s*;', re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Tsig:
    """A loaded key: what dnspython's query and update calls take (``kwargs``). ``repr`` hides the secret."""

    name: str
    algorithm: str
    keyring: dict[dns.name.Name, dns.tsig.Key] = dataclasses.field(repr=False)

    def kwargs(self) -> dict[str, Any]:
        return {"keyring": self.keyring, "keyname": self.name, "keyalgorithm": self.algorithm}


def load(path: str | None) -> Tsig | None:
    """The first key of a BIND key file; None when no file is configured."""
    if not path:
        return None
    try:
        text = Path(path).expanduser().read_text()
    except OSError as exc:
        raise UsageError(f"cannot read TSIG key file {path}: {exc.strerror}", "check tsig_key_file") from None
    match = _KEY.search(text)
    algorithm = _ALGORITHM.search(match.group("body")) if match else None
    secret = _SECRET.search(match.group("body")) if match else None
    if not match or not algorithm or not secret:
        raise UsageError(
            f"{path} is not a BIND key file",
            'expected key "NAME" { algorithm hmac-sha256; secret "BASE64"; }; (tsig-keygen writes one)',
        )
    name, alg = match.group("name"), algorithm.group("value").lower()
    try:
        keyring = dns.tsigkeyring.from_text({name: (alg, "".join(secret.group("value").split()))})
    except Exception:  # dnspython raises several types for a bad algorithm or base64
        raise UsageError(f"the TSIG key in {path} is unusable", "check its algorithm and base64 secret") from None
    return Tsig(name, alg, keyring)
