"""``serve``'s router mode, llama-server's "Using multiple models": models picked by name from a
folder, a preset file and the download cache, each served by its own ``serve`` process.

- ``sources``: where models come from (``--models-dir``, ``--models-preset``, the HF cache);
- ``instances``: one model's process (start, ready, stop, crash);
- ``registry``: names to models, load on demand, ``--models-max`` with LRU eviction, FIFO waits;
- ``app``: the HTTP routes (``/models``, ``/models/load|unload``, the proxied model routes);
- ``serve``: ``serve`` in router mode.
"""
