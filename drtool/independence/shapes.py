"""Addresses recognised by their shape inside one string, and look-alikes that are not addresses.

The reference finder (finder.py) hands every string of every restored object to ``addresses()``. What counts:

- a URL of any scheme (``https://``, ``postgres://``, ``grpc://``, ``redis://``...): its host and port; for an
  object-store URL (``s3://bucket/key``), whose "host" is a bucket, the endpoint named in its query
  (``?endpoint=http://minio.storage.svc:9000``) instead;
- an scp-like git remote (``git@gitea.gitea.svc:platform/apps.git``);
- ``host:port`` and ``[v6]:port``;
- a bare IPv4 or IPv6 address;
- a bare dotted name, only when ``Names.known`` accepts it (a name of the cluster's DNS domain, a
  ``name.namespace`` Service name, a host of the failure domain): elsewhere ``config.yaml`` or
  ``app.kubernetes.io`` are far more likely than a host;
- a one-label ``name:port`` only when ``Names.service`` says a Service of that name exists in the object's
  namespace (``redis:6379``).

What does not: image tags (``nginx:1.25``), times (``12:30:45``), versions (``1.2.3.4-rc1``, and any dotted
quad in a field named like a version), CIDR blocks, netmasks, names with template markers (``{{ .Values.host }}``,
``$(HOST)``). Userinfo, paths, queries and fragments are never reported: they can hold passwords and tokens,
and the host and port are what the failure domain is judged on.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import re
from collections.abc import Callable, Iterator
from urllib.parse import parse_qsl, urlsplit

from drtool.independence.domain import DEFAULT_PORTS, normal_ip

# object stores name a bucket where other URLs name a host: their address is the endpoint in the query
BUCKET_SCHEMES = frozenset(
    {"s3", "s3a", "s3n", "gs", "gcs", "az", "abfs", "abfss", "wasb", "wasbs", "oss", "cos", "r2", "hf"}
)
LOCAL_SCHEMES = frozenset({"file", "unix", "local", "mem", "memory", "sqlite", "jar"})
ENDPOINT_PARAM = re.compile(r"endpoint", re.IGNORECASE)
VERSION_KEY = re.compile(r"(version|tag|revision|release|checksum|digest|sha)", re.IGNORECASE)
TEMPLATE_MARKS = frozenset("{}$%<>")
LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
NAME = re.compile(rf"^{LABEL}(?:\.{LABEL})*$")

_URL = re.compile(r"(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{0,30})://([^\s\"'<>`\\|^,;]+)")
_SCP = re.compile(rf"(?<![\w.@/-])[\w.-]+@({LABEL}(?:\.{LABEL})*):(?!//|\d+\b)[\w.~/-]+")
_HOST_PORT = re.compile(rf"(?<![\w.:/@\[-])(\[[0-9A-Fa-f:.]+\]|{LABEL}(?:\.{LABEL})*):(\d{{1,5}})(?![\w:]|\.\d)")
_IPV4 = re.compile(r"(?<![\w.:/-])(\d{1,3}(?:\.\d{1,3}){3})(?![\w:-]|\.\d|/\d)")
_IPV6 = re.compile(
    r"(?<![\w:.\[])((?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|\d{1,3}(?:\.\d{1,3}){3})?)(?![\w:.\]])"
)
_NAME = re.compile(rf"(?<![\w.@/:$-])({LABEL}(?:\.{LABEL})+)\.?(?![\w-]|\.\w)")
# one C-speed look before a shape's own pattern, which checks what precedes every position it tries
_PORT_HINT, _QUAD_HINT, _V6_HINT = (
    re.compile(r":\d"),
    re.compile(r"\d\.\d+\.\d+\.\d"),
    re.compile(r"[\da-fA-F]?::?[\da-fA-F]"),
)
_VERSION_WORD = re.compile(r"\b(?:version|release|tag|ver|v)\s*[:=]?\s*$", re.IGNORECASE)  # "version 1.2.3.4"
_TRAILING = ".,;:)]}'\""


@dataclasses.dataclass(frozen=True)
class Found:
    """One address in a string: what is reported (``text``), its host and port, and the shape it had."""

    text: str
    host: str
    port: int | None
    shape: str  # url | s3-endpoint | scp | host:port | ip | name | service


@dataclasses.dataclass(frozen=True)
class Names:
    """What the finder knows that shapes alone cannot tell: which bare names are hosts here."""

    known: Callable[[str], bool] = lambda _name: False  # a bare dotted name worth judging
    service: Callable[[str], bool] = lambda _name: False  # a one-label Service name in the object's namespace
    worth: Callable[[str], bool] = lambda _text: True  # cheap: could ``text`` hold a name ``known`` accepts?


def addresses(
    text: str, names: Names = Names(), key_at: Callable[[int], str] = lambda _at: ""
) -> Iterator[tuple[int, Found]]:
    """Every address in ``text`` with where it starts; ``key_at(position)`` is the key of the field or of the
    embedded document's line there (a dotted quad under a key named like a version is a version)."""
    if ":" not in text and "." not in text:
        return
    spans: list[tuple[int, int]] = []
    if "://" in text:
        for m in _URL.finditer(text):
            spans.append(m.span())
            found = _url(m.group(1).lower(), m.group(2).rstrip(_TRAILING), names)
            if found is not None:
                yield m.start(), found
    if "@" in text:
        for m in _SCP.finditer(text):
            if not _inside(m.start(), spans) and _plain(m.group(1)):
                spans.append(m.span())
                host = m.group(1).lower()
                yield m.start(), Found(f"ssh://{host}", host, DEFAULT_PORTS["ssh"], "scp")
    if _PORT_HINT.search(text):
        for m in _HOST_PORT.finditer(text):
            if not _inside(m.start(), spans) and (found := _host_port(m.group(1), int(m.group(2)), names)):
                spans.append(m.span())
                yield m.start(), found
    for pattern, hint in ((_IPV4, _QUAD_HINT), (_IPV6, _V6_HINT)):
        if not hint.search(text):
            continue
        for m in pattern.finditer(text):
            at = m.start()
            if _inside(at, spans) or _VERSION_WORD.search(text[max(0, at - 24) : at]) or VERSION_KEY.search(key_at(at)):
                continue
            if (ip := _ip(m.group(1))) is not None:
                spans.append(m.span())
                yield at, Found(ip, ip, None, "ip")
    if "." in text and names.worth(text):
        for m in _NAME.finditer(text):
            name = m.group(1).lower()
            if not _inside(m.start(), spans) and not _numeric(name) and names.known(name):
                yield m.start(), Found(name, name, None, "name")


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= position < end for start, end in spans)


