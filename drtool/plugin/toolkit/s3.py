"""S3 keys from an AWS-style credentials file (``~/.aws/credentials`` format), for plugins that read or write
buckets: a file lets one process hold a source's and a target's keys (a mounted Secret, a lab MinIO's
keys), where the AWS_* variables hold one pair. Keys are never settings themselves."""

from __future__ import annotations

import configparser

from drtool.errors import UsageError


def file_credentials(path: str, profile: str | None, setting: str) -> dict[str, str]:
    """The keys of section ``profile`` (default: ``[default]``) of the file ``setting`` names, as boto3 client
    arguments."""
    parser = configparser.ConfigParser()
    try:
        found = parser.read(path)
    except configparser.Error:
        found = []
    if not found:
        raise UsageError(f"S3 credentials file {path} cannot be read", f"check {setting}")
    section = profile or "default"
    if not parser.has_section(section):
        raise UsageError(f"S3 credentials file {path} has no [{section}] section", f"check {setting}")
    keys = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
    return {k: parser.get(section, k) for k in keys if parser.has_option(section, k)}
