"""Models from the Hugging Face Hub, through ``huggingface_hub`` (the field's library: its cache,
its token, its endpoint), picked as llama.cpp's ``-hf user/repo[:quant]`` picks them.

The file: ``-hff FILE`` names it; else the GGUF whose name ends in the quant (``model-Q8_0.gguf``
for ``:Q8_0``, any case); with no quant Q4_K_M, then Q8_0, then the first GGUF. A split model comes
with every shard; the repo's ``mmproj`` file comes along as the projector. Files go to the Hugging
Face cache (``$LLAMA_CACHE`` if set, as llama.cpp's), where the router lists them and a second start
finds them; ``offline`` reads the cache only. ``HF_ENDPOINT`` points at another hub (a mirror, or the
tests' stand-in), ``HF_TOKEN`` or ``token`` authenticates.
"""

from __future__ import annotations

import fnmatch
import importlib
import os
import re
import shutil
import socket
import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DownloadCancelled", "HubError", "HubModel", "HubUnreachable", "Plan", "Progress", "default_cache_dir", "download",
    "download_matching", "file_tag", "plan", "remote_preset", "remove_cached",
]  # fmt: skip

DEFAULT_QUANTS = ("Q4_K_M", "Q8_0")
_SHARD = re.compile(r"^(.+)-(\d{5})-of-(\d{5})$")
_TAG = re.compile(r"[-.]([A-Za-z0-9_]+)$")


class HubError(ValueError):
    """A model that cannot be had: no such repo or file, not in the cache offline, no network."""


class HubUnreachable(HubError):
    """The Hub cannot be reached (no network, no name resolution, a proxy refusing): the model may
    well exist; ``--offline`` serves one already in the cache."""


class DownloadCancelled(HubError):
    """A download stopped on request (its partial file stays in the cache, to be resumed)."""


# a file's progress: its URL, bytes so far, its size (0 when the Hub did not say)
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Plan:
    """What ``-hf`` would fetch: the repo, the model's files (its shards) and the projector."""

    repo: str
    model: list[str]
    mmproj: str | None


@dataclass(frozen=True)
class HubModel:
    path: Path  # the model file (the first shard of a split model)
    mmproj: Path | None  # the repo's projector, if it has one


def file_tag(file_name: str) -> str | None:
    """The quant a GGUF file name ends in (``stories-F32.gguf`` → ``F32``); None for a shard but
    the first of a split model, or a name without one."""
    stem = Path(file_name).name.removesuffix(".gguf")
    shard = _SHARD.match(stem)
    if shard:
        if shard[2] != "00001":
            return None
        stem = shard[1]
    m = _TAG.search(stem)
    return m[1].upper() if m else None


def default_cache_dir() -> str | None:
    """The download cache: ``$LLAMA_CACHE`` (llama.cpp's), else None: huggingface_hub's own."""
    return os.environ.get("LLAMA_CACHE") or None


def _offline(asked: bool) -> bool:
    """``--offline``, or huggingface_hub's own ``HF_HUB_OFFLINE``. Offline, huggingface_hub is put
    in its offline mode for the process: it then asks the Hub nothing, not even its own registry."""
    offline = asked or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "on", "true", "yes")
    if offline:
        from huggingface_hub import constants

        constants.HF_HUB_OFFLINE = True
    return offline


def _endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


def _transport_errors() -> tuple[type[Exception], ...]:
    """The errors of a request that never got an answer, from whichever httpx huggingface_hub
    uses (httpx2 from its 2.x on), and the OS's."""
    found: list[type[Exception]] = [OSError]
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except (ImportError, AttributeError):
            continue
    return tuple(found)


def _unreachable(what: str, cause: object) -> HubUnreachable:
    return HubUnreachable(
        f"{what}: cannot reach the Hugging Face Hub ({_endpoint()}): {cause}; "
        "without a network, --offline serves a model already in the cache"
    )


def _check_resolvable(repo: str) -> None:
    """Fail at once when the Hub's host name does not resolve (no network, no DNS), instead of
    after huggingface_hub's five retries with back-off (~25 s)."""
    host = urllib.parse.urlsplit(_endpoint()).hostname
    if host is None:
        return
    try:
        socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise _unreachable(repo, f"{host}: {exc.strerror or exc}") from None


