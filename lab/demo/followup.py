"""What a team does after a rehearsal that found gaps, done by the demo: the plan's next version.

The first rehearsal's independence report lists what the restored platform still needs from the dead
cluster. Two kinds of answer close a finding:

- **cutover**: a DNS record that points at an old load balancer (the dns-certs cut-over list) is re-pointed
  at the new cluster's by the plan's dns-certs step (``cutover: ${DNS_CUTOVER}``, docs/dns-certs.md). The
  addresses only exist on the day, so they go into a values file, as a team would pass them with
  ``--values``. A lab has no cloud to hand out load balancer addresses, so the demo plays that part and
  takes them from the documentation ranges (198.51.100.0/24, 2001:db8:100::/64, ``recovered.example.net``);
- **waiver**: anything else inside the failure domain (the lab seeds a Velero backup location in the
  cluster's own MinIO) has no step that rewrites it. A person decides whether it may stay; the demo cannot,
  so it writes a waiver that says exactly that, with the analysis's own hint and an expiry, into a copy of
  the plan, where a reviewer would see it.

Unknown findings are left for a person to judge: they do not fail a rehearsal, and the demo does not hide them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import glob
import ipaddress
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from drtool.independence.domain import parse_address
from drtool.independence.remedies import CUTOVER_PURPOSE, cutover_record_name

CUTOVER_VARIABLE = "DNS_CUTOVER"  # what restore-plans/full-cluster-rebuild.yaml's dns-certs step reads
WAIVER_DAYS = 30
NEW_IPV4 = ipaddress.ip_network("198.51.100.0/24")  # TEST-NET-2 (RFC 5737)
NEW_IPV6 = ipaddress.ip_network("2001:db8:100::/64")  # documentation (RFC 3849)
NEW_LB_DOMAIN = "lb.recovered.example.net"


@dataclasses.dataclass
class FollowUp:
    cutover: dict[str, str]  # old load balancer address -> the new one
    waivers: list[dict[str, Any]]  # match, reason, expires: as the plan's `waivers` take them
    plan_path: Path  # the plan the next rehearsal runs (the shipped one, or a copy with the waivers)
    values_path: Path | None  # the values file with CUTOVER_VARIABLE, None without cut-over records

    @property
    def values(self) -> dict[str, str]:
        return {CUTOVER_VARIABLE: cutover_text(self.cutover)} if self.cutover else {}

    def lines(self) -> list[str]:
        """What was changed, for a person reading the demo's output."""
        out = [f"cutover {old} -> {new}" for old, new in self.cutover.items()]
        out += [f"waiver {w['match']} until {w['expires']}" for w in self.waivers]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "cutover": self.cutover,
            "values": self.values,
            "waivers": self.waivers,
            "plan": str(self.plan_path),
            "values_file": str(self.values_path) if self.values_path else None,
        }


def inside(independence: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The needed findings inside the failure domain: what failed the verdict."""
    return [f for f in independence.get("findings") or [] if f["status"] == "inside" and f.get("needed", True)]


def follow_up(independence: Mapping[str, Any], plan_path: Path, out_dir: Path, today: dt.date) -> FollowUp:
    """Close every inside finding of ``independence``: cut-over records by values, the rest by waivers."""
    found = inside(independence)
    records = [f for f in found if f["purpose"].startswith(CUTOVER_PURPOSE)]
    cutover = new_addresses(dict.fromkeys(f["address"] for f in records))
    repointed = {cutover_record_name(f["purpose"]) for f in records}
    rest = [f for f in found if f not in records and not _served_name(f, repointed)]
    waivers = [waiver(f, today) for f in {f["address"]: f for f in rest}.values()]
    out_dir.mkdir(parents=True, exist_ok=True)
    values_path = None
    if cutover:
        values_path = out_dir / "values.yaml"
        header = "# the new load balancers' addresses, mapped from the old ones the first rehearsal found\n"
        values_path.write_text(header + yaml.safe_dump({CUTOVER_VARIABLE: cutover_text(cutover)}, sort_keys=False))
    if waivers:
        plan_path = write_plan_with_waivers(plan_path, waivers, out_dir / plan_path.name)
    return FollowUp(cutover, waivers, plan_path, values_path)


def _served_name(finding: Mapping[str, Any], repointed: set[str]) -> bool:
    """A host the old cluster served whose records the cutover re-points: the analysis remediates it then."""
    address = parse_address(finding["address"])
    host = address.host.rstrip(".").lower() if address is not None else ""
    return (finding.get("match") or {}).get("part") == "ingress_hosts" and host in repointed


def new_addresses(old: Iterable[str]) -> dict[str, str]:
    """A replacement for each old load balancer address, of the same family (an A record needs an IP)."""
    v4, v6 = NEW_IPV4.hosts(), NEW_IPV6.hosts()
    for _ in range(9):  # start at .10: the low addresses of a range are often a gateway's
        next(v4), next(v6)
    out = {}
    for address in old:
        try:
            version = ipaddress.ip_address(address).version
        except ValueError:
            out[address] = f"{address.split('.', 1)[0]}.{NEW_LB_DOMAIN}"
            continue
        out[address] = str(next(v4) if version == 4 else next(v6))
    return out


def cutover_text(cutover: Mapping[str, str]) -> str:
    """``old=new,old2=new2``: the dns-certs ``cutover`` option."""
    return ",".join(f"{old}={new}" for old, new in cutover.items())


def waiver(finding: Mapping[str, Any], today: dt.date) -> dict[str, Any]:
    reason = (
        f"written by drtool demo to finish its loop, not a decision: a person must judge whether "
        f"{finding['address']} ({finding['purpose']}) may stay in the failed cluster; the analysis says: "
        f"{finding['hint']}"
    )
    return {"match": glob.escape(finding["address"]), "reason": reason, "expires": today + dt.timedelta(WAIVER_DAYS)}


def write_plan_with_waivers(plan: Path, waivers: list[dict[str, Any]], out: Path) -> Path:
    """A copy of ``plan`` with ``waivers`` added (its ``${VAR}`` references kept as they are)."""
    data = yaml.safe_load(plan.read_text())
    data["waivers"] = [*(data.get("waivers") or []), *waivers]
    header = f"# {plan.name} with the waivers drtool demo wrote after its first rehearsal (the original: {plan})\n"
    out.write_text(header + yaml.safe_dump(data, sort_keys=False, width=120, allow_unicode=True))
    return out
