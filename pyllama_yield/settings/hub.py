"""The flags of ``serve`` that fetch models from the Hugging Face Hub (llama-server's ``-hf``
family) and the one that forbids it."""

from __future__ import annotations

from pydantic_settings import BaseSettings

from .fields import arg

__all__ = ["HubSettings"]


class HubSettings(BaseSettings):
    """A part of ``ServerSettings``: its fields are flags of ``serve``."""

    offline: bool = arg(
        False,
        "--offline",
        env="LLAMA_ARG_OFFLINE",
        help="models from the download cache only, no network (router mode: its models; POST /models downloads)",
    )
    hf_repo: str | None = arg(
        None,
        "-hf",
        "-hfr",
        "--hf-repo",
        env="LLAMA_ARG_HF_REPO",
        help="the model from Hugging Face: user/repo[:quant] (default quant Q4_K_M), with its mmproj",
    )
    hf_file: str | None = arg(
        None, "-hff", "--hf-file", env="LLAMA_ARG_HF_FILE", help="this file of the -hf repo (instead of the quant)"
    )
    hf_repo_draft: str | None = arg(
        None,
        "-hfd",
        "-hfrd",
        "--hf-repo-draft",
        "--spec-draft-hf",
        env="LLAMA_ARG_SPEC_DRAFT_HF_REPO",
        help="the draft model from Hugging Face: user/repo[:quant] (with -md, that file of the repo)",
    )
    hf_token: str | None = arg(None, "-hft", "--hf-token", help="Hugging Face token (default: $HF_TOKEN)")
    model_url: str | None = arg(None, "-mu", "--model-url", supported="not built yet: use -hf, or -m FILE")
