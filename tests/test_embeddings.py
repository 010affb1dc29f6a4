"""Embeddings: the server context and the routes, on the C-backed tiny model."""

from __future__ import annotations

import base64
import struct

import numpy as np
import openai
import pytest
from http_server import start_server, stop_server

from pyllama_yield.server import Engine

SENTENCES = ["The cat sat on the mat.", "A dog barked at the moon.", "The cat sat on the mat."]


def embed(srv: Engine, inputs, normalize: int = 2) -> list[dict]:
    with srv.submit(srv.tasks.make_embedding_tasks(inputs, normalize)) as reader:
        batch = reader.wait_for_all(lambda: False)
    assert batch.error is None, batch.error and batch.error.payload
    return sorted((r.payload for r in batch.results), key=lambda p: p.index)


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_pooled_embeddings_are_normalized_and_deterministic(tiny_model_path, pooling):
    with Engine.create(tiny_model_path, n_ctx=1024, n_parallel=2, n_threads=1, embedding=True, pooling=pooling) as srv:
        out = embed(srv, SENTENCES)
        vecs = [np.array(o.embedding[0]) for o in out]
        assert all(len(o.embedding) == 1 for o in out) and vecs[0].shape == (srv.core.kv.ctx.n_embd_out,)
        assert all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in vecs)
        assert np.allclose(vecs[0], vecs[2], atol=1e-5) and not np.allclose(vecs[0], vecs[1], atol=1e-3)
        raw = embed(srv, SENTENCES[:1], normalize=-1)[0].embedding[0]
        assert abs(np.linalg.norm(raw) - 1) > 1e-3  # -1: as the model gives it
        alone = embed(srv, SENTENCES[1])[0].embedding[0]
        assert np.allclose(alone, vecs[1], atol=1e-4)  # batched with others or alone: the same


def test_pooling_none_gives_a_vector_per_token_and_completions_are_refused(tiny_model_path):
    with Engine.create(tiny_model_path, n_ctx=1024, n_threads=1, embedding=True, pooling="none") as srv:
        out = embed(srv, "Hello world")[0]
        assert len(out.embedding) == out.tokens_evaluated == len(srv.tasks.tokenize("Hello world", True, True))
        with pytest.raises(NotImplementedError, match="embeddings"):
            srv.tasks.make_tasks({"prompt": "x"})
        with pytest.raises(ValueError, match="too large"):
            srv.tasks.make_embedding_tasks("word " * 600)


def test_embedding_routes_through_the_openai_client(tiny_model_path):
    proc, base = start_server(tiny_model_path, "--threads", "1", "--embedding", "--pooling", "mean", "-c", "2048")
    try:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        r = client.embeddings.create(model="tiny", input=SENTENCES)
        assert [d.index for d in r.data] == [0, 1, 2] and r.usage.prompt_tokens > 6
        assert np.allclose(r.data[0].embedding, r.data[2].embedding, atol=1e-5)
        import httpx

        b64 = httpx.post(f"{base}/v1/embeddings", json={"input": "hi", "encoding_format": "base64"}).json()
        raw = base64.b64decode(b64["data"][0]["embedding"])
        floats = struct.unpack(f"<{len(raw) // 4}f", raw)
        plain = httpx.post(f"{base}/v1/embeddings", json={"input": "hi"}).json()["data"][0]["embedding"]
        assert np.allclose(floats, plain, atol=1e-6)
        native = httpx.post(f"{base}/embedding", json={"content": "hi"}).json()
        assert native[0]["index"] == 0 and np.allclose(native[0]["embedding"][0], plain, atol=1e-6)
        r = httpx.post(f"{base}/completion", json={"prompt": "hi"})
        assert r.status_code == 501 and "--embeddings" in r.json()["error"]["message"]
        assert httpx.post(f"{base}/v1/embeddings", json={"nothing": 1}).status_code == 400
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def test_embeddings_need_the_flag(server):
    r = server.post("/v1/embeddings", json={"input": "hi"})
    assert r.status_code == 501 and "--embeddings" in r.json()["error"]["message"]


def test_rerank_scores_sort_and_shapes(tiny_model_path):
    import httpx

    docs = ["A machine", "Learning is fun", "Paris is a city", "Machine learning is a field"]
    proc, base = start_server(tiny_model_path, "--threads", "1", "--reranking", "-c", "2048")
    try:
        r = httpx.post(f"{base}/rerank", json={"query": "Machine learning is", "documents": docs}).json()
        scores = [x["relevance_score"] for x in r["results"]]
        assert sorted(x["index"] for x in r["results"]) == [0, 1, 2, 3] and scores == sorted(scores, reverse=True)
        assert r["usage"]["prompt_tokens"] > 8
        again = httpx.post(f"{base}/v1/rerank", json={"query": "Machine learning is", "documents": docs}).json()
        assert again["results"] == r["results"]  # deterministic
        top = httpx.post(f"{base}/rerank", json={"query": "q", "documents": docs, "top_n": 2}).json()["results"]
        assert len(top) == 2
        tei = httpx.post(f"{base}/rerank", json={"query": "q", "texts": docs, "return_text": True}).json()
        assert isinstance(tei, list) and {"index", "score", "text"} <= set(tei[0])
        for bad in ({"documents": docs}, {"query": 1, "documents": docs}, {"query": "q", "documents": []}):
            assert httpx.post(f"{base}/rerank", json=bad).status_code == 400
    finally:
        out = stop_server(proc)
    assert proc.returncode == 0, out[-3000:]


def test_rerank_needs_the_flag(server):
    r = server.post("/rerank", json={"query": "q", "documents": ["d"]})
    assert r.status_code == 501 and "--reranking" in r.json()["error"]["message"]
