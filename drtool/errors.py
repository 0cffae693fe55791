"""Typed errors: each expected failure carries its exit code and a hint, so the CLI prints one line.

Exit codes (documented in docs/cli.md):
  1  unexpected internal error (a bug: a traceback is printed)
  2  usage or configuration error
  3  store unreachable or store I/O failure
  4  integrity failure (corrupted, missing or forged data)
  5  wrong key or credentials
  6  not found (backup, artifact, plugin)
  7  source or target system failure (etcd down, restore target unhealthy)
  8  backup finished but partial (a plugin failed)
  9  a backup and a live system differ (`drtool diff`)
  10 a dependency the restore needs lies inside the failure domain, not waived (`drtool verify-independence`)
  11 a plan run stopped at a step that needs approval (`drtool restore --resume RUN --approve STEP` continues)
  130 interrupted (Ctrl-C)
  143 terminated by SIGTERM while a scheduled backup ran (`drtool schedule run-once`)

Command modules raise these; only ``drtool.cli.main`` turns them into exit codes.
"""

from __future__ import annotations


class DrtoolError(Exception):
    """An expected failure with a one-line message and a hint for the operator."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(DrtoolError):
    exit_code = 2


class StoreUnavailable(DrtoolError):
    """The store could not be reached or an I/O operation failed; retrying may help."""

    exit_code = 3


class IntegrityError(DrtoolError):
    exit_code = 4


class Unauthentic(IntegrityError):
    """A sealed object that no key of the store opens: damaged, or put there by someone without the key.

    Apart from the other integrity errors because what follows differs: an object that authenticates but
    does not parse was written by a key holder (a newer drtool, say) and must be respected; one that does
    not authenticate may be skipped by every reader that does not need it (docs/threat-model.md)."""


class WrongKey(DrtoolError):
    """Wrong passphrase, key file or recovery shares."""

    exit_code = 5


class NotFound(DrtoolError):
    exit_code = 6


class SourceError(DrtoolError):
    """A system drtool backs up from or restores into failed."""

    exit_code = 7


class PartialBackup(DrtoolError):
    exit_code = 8


class Differs(DrtoolError):
    """A backup and the live system it was compared with differ (the differences were printed)."""

    exit_code = 9


class InsideFailureDomain(DrtoolError):
    """Something a restore needs lies inside the failed cluster's failure domain and no waiver accepts it."""

    exit_code = 10


class ApprovalNeeded(DrtoolError):
    """A plan run stopped before a step marked ``approval: true``: nobody approved it (or it was refused)."""

    exit_code = 11


class AuditFailed(DrtoolError):
    """`drtool audit` graded at least one go-live checklist item ``fail``."""

    exit_code = 12


class Fenced(DrtoolError):
    """The backup set was fenced by a failover (drtool/repo/fences.py): its old primary must not write it."""

    exit_code = 13


class PrimaryReachable(DrtoolError):
    """A failover was asked for while the primary still answers (docs/standby.md): refused unless forced."""

    exit_code = 14


class Terminated(DrtoolError):
    """SIGTERM stopped a run; what it was writing was abandoned, nothing was published."""

    exit_code = 143


INTERRUPTED = 130  # Ctrl-C: not a DrtoolError (KeyboardInterrupt must unwind everything), but its code lives here


class ObjectExists(DrtoolError):
    """A write-once object already exists under that name."""

    exit_code = 3
