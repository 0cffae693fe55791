"""Talking to one OpenBao/Vault: settings, the hvac client, and errors turned into one-line drtool errors.

Tokens never travel in argv or settings files: a setting names where the token is (``token_env``, the name
of an environment variable, default VAULT_TOKEN; or ``token_file``), and it goes to the server in the
X-Vault-Token header through hvac only.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import hvac
import requests
from hvac import exceptions as hvac_errors
from hvac.adapters import RawAdapter

from drtool.errors import SourceError, UsageError

TIMEOUT = 60.0


@dataclasses.dataclass(frozen=True)
class Connection:
    address: str
    token_env: str
    token_file: str | None
    cacert: str | None

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any]) -> Connection:
        address = str(m.get("address") or os.environ.get("VAULT_ADDR") or "").rstrip("/")
        if not address:
            raise UsageError("the vault plugin needs `address` (or VAULT_ADDR)", "e.g. address: https://vault:8200")
        if m.get("token"):
            raise UsageError(
                "a Vault token must not be written in settings",
                "name where it is instead: token_env (an environment variable) or token_file",
            )
        return cls(
            address=address,
            token_env=str(m.get("token_env") or "VAULT_TOKEN"),
            token_file=str(m["token_file"]) if m.get("token_file") else None,
            cacert=str(m.get("cacert") or os.environ.get("VAULT_CACERT") or "") or None,
        )

    def token(self) -> str | None:
        if self.token_file:
            try:
                return Path(self.token_file).expanduser().read_text().strip()
            except OSError as exc:
                raise UsageError(f"cannot read token_file {self.token_file}: {exc.strerror}") from None
        return os.environ.get(self.token_env) or None

    def client(self, token: str | None = None) -> hvac.Client:
        """An hvac client; ``token`` overrides the configured one (the escrowed or a throwaway token)."""
        return hvac.Client(
            url=self.address, token=token or self.token(), verify=self.cacert or True, timeout=int(TIMEOUT)
        )


def call(what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run one hvac call; Vault's and the network's failures become a SourceError naming ``what``."""
    try:
        return fn(*args, **kwargs)
    except hvac_errors.Forbidden:
        raise SourceError(f"{what}: permission denied", "the token needs the policy in docs/vault.md") from None
    except hvac_errors.VaultError as exc:
        errors = "; ".join(str(e) for e in (exc.errors or [])) or str(exc) or type(exc).__name__
        raise SourceError(f"{what}: {errors.splitlines()[0]}") from None
    except requests.RequestException as exc:
        raise SourceError(f"{what}: {type(exc).__name__}", "is the Vault address reachable?") from None


def raw(client: hvac.Client) -> RawAdapter:
    """An adapter returning ``requests`` responses as they are (hvac's default one parses JSON bodies, which
    would read a whole streamed snapshot into memory), sharing the client's session, token and TLS settings."""
    adapter = client.adapter
    return RawAdapter(
        base_uri=adapter.base_uri, token=client.token, session=adapter.session, verify=adapter._kwargs.get("verify")
    )


def health(client: hvac.Client) -> dict[str, Any]:
    """``sys/health`` in every state (uninitialized, sealed, standby answer too)."""
    params = {"uninitcode": 200, "sealedcode": 200, "standbycode": 200, "perfstandbycode": 200}
    resp = call(
        f"reading the health of {client.url}",
        raw(client).get,
        "/v1/sys/health",
        params=params,
        raise_exception=False,
    )
    try:
        return dict(resp.json())
    except ValueError:
        raise SourceError(f"{client.url} answered sys/health with HTTP {resp.status_code}", "is it Vault?") from None


def wait_for(client: hvac.Client, ready: Any, what: str, timeout: float = TIMEOUT) -> dict[str, Any]:
    """Poll sys/health until ``ready(status)``; the node restarts its raft layer after a restore."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            status = health(client)
            if ready(status):
                return status
        except SourceError:
            pass
        time.sleep(0.2)
    raise SourceError(f"{client.url} did not become {what} within {timeout:.0f}s", f"last status: {status or 'none'}")


def active(status: Mapping[str, Any]) -> bool:
    return bool(status.get("initialized")) and not status.get("sealed") and not status.get("standby")
