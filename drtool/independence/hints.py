"""What to do about a dependency that is inside the failure domain or cannot be judged: one line each.

Chosen by what the dependency is for (the plugin's ``purpose``), so a new plugin's dependencies get a
fitting hint when they use the same words, and the generic one otherwise.
"""

from __future__ import annotations

# (words in the purpose, hint when inside the failure domain), first match wins
BLOCKS_RESTORE_HINT = (
    "restore the webhook's workload first (a step this one needs), or leave the configuration out of this "
    "step and apply it once its Service answers; until then the API server rejects matching writes"
)
INSIDE_HINTS = (
    (
        "image registry",
        "copy the images to a registry outside the cluster (the images plugin) and map it on restore "
        "(kubernetes step option image_registry_map)",
    ),
    ("key slot", "add a key slot held outside the cluster (`drtool key add`: passphrase, key file or shares)"),
    ("vault", "restore Vault from its own backup in an earlier step, or point at a Vault outside the cluster"),
    ("gitops", "mirror the repository outside the cluster (the git plugin) and point the source at the mirror"),
    (
        "dns record",
        "re-point the record at the new cluster's load balancer (dns-certs step option cutover), or reserve "
        "the address",
    ),
    ("upstream dns", "forward to resolvers outside the cluster (the provider's or your own)"),
    ("drtool store", "keep the store outside the cluster: another region, account or site"),
    (
        "carried by restored state",
        "point it at a service outside the cluster, or restore what it names in this plan (a Service the plan "
        "restores is remediated)",
    ),
    ("target", "restore into a new cluster: the target must not be the one that failed"),
)
UNKNOWN_HINT = "check by hand where it lives; if it is meant to stay, waive it in the plan with a reason"
GENERIC_INSIDE = "make it reachable without the failed cluster, or waive it in the plan with a reason"


def fix_hint(kind: str, address: str, purpose: str, status: str, blocks_restore: bool) -> str:
    if status in ("independent", "remediated"):
        return ""
    if status == "waived":
        return "accepted by a waiver: revisit it when the waiver expires"
    if kind == "provisioner":
        if status == "inside":
            return "back its volumes up to the store (or snapshot them off-cluster) before you rely on this restore"
        return "install this provisioner on the target before PVCs are restored, and know where it keeps data"
    if status == "unknown":
        if "." not in address and " " not in address and not address.startswith("/"):
            return "write the fully qualified name, so that it means the same from everywhere; " + UNKNOWN_HINT
        return UNKNOWN_HINT
    if blocks_restore:
        return BLOCKS_RESTORE_HINT
    text = f"{kind} {address} {purpose}".lower().replace("-", " ")  # "dns-record" is a DNS record
    for words, hint in INSIDE_HINTS:
        if words in text:
            return hint
    return GENERIC_INSIDE