def _repo_files(repo: str, token: str | None, offline: bool, cache_dir: str | None = None) -> list[str]:
    """The repo's files: from the Hub, or (offline) from the cached snapshot."""
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        if offline:
            folder = Path(snapshot_download(repo, local_files_only=True, cache_dir=cache_dir or default_cache_dir()))
            return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        _check_resolvable(repo)
        return sorted(HfApi(endpoint=os.environ.get("HF_ENDPOINT"), token=token).list_repo_files(repo))
    except LocalEntryNotFoundError:
        raise HubError(f"{repo}: not in the cache, and --offline forbids a download") from None
    except RepositoryNotFoundError:
        raise HubError(f"{repo}: no such model repository (or it needs a token: --hf-token / HF_TOKEN)") from None
    except HfHubHTTPError as exc:
        raise HubError(f"{repo}: cannot list its files: {exc}") from None
    except _transport_errors() as exc:
        raise _unreachable(repo, exc) from None


def _pick(repo: str, files: list[str], quant: str | None, hf_file: str | None) -> list[str]:
    """The model's file, and its other shards for a split model."""
    ggufs = [f for f in files if f.endswith(".gguf") and "mmproj" not in Path(f).name.lower()]
    if hf_file is not None:
        if hf_file not in files:
            raise HubError(f"{repo}: no file {hf_file!r} (its GGUF files: {', '.join(ggufs) or 'none'})")
        chosen = hf_file
    else:
        wanted = [quant.upper()] if quant else list(DEFAULT_QUANTS)
        tagged = {file_tag(f): f for f in ggufs if file_tag(f) is not None}
        found = next((tagged[q] for q in wanted if q in tagged), None)
        if found is None and quant is None and ggufs:
            found = next((f for f in ggufs if not _SHARD.match(Path(f).stem) or "-00001-of-" in f), None)
        if found is None:
            have = ", ".join(sorted(t for t in tagged if t)) or "none"
            raise HubError(f"{repo}: no GGUF file for quant {quant or '/'.join(wanted)} (quants here: {have})")
        chosen = found
    shard = _SHARD.match(Path(chosen).name.removesuffix(".gguf"))
    if shard is None:
        return [chosen]
    prefix = chosen[: chosen.rindex(f"-{shard[2]}-of-")]
    return sorted(f for f in files if f.startswith(prefix) and _SHARD.match(Path(f).stem))


