"""A completion's text as its tokens come: bytes of token pieces in, text out, holding back an
incomplete UTF-8 sequence and a suffix that may grow into a stop string."""

from __future__ import annotations

import codecs


class TextStream:
    """Bytes of token pieces in, text out: holds back incomplete UTF-8 and possible stop-string prefixes."""

    def __init__(self, stop: list[str]) -> None:
        self.stop = stop
        # an incomplete UTF-8 sequence at the end waits in the decoder for its next bytes;
        # invalid bytes become U+FFFD (each token's bytes decoded once, not the whole text again)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.text = ""  # all complete text so far
        self.sent = 0  # characters of ``text`` already streamed
        self.stopping_word = ""

    def push(self, piece: bytes) -> None:
        self.text += self._decoder.decode(piece)

    def find_stop(self) -> int:
        """Index where a stop string starts in the unsent text, or -1."""
        if not self.stop:
            return -1
        lookback = max(len(s) for s in self.stop)
        start = max(0, self.sent - lookback)
        hits = [(i, s) for s in self.stop if (i := self.text.find(s, start)) >= 0]
        if not hits:
            return -1
        i, word = min(hits)
        self.stopping_word = word
        self.text = self.text[:i]
        return i

    def take_sendable(self, final: bool) -> str:
        """Text that can be streamed now (everything when ``final``)."""
        end = len(self.text)
        if not final:
            for s in self.stop:  # hold back a suffix that may grow into a stop string
                for k in range(min(len(s) - 1, end - self.sent), 0, -1):
                    if self.text.endswith(s[:k]):
                        end = min(end, len(self.text) - k)
                        break
        out = self.text[self.sent : end]
        self.sent = max(self.sent, end)
        return out
