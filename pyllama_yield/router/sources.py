"""Where a router's models come from, as llama-server finds them: a models folder
(``--models-dir``), a preset file (``--models-preset``) and the Hugging Face download cache. Each
model becomes a :class:`ModelEntry`: its id, and the flags its own ``serve`` process gets.

Precedence on one id, as there: a folder's model replaces the cache's, a preset section merges
into an existing model (its flags win), ``[*]`` applies under every model, and the router's own
command line above all (``instances.py`` adds it).
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass, field
from pathlib import Path

from .. import hub
from ..hub import default_cache_dir, file_tag
from ..settings import ServerSettings

__all__ = ["ModelEntry", "PresetError", "collect", "hf_cache_models", "models_dir_models", "preset_models"]


class PresetError(ValueError):
    """A preset file that cannot be read, or a key that names no flag."""


@dataclass
class ModelEntry:
    id: str
    source: str  # "models_dir", "preset" or "cache"
    flags: dict[str, str] = field(default_factory=dict)  # long flag -> value ("" for a bare switch)
    aliases: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    load_on_startup: bool = False
    stop_timeout_s: float = 10.0
    keep_alive_s: float | None = None  # unloaded after this long idle; < 0: pinned (never unloaded or evicted)
    dedup_cache: bool | None = None  # dedup-cache-models: hide the cache models this preset downloads
    hidden: bool = False  # left out of the listing (a preset's dedup), still served by its name

    @property
    def has_projector(self) -> bool:
        return "--mmproj" in self.flags

    def args(self) -> list[str]:
        """The model's flags as a command line."""
        out: list[str] = []
        for flag, value in sorted(self.flags.items()):
            out += [flag] if value == "" else [flag, value]
        return out


def models_dir_models(folder: str) -> dict[str, ModelEntry]:
    """``FILE.gguf`` is the model ``FILE``; a sub-folder is a model named after it, with the
    ``*mmproj*.gguf`` in it as its projector and the first shard of a split model as its file."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"'{folder}' does not exist or is not a directory")
    out: dict[str, ModelEntry] = {}
    for item in sorted(root.iterdir()):
        if item.name.startswith("."):
            continue
        if item.is_file() and item.suffix == ".gguf" and "mmproj" not in item.name:
            name = item.name.replace(".gguf", "")
            out[name] = ModelEntry(name, "models_dir", {"--model": str(item)})
        elif item.is_dir():
            entry = _folder_model(item)
            if entry is not None:
                out[entry.id] = entry
    return out


def _folder_model(folder: Path) -> ModelEntry | None:
    model: Path | None = None
    first_shard: Path | None = None
    mmproj: Path | None = None
    for f in sorted(folder.glob("*.gguf")):
        if "mmproj" in f.name:
            mmproj = f
        elif "-00001-of-" in f.name:
            first_shard = f
        else:
            model = f
    path = first_shard or model
    if path is None:
        return None
    flags = {"--model": str(path)}
    if mmproj is not None:
        flags["--mmproj"] = str(mmproj)
    return ModelEntry(folder.name, "models_dir", flags)


def hf_cache_models(cache_dir: str | None = None) -> dict[str, ModelEntry]:
    """The GGUF models in the Hugging Face cache (``huggingface_hub``'s layout, where llama.cpp and
    other tools download them): ``owner/repo:TAG``, the tag from the file name (``model-Q4_K_M.gguf``
    → ``Q4_K_M``), with the repo's mmproj file as its projector."""
    try:
        from huggingface_hub import scan_cache_dir
        from huggingface_hub.errors import CacheNotFound
    except ImportError:  # the server extra brings it; without it there is no cache source
        return {}
    folder = cache_dir or default_cache_dir()
    try:
        info = scan_cache_dir(folder)
    except CacheNotFound:
        return {}
    out: dict[str, ModelEntry] = {}
    for repo in sorted(info.repos, key=lambda r: r.repo_id):
        if repo.repo_type != "model":
            continue
        for revision in sorted(repo.revisions, key=lambda r: r.last_modified, reverse=True)[:1]:
            files = [f.file_path for f in revision.files if f.file_name.endswith(".gguf")]
            mmproj = next((f for f in files if "mmproj" in f.name), None)
            for f in sorted(files):
                tag = file_tag(f.name)
                if tag is None or "mmproj" in f.name:
                    continue
                name = f"{repo.repo_id}:{tag}"
                flags = {"--model": str(f)}
                if mmproj is not None:
                    flags["--mmproj"] = str(mmproj)
                out.setdefault(name, ModelEntry(name, "cache", flags))
    return out


