"""/infill: llama-server's FIM prompt layout, and a clear error for a model without FIM tokens."""

from __future__ import annotations

from pyllama_yield.server.infill import fim_support_error, infill_prompt

PRE, SUF, MID, REP, SEP, BOS = 1001, 1002, 1003, 1004, 1005, 1


class FimVocab:
    """Characters as tokens; FIM tokens given as ids (or -1 when absent)."""

    def __init__(self, rep: int = REP, sep: int = SEP, add_bos: bool = True) -> None:
        self.ids = {"pre": PRE, "suf": SUF, "mid": MID, "pad": -1, "rep": rep, "sep": sep}
        self.add_bos = add_bos
        self.bos = BOS

    def fim(self, kind: str) -> int:
        return self.ids[kind]

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = False) -> list[int]:
        return [ord(c) for c in text]


def toks(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_repo_level_layout():
    extra = [{"filename": "a.py", "text": "x=1"}]
    out = infill_prompt(FimVocab(), "def f(", "):\n", extra, toks("n"), n_batch=512, n_predict=-1, n_ctx=4096)
    expected_extra = [REP, *toks("myproject\n"), SEP, *toks("a.py\n"), *toks("x=1"), SEP, *toks("filename\n")]
    assert out == [*expected_extra, BOS, PRE, *toks("def f("), *toks("n"), SUF, *toks("):\n"), MID]


def test_limits_keep_the_end_of_the_prefix_and_the_start_of_the_suffix():
    out = infill_prompt(
        FimVocab(rep=-1, sep=-1, add_bos=False),
        "a" * 100 + "END",
        "START" + "b" * 100,
        [],
        [],
        n_batch=16,
        n_predict=-1,
        n_ctx=16,
    )
    pre_at, suf_at = out.index(PRE), out.index(SUF)
    assert out[pre_at + 1 : suf_at] == toks("a" * 9 + "END")  # 3/4 of the batch, the end of the prefix
    assert out[suf_at + 1 : -1] == toks("ST")  # the suffix gets 16/4 - 2 tokens, from its start
    assert out[-1] == MID


def test_snippet_separator_without_fim_sep():
    out = infill_prompt(
        FimVocab(rep=-1, sep=-1, add_bos=False), "p", "s", [{"text": "t"}], [], n_batch=64, n_predict=-1, n_ctx=4096
    )
    assert out[: len(toks("\n\n--- snippet ---\n\nt"))] == toks("\n\n--- snippet ---\n\nt")


def test_missing_fim_tokens_are_named(tiny_model):
    error = fim_support_error(tiny_model.vocab)
    assert error and "prefix token is missing" in error


def test_infill_route_answers_501_without_fim_tokens(server):
    r = server.post("/infill", json={"input_prefix": "def f(", "input_suffix": "):"})
    assert r.status_code == 501 and "Infill is not supported" in r.json()["error"]["message"]
