"""Settings models several plugins share (drtool.plugin.settings): a Kubernetes connection, the Kubernetes
restore options, and the OCI registry source and target keys. A plugin composes its own models from these
by inheritance, so a key means the same in every plugin that reads it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from drtool.plugin.settings import PluginSettings, StrList, StrMap

Flag = bool | None  # true/false, also "true"/"false" from the command line; unset: the plugin's default


class KubeConnection(PluginSettings):
    """How to reach one API server (drtool.kube.settings.Connection reads these)."""

    kubeconfig: str | None = Field(None, description="kubeconfig file; default $KUBECONFIG, ~/.kube/config")
    context: str | None = Field(None, description="kubeconfig context; default its current one")
    timeout: float = Field(120.0, description="seconds per request")
    connect_timeout: float = Field(10.0, description="seconds to connect")
    compress: Flag = Field(None, description="ask the API server for gzip (worth it over a WAN)")


class KubeRestore(PluginSettings):
    """How a restore writes objects (drtool.kube.settings.RestoreOptions, docs/kubernetes.md)."""

    existing: Literal["update", "replace", "skip", "fail"] = Field("update", description="an object the target has")
    dry_run: Flag = Field(None, description="ask the API server what would happen, change nothing")
    restore_status: Flag = Field(None, description="write custom resources' status (default true)")
    workers: int = Field(16, ge=1, description="objects applied at once")
    crd_timeout: float = Field(60.0, description="seconds to wait for restored CRDs to be Established")
    image_registry_map: StrMap | None = Field(None, description="old-host=new-host: where workloads pull from")
    webhooks: Literal["keep", "restore"] = Field("keep", description="the target's own webhooks and APIServices")
    settle: float = Field(30.0, ge=0, description="verify: seconds drifting objects are re-read")
    transforms: dict[str, Any] | None = Field(None, description="a plan's transforms: (drtool.kube.transforms)")


class KubeRestoreMapped(KubeRestore):
    namespace_map: StrMap | None = Field(None, description="old=new[,old2=new2] or a mapping")
    hold: Flag = Field(None, description="restore Jobs, AI workloads and GitOps apps held (default true)")
    release: Flag = Field(None, description="release what a restore held; restores nothing")
    drift: float | None = Field(
        None, ge=0, description="release: seconds to wait for released GitOps apps to reconcile, then list changes"
    )


class RegistrySource(PluginSettings):
    """Reading an OCI registry (drtool.plugin.toolkit.oci.settings)."""

    plain_http: bool | StrList | None = Field(None, description="true/false, or hosts; default loopback only")
    credentials: dict[str, dict[str, str]] | StrList | None = Field(
        None, description="host -> {username, password_env} or HOST=USER:VAR"
    )


class RegistryTarget(RegistrySource):
    """Writing to an OCI registry: the target and restore options of images and helm."""

    registry: str | None = Field(None, description="target registry host for every image")
    registry_map: StrMap | None = Field(None, description="source-host=target-host[,...]")
    workers: int = Field(4, ge=1, description="blobs copied at once")
    dry_run: Flag = Field(None, description="count what would be pushed, write nothing")
