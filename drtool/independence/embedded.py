"""Documents inside strings: a ConfigMap's ``app.yaml``, a Secret's ``.env``, a Corefile, a Helm manifest.

Platforms keep their addresses in files that Kubernetes only sees as one string value (YAML, JSON, INI,
TOML, ``.env``, Corefile, properties). Parsing each format would miss the malformed and the templated ones
and cost a parser per string; every one of these formats is line-oriented where addresses are concerned,
so a multi-line string is searched as it is, and a position in it is turned into its line: comment lines
are blanked first (a commented-out address is not a reference), the evidence names the line, and the key
a line sets (``endpoint`` in ``endpoint: http://...``, ``VAULT_ADDR`` in ``VAULT_ADDR=...``) is at hand
for the shapes that need it. A single-line JSON document needs nothing special: its text is searched whole.
Secret data is base64; it is decoded when it is text.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re

_COMMENT_LINE = re.compile(r"^[ \t]*(?:#|;|//|--).*$", re.MULTILINE)
_KEY = re.compile(r"""[ \t]*(?:-[ \t]+)?(?:export[ \t]+)?["']?([\w.\-/\[\]]+)["']?[ \t]*[:=]""")  # match() at a line
MAX_DECODED = 1 << 20  # a Secret value larger than this is a blob (a keystore, an archive), not a document


class Document:
    """One field's text as searched (comment lines blanked), and the line and key at any position of it."""

    def __init__(self, text: str, key: str) -> None:
        self.key = key
        self.lines = "\n" in text
        if not self.lines:
            self.text = text
            return
        self.text = _COMMENT_LINE.sub(lambda m: " " * len(m.group()), text)  # positions stay where they were

    @functools.cached_property
    def _starts(self) -> list[int]:
        """Where each line starts: only worked out when an address was found in the document."""
        return [0, *(m.end() for m in re.finditer("\n", self.text))]

    def line_at(self, position: int) -> int | None:
        """The 1-based line of ``position`` in a multi-line document; None for a one-line value."""
        return bisect.bisect_right(self._starts, position) if self.lines else None

    def key_at(self, position: int) -> str:
        """The key the line at ``position`` sets, or the field's own key for a one-line value."""
        if not self.lines:
            return self.key
        start = self._starts[bisect.bisect_right(self._starts, position) - 1]
        found = _KEY.match(self.text, start)
        return found.group(1) if found else ""


def decoded_text(value: str) -> str | None:
    """A base64 Secret value as text, or None when it is not base64 of UTF-8 text (keys, keystores)."""
    if len(value) > MAX_DECODED * 4 // 3 + 4:
        return None
    try:
        raw = base64.b64decode(value, validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return None if "\x00" in text else text