def preset_models(path: str, known: dict[str, ModelEntry]) -> dict[str, ModelEntry]:
    """The models of a preset file, merged into ``known`` (a section naming a known model adds its
    flags to it): ``[*]`` applies to every model, each other section is a model id."""
    if not Path(path).is_file():
        raise PresetError(f"preset file does not exist: {path}")
    parser = configparser.ConfigParser(
        interpolation=None, inline_comment_prefixes=(";", "#"), comment_prefixes=(";", "#"), default_section="\0"
    )
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys keep their case (LLAMA_ARG_*)
    try:
        parser.read(path)
    except configparser.Error as exc:
        raise PresetError(f"failed to parse server config file: {path} ({exc})") from None
    common = dict(parser["*"]) if parser.has_section("*") else {}
    out = dict(known)
    for section in parser.sections():
        if section == "*":
            continue
        entry = out.get(section) or ModelEntry(section, "preset")
        entry.source = "preset"
        _apply(entry, dict(parser[section]), section)
        out[section] = entry
    for entry in out.values():
        _apply(entry, common, "*", only_missing=True)
    return out


def _apply(entry: ModelEntry, keys: dict[str, str], section: str, only_missing: bool = False) -> None:
    for key, value in keys.items():
        if key == "version":
            continue
        if key == "load-on-startup":
            entry.load_on_startup = _truthy(value)
        elif key == "dedup-cache-models":
            if not (only_missing and entry.dedup_cache is not None):
                entry.dedup_cache = _truthy(value)
        elif key == "stop-timeout":
            entry.stop_timeout_s = float(value) if value.strip().isdigit() else 10.0
        elif key == "keep-alive":  # ours (Ollama's keep_alive): seconds idle before unloading, -1 pinned
            try:
                entry.keep_alive_s = float(value)
            except ValueError:
                raise PresetError(f"keep-alive in preset '{section}': seconds, or -1 to pin, not {value!r}") from None
        elif key == "alias":
            entry.aliases = [a.strip() for a in value.split(",") if a.strip()]
        elif key == "tags":
            entry.tags = [t.strip() for t in value.split(",") if t.strip()]
        else:
            flag, flag_value = _flag(key, value, section)
            if flag and not (only_missing and flag in entry.flags):
                entry.flags[flag] = flag_value


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("on", "enabled", "true", "1")


def _flag(key: str, value: str, section: str) -> tuple[str, str]:
    """A preset key (a long or short flag without its dashes, or an ``LLAMA_ARG_*`` name) as the
    long flag ``serve`` takes, with its value ("" for a switch that is on)."""
    for info in ServerSettings.model_fields.values():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        flags = [str(f) for f in extra.get("flags", [])]  # type: ignore[union-attr]
        negs = [str(f) for f in extra.get("neg", [])]  # type: ignore[union-attr]
        if key == info.validation_alias or f"-{key}" in flags or f"--{key}" in flags:
            if info.annotation is bool:
                if _truthy(value):
                    return flags[-1], ""
                return (negs[-1] if negs else ""), ""  # off, with no --no- form: the default
            return flags[-1], value
        if f"--{key}" in negs or f"-{key}" in negs:
            return negs[-1], ""
    raise PresetError(f"option '{key}' not recognized in preset '{section}'")


def collect(settings: ServerSettings) -> dict[str, ModelEntry]:
    """Every model the router's flags point at, by id."""
    models = hf_cache_models()
    if settings.models_dir:
        models.update(models_dir_models(settings.models_dir))
    if settings.models_preset:
        models = preset_models(settings.models_preset, models)
        _hide_deduplicated(models)
    return dict(sorted(models.items()))


def _hide_deduplicated(models: dict[str, ModelEntry]) -> None:
    """``dedup-cache-models``: a cache model whose file a preset with that key also uses (its
    ``hf-repo``, or its draft's ``spec-draft-hf``) is left out of the listing, as llama-server does;
    it is still served by its name."""
    used: set[tuple[str, str]] = set()  # (repo, file in the repo)
    for entry in models.values():
        if not entry.dedup_cache:
            continue
        for repo_key, file_key in (("hf-repo", "hf-file"), ("spec-draft-hf", "spec-draft-model")):
            repo_flag, file_flag = _flag(repo_key, "", "*")[0], _flag(file_key, "", "*")[0]
            spec = entry.flags.get(repo_flag)
            if not spec:
                continue
            try:  # the cache only: the file the preset's model would load now
                plan = hub.plan(spec, entry.flags.get(file_flag), offline=True)
            except hub.HubError:
                continue  # not downloaded yet: nothing of it in the cache to hide
            used.add((plan.repo, plan.model[0]))
    for entry in models.values():
        repo = entry.id.rpartition(":")[0]
        path = Path(entry.flags.get("--model", "")).as_posix()
        if entry.source == "cache" and any(repo == r and path.endswith("/" + f) for r, f in used):
            entry.hidden = True