def _fetch(
    repo: str,
    files: list[str],
    token: str | None,
    offline: bool,
    cache_dir: str | None = None,
    local_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> list[Path]:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

    if sys.stderr.isatty():  # a progress bar on a terminal, never in a log
        enable_progress_bars()
    else:
        disable_progress_bars()
    out = []
    for f in files:
        try:
            path = hf_hub_download(
                repo,
                f,
                token=token,
                cache_dir=cache_dir or default_cache_dir(),
                local_dir=None if local_dir is None else os.fspath(local_dir),
                local_files_only=offline,
                endpoint=os.environ.get("HF_ENDPOINT"),
                tqdm_class=_watched(f"{repo}/{f}", progress, cancelled),
            )
        except DownloadCancelled:
            raise
        except LocalEntryNotFoundError:
            raise HubError(f"{repo}/{f}: not in the cache, and --offline forbids a download") from None
        except HfHubHTTPError as exc:
            raise HubError(f"{repo}/{f}: download failed: {exc}") from None
        except _transport_errors() as exc:
            raise _unreachable(f"{repo}/{f}", exc) from None
        out.append(Path(path))
    return out


def _watched(name: str, progress: Progress | None, cancelled: Callable[[], bool] | None) -> type[Any] | None:
    """A progress-bar class for huggingface_hub that also reports each chunk to ``progress`` and
    stops the download (:class:`DownloadCancelled`) once ``cancelled()`` is true."""
    if progress is None and cancelled is None:
        return None
    from huggingface_hub.utils import tqdm

    class Watched(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.done = int(kwargs.get("initial") or 0)  # a hidden bar counts nothing itself

        def update(self, n: float | None = 1) -> bool | None:
            if cancelled is not None and cancelled():
                raise DownloadCancelled(f"{name}: download cancelled")
            self.done += int(n or 0)
            if progress is not None:
                progress(name, self.done, int(self.total or 0))
            return super().update(n)

    return Watched


def plan(spec: str, hf_file: str | None = None, *, token: str | None = None, offline: bool = False) -> Plan:
    """The files ``user/repo[:quant]`` (``-hf``), or ``hf_file`` of that repo (``-hff``), stands
    for, asked of the Hub (or the cache offline) without downloading them: a name that cannot be
    had fails here, with its reason."""
    repo, _, quant = spec.partition(":")
    if repo.count("/") != 1:
        raise HubError(f"-hf {spec}: expected user/repo[:quant]")
    files = _repo_files(repo, token, offline or _offline(False))  # a cache-only look changes nothing global
    projectors = sorted(f for f in files if f.endswith(".gguf") and "mmproj" in Path(f).name.lower())
    return Plan(repo, _pick(repo, files, quant or None, hf_file), projectors[0] if projectors else None)


def download(
    spec: str | Plan,
    hf_file: str | None = None,
    *,
    token: str | None = None,
    offline: bool = False,
    mmproj: bool = True,
    progress: Progress | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> HubModel:
    """``user/repo[:quant]`` (``-hf``), or ``hf_file`` of that repo (``-hff``), downloaded (or
    found in the cache) with its projector unless ``mmproj`` is False. ``progress`` hears of every
    chunk; ``cancelled`` is asked at every chunk and stops the download when true."""
    offline = _offline(offline)
    got = spec if isinstance(spec, Plan) else plan(spec, hf_file, token=token, offline=offline)
    wanted = got.model + ([got.mmproj] if mmproj and got.mmproj else [])
    paths = _fetch(got.repo, wanted, token, offline, progress=progress, cancelled=cancelled)
    return HubModel(paths[0], paths[len(got.model)] if len(paths) > len(got.model) else None)


def remote_preset(spec: str, *, token: str | None = None, offline: bool = False) -> Path | None:
    """llama.cpp's remote preset: a repo holding ``preset.ini`` at its root is a list of models,
    not a model (``serve -hf`` of it runs the router on that file). The file, downloaded (or
    from the cache offline); None for a model repo."""
    repo = spec.partition(":")[0]
    if repo.count("/") != 1:
        return None
    offline = _offline(offline)
    if "preset.ini" not in _repo_files(repo, token, offline):
        return None
    return _fetch(repo, ["preset.ini"], token, offline)[0]


def remove_cached(spec: str, cache_dir: str | None = None) -> bool:
    """``user/repo[:quant]`` out of the download cache, as llama.cpp removes it: with a quant the
    files of that quant only (the repo goes when no model file is left), without one the whole
    repo. False when nothing of it was cached."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    repo, _, quant = spec.partition(":")
    try:
        info = scan_cache_dir(cache_dir or default_cache_dir())
    except CacheNotFound:
        return False
    cached = next((r for r in info.repos if r.repo_id == repo and r.repo_type == "model"), None)
    if cached is None:
        return False
    files = [f for r in cached.revisions for f in r.files]
    gone = [f for f in files if not quant or file_tag(f.file_name) == quant.upper()]
    kept = [f for f in files if f not in gone]
    if not any(f.file_name.endswith(".gguf") and "mmproj" not in f.file_name.lower() for f in kept):
        # the repo's folder, as llama.cpp removes it (huggingface_hub's delete_revisions finds a
        # revision by its hash in any repo, and two repos may share one: a mirror, a stand-in)
        shutil.rmtree(cached.repo_path)
        return bool(gone)
    shared = {f.blob_path for f in kept}  # the cache keeps one blob for equal files
    for f in gone:
        f.file_path.unlink(missing_ok=True)
        if f.blob_path not in shared:
            f.blob_path.unlink(missing_ok=True)
    return bool(gone)


def download_matching(
    repo: str,
    pattern: str,
    extra: list[str] | None = None,
    *,
    token: str | None = None,
    offline: bool = False,
    cache_dir: str | None = None,
    local_dir: str | os.PathLike[str] | None = None,
) -> list[Path]:
    """llama-cpp-python's ``from_pretrained`` rule: ``pattern`` (a glob) must match one file of the
    repo; each of ``extra`` too. Returns their paths, the model's first."""
    offline = _offline(offline)
    files = _repo_files(repo, token, offline, cache_dir)
    chosen = []
    for glob in [pattern, *(extra or [])]:
        matches = [f for f in files if fnmatch.fnmatch(f, glob)]
        if len(matches) != 1:
            listed = ", ".join(f for f in files if f.endswith(".gguf")) or "none"
            what = "no file" if not matches else f"{len(matches)} files ({', '.join(matches)})"
            raise HubError(f"{repo}: {what} match {glob!r}; its GGUF files: {listed}")
        chosen.append(matches[0])
    return _fetch(repo, chosen, token, offline, cache_dir, local_dir)