def _plain(host: str) -> bool:
    """A host written out, not a template to be filled in (``{{ .Values.host }}``, ``$(HOST)``, ``%s``)."""
    return bool(host) and not TEMPLATE_MARKS.intersection(host) and bool(NAME.match(host) or _ip(host))


def _numeric(name: str) -> bool:
    return name.rsplit(".", 1)[-1].isdigit()  # 1.2.3, 10.0.0.1.5: versions and OIDs, never DNS names


@functools.lru_cache(maxsize=1 << 16)  # a cluster names the same few endpoints in thousands of objects
def _url(scheme: str, rest: str, names: Names) -> Found | None:
    if scheme in LOCAL_SCHEMES:
        return None
    try:
        parts = urlsplit(f"{scheme}://{rest}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if scheme in BUCKET_SCHEMES:
        return _endpoint_param(parts.query, names)
    if not host or not _plain(host):
        return None
    host = _host(host)
    shown = f"[{host}]" if ":" in host else host
    text = f"{scheme}://{shown}" + (f":{port}" if port is not None else "")
    return Found(text, host, port if port is not None else DEFAULT_PORTS.get(scheme), "url")


def _endpoint_param(query: str, names: Names) -> Found | None:
    """``s3://bucket/key?endpoint=http://minio:9000``: the object store the bucket lives in."""
    for name, value in parse_qsl(query):
        if ENDPOINT_PARAM.search(name):
            found = next(addresses(value, names), None)
            if found is not None:
                return dataclasses.replace(found[1], shape="s3-endpoint")
    return None


@functools.lru_cache(maxsize=1 << 16)
def _host_port(host: str, port: int, names: Names) -> Found | None:
    if not 0 < port < 65536:
        return None
    host = host.strip("[]")
    if (ip := _ip(host)) is not None:
        host = ip
    elif not _plain(host) or _numeric(host):
        return None
    elif "." not in host and host.lower() != "localhost":
        if not names.service(host.lower()):
            return None
        return Found(f"{host.lower()}:{port}", host.lower(), port, "service")
    host = _host(host)
    return Found(f"[{host}]:{port}" if ":" in host else f"{host}:{port}", host, port, "host:port")


def _host(host: str) -> str:
    return _ip(host) or host.rstrip(".").lower()


@functools.lru_cache(maxsize=1 << 16)
def _ip(text: str) -> str | None:
    """The normal form of an IP address that names a host; None for non-IPs, netmasks and wildcards."""
    if not (text[:1].isdigit() or ":" in text):
        return None  # a name: not worth an exception
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if ip.is_unspecified or (ip.version == 4 and text.startswith("255.")):
        return None  # 0.0.0.0 / :: listen everywhere; 255.255.255.0 is a netmask
    return normal_ip(text)
