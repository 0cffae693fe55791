"""Prune's read of a manifest's chunk ids straight from its JSON (drtool/repo/chunk_lists.py).

What matters: the ids cut out are exactly those the model would have parsed, what the pattern does not match
is left for the model (never lost), and reading a large manifest this way does not cost Python objects per
chunk reference.
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc

import numpy as np
import zstandard

from drtool.prune import chunk_array
from drtool.repo.chunk_lists import ChunkListCut
from drtool.repo.manifest import ArtifactEntry, Manifest, PluginOutcome, utc_now

BACKUP = "20261206T120000Z-abcdef"


def manifest(artifacts: list[ArtifactEntry], plugin_meta: dict | None = None) -> Manifest:
    now = utc_now()
    outcome = PluginOutcome(status="ok", started=now, finished=now, meta=plugin_meta or {})
    return Manifest(
        id=BACKUP, store_id="s", started=now, finished=now, status="complete", hostname="h", drtool_version="t",
        plugins={"files": outcome}, artifacts=artifacts,
    )  # fmt: skip


def artifact(name: str, chunks: int, meta: dict | None = None) -> ArtifactEntry:
    refs = [(os.urandom(32).hex(), int(n)) for n in np.random.default_rng(chunks).integers(1, 1 << 40, chunks)]
    size, sha = sum(n for _, n in refs), os.urandom(32).hex()
    return ArtifactEntry(plugin="files", name=name, size=size, sha256=sha, chunks=refs, meta=meta or {})


def ids_of(m: Manifest) -> list[bytes]:
    return [bytes.fromhex(c) for a in m.artifacts for c, _ in a.chunks]


def listed(ids: np.ndarray) -> list[bytes]:
    """The 32-byte ids of an S32 array whole: ``tolist()`` drops an id's trailing NUL bytes."""
    data = np.ascontiguousarray(ids).tobytes()
    return [data[i : i + 32] for i in range(0, len(data), 32)]


def read(m: Manifest, text: bytes | None = None) -> tuple[Manifest, ChunkListCut]:
    cut = ChunkListCut()
    encoded = zstandard.ZstdCompressor().compress(text) if text is not None else m.encode()
    return Manifest.decode(encoded, BACKUP, cut), cut


def test_the_cut_ids_are_the_models_and_the_rest_parses_unchanged() -> None:
    awkward = 'a "quoted" name, with \\ and "sha256":"' + "0" * 64 + '","chunks":[ inside'
    original = manifest(
        [artifact("one", 3), artifact(awkward, 0), artifact("many", 70_000, meta={"chunks": 3}), artifact("x", 1)]
    )
    light, cut = read(original)
    assert listed(cut.ids()) == ids_of(original)
    assert all(a.chunks == [] for a in light.artifacts)
    stripped = [a.model_copy(update={"chunks": []}) for a in original.artifacts]
    assert light == original.model_copy(update={"artifacts": stripped})


def test_a_chunk_list_the_pattern_does_not_match_is_left_to_the_model() -> None:
    """Another writer's layout (here: indented JSON) cuts nothing; the model's ids are then the whole set."""
    original = manifest([artifact("one", 5), artifact("two", 7)])
    light, cut = read(original, json.dumps(original.model_dump(), indent=1).encode())
    assert len(cut.ids()) == 0
    assert listed(chunk_array(light)) == sorted(set(ids_of(original)))


def test_a_list_not_exactly_as_written_is_left_to_the_model() -> None:
    """An id in capitals, or a list with a space in it, is not cut: the model parses it (and prune takes its
    ids from there); a misread id would let prune delete a live chunk."""
    original = manifest([artifact("upper", 3), artifact("spaced", 2), artifact("plain", 4)])
    upper, spaced, plain = original.artifacts
    text = original.model_dump_json().encode()
    text = text.replace(upper.chunks[1][0].encode(), upper.chunks[1][0].upper().encode())
    text = text.replace(f'"{spaced.chunks[1][0]}",'.encode(), f'"{spaced.chunks[1][0]}", '.encode())
    light, cut = read(original, text)
    assert listed(cut.ids()) == [bytes.fromhex(c) for c, _ in plain.chunks]
    assert [len(a.chunks) for a in light.artifacts] == [3, 2, 0]
    assert listed(chunk_array(light)) == sorted(bytes.fromhex(c) for a in (upper, spaced) for c, _ in a.chunks)


def test_an_artifact_shaped_metadata_only_adds_ids() -> None:
    """A plugin's metadata that looks like an artifact is cut too: more ids are kept, none is lost."""
    decoy = artifact("decoy", 4)
    original = manifest([artifact("real", 6)], plugin_meta={"copy": decoy.model_dump()})
    light, cut = read(original)
    assert set(listed(cut.ids())) == set(ids_of(original)) | {bytes.fromhex(c) for c, _ in decoy.chunks}
    assert light.plugins["files"].meta["copy"]["chunks"] == []


def test_reading_a_large_manifest_costs_its_text_not_objects_per_reference() -> None:
    """150,000 references: the model's parse allocates about 320 bytes of Python objects per reference (48 MB,
    and more in pydantic-core's own heap, which tracemalloc does not see); the cut read holds the JSON text
    (about 85 bytes per reference), the ids (32), the positions its checks index by (8) and small steps:
    about 20 MB in all."""
    big = manifest([artifact(f"shard-{i}", 50_000) for i in range(3)])
    text_size, encoded = len(big.model_dump_json()), big.encode()
    del big
    tracemalloc.start()
    try:
        cut = ChunkListCut()
        light = Manifest.decode(encoded, BACKUP, cut)
        cut_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        Manifest.decode(encoded, BACKUP)
        model_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(light.artifacts) == 3 and len(cut.ids()) == 150_000
    bound = text_size + 48 * 150_000 + 2_000_000  # the text, the ids, the pairs' positions, 256 KiB steps
    assert cut_peak < bound, f"the cut read peaked at {cut_peak / 1e6:.1f} MB: the text is {text_size / 1e6:.1f}"
    assert model_peak > 2 * cut_peak, f"the parse: {model_peak / 1e6:.0f} MB, the cut read: {cut_peak / 1e6:.0f}"


def test_crafted_text_cannot_make_the_cut_quadratic() -> None:
    """Whoever holds a key can write a manifest of up to 512 MiB. Many list starts with no end, or one far
    end and a span full of "[", made every start search and check to the end: 1.5 MB took 24 CPU-s, so a
    large one would stop every prune. Each byte is now looked at once: 15 MB in well under a second."""
    start = b'"sha256":"' + b"a" * 64 + b'","chunks":['
    never_ending = (start + b"[" + b"x" * 100) * 80_000
    one_far_end = (start + b"[" * 100) * 80_000 + b"]]"
    for text in (never_ending, one_far_end):
        cut = ChunkListCut()
        began = time.process_time()
        assert cut(text) == text and len(cut.ids()) == 0
        assert time.process_time() - began < 5, f"{len(text) / 1e6:.0f} MB took {time.process_time() - began:.1f} s"
