"""The mtmd binding (``pyllama_yield.mtmd``) on a tiny generated Gemma 3 model and projector."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

pytest.importorskip("PIL")
from pyllama_yield.llama import Context, Model  # noqa: E402
from pyllama_yield.mtmd import MediaError, Projector, ProjectorLoadError  # noqa: E402
from pyllama_yield.testing import make_test_image, make_tiny_mmproj, make_tiny_vision_model  # noqa: E402


@pytest.fixture(scope="module")
def vision(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - yields (model, projector)
    model_path, mmproj_path = make_tiny_vision_model(tmp_path_factory.mktemp("mtmd"))
    with Model(model_path) as model, Projector(mmproj_path, model, n_threads=1, media_marker="<img>") as projector:
        yield model, projector


def test_a_projector_reports_what_it_takes(vision) -> None:  # noqa: ANN001
    _, projector = vision
    assert (projector.vision, projector.audio, projector.marker) == (True, False, "<img>")
    assert projector.non_causal  # gemma3 attends to an image's tokens both ways


def test_a_prompt_splits_into_text_and_media_chunks(vision) -> None:  # noqa: ANN001
    _, projector = vision
    png = make_test_image(20, 12, seed=3)
    image = projector.media(png)
    assert image.size == (20, 12) and not image.is_audio
    assert image.id == hashlib.sha256(png).hexdigest()  # prompt caching compares media by content
    chunks = projector.tokenize("Look: <img> now", [image])
    assert [c.kind for c in chunks] == ["text", "image", "text"]
    assert (chunks[1].n_tokens, chunks[1].n_pos, chunks[1].id) == (16, 16, image.id)
    assert chunks[0].tokens and chunks[2].tokens and not chunks[1].tokens


def test_chunks_go_into_a_context_at_their_positions(vision) -> None:  # noqa: ANN001
    model, projector = vision
    chunks = projector.tokenize("A <img> B", [projector.media(make_test_image(seed=4))])
    with Context(model, n_ctx=256, n_batch=64, n_ubatch=64, n_threads=1) as ctx:
        pos = 0
        for c in chunks:
            pos = projector.eval_chunk(ctx, c, pos, 0, logits_last=c is chunks[-1])
        assert pos == sum(c.n_pos for c in chunks)


def test_bad_media_and_markers_are_clear_errors(vision) -> None:  # noqa: ANN001
    _, projector = vision
    with pytest.raises(MediaError, match="empty media file"):
        projector.media(b"")
    with pytest.raises(MediaError, match="Failed to load image or audio file"):
        projector.media(b"GIF89a but not really")
    image = projector.media(make_test_image(seed=5))
    with pytest.raises(MediaError, match="Failed to tokenize prompt.*markers"):
        projector.tokenize("<img> and <img>", [image])


def test_a_projector_for_another_model_size_is_refused(vision, tmp_path: Path) -> None:  # noqa: ANN001
    model, _ = vision
    other = make_tiny_mmproj(tmp_path / "p.gguf", n_embd_text=32)  # the model's n_embd is 64
    with pytest.raises(ProjectorLoadError, match="could not load the projector.*n_embd"):
        Projector(other, model, n_threads=1)
    with pytest.raises(FileNotFoundError):
        Projector(tmp_path / "missing.gguf", model)


def test_slot_token_state_round_trips_media_in_llama_servers_format(vision) -> None:  # noqa: ANN001
    from pyllama_yield.mtmd import Chunk
    from pyllama_yield.server import token_state
    from pyllama_yield.server.media import media_cell

    _, projector = vision
    chunks = projector.tokenize("A <img> B", [projector.media(make_test_image(seed=6))])
    image = chunks[1].placeholder()
    cell = media_cell(image.id or "")
    tokens = [*chunks[0].tokens, *[cell] * image.n_tokens, *chunks[2].tokens]
    packed = token_state.pack(tokens, {cell: image}.__getitem__)
    assert packed[:2] == [-1, 1] and packed[2] == len(tokens)  # marker, version, then the token count
    assert packed[3 : 3 + len(tokens)].count(-1) == image.n_tokens  # llama-server's cells: LLAMA_TOKEN_NULL
    back, media = token_state.unpack(packed, Chunk.load)
    assert back == tokens and [m.id for m in media] == [image.id]
    assert token_state.unpack([5, 6, 7], Chunk.load) == ([5, 6, 7], [])  # a plain list, as older files
    for bad, why in [(packed[:-3], "end of server tokens state|Cannot load media chunk"),
                     ([-1, 2, 0, 0], "version"), ([-1, 1, 1, -1, 0], "Invalid tokens")]:  # fmt: skip
        with pytest.raises(ValueError, match=why):
            token_state.unpack(bad, Chunk.load)
    with pytest.raises(KeyError):
        token_state.pack(tokens, {}.__getitem__)
