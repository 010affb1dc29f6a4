"""Command line: ``python -m pyllama_yield serve|generate|info|rpc-server``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import signal
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path


def cmd_info(args: argparse.Namespace) -> int:
    import pyllama_yield
    from pyllama_yield.backend_loader import report_lines
    from pyllama_yield.devices import backends, build_info, module_report, system_info

    if args.rpc:  # their devices join the list
        from pyllama_yield import rpc

        try:
            rpc.connect(args.rpc.split(","))
        except (OSError, ValueError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    build, regs, system, modules = build_info(), backends(), system_info(), module_report()
    if args.json:
        info = {
            "version": pyllama_yield.__version__,
            "build": build,
            "backends": [{"name": b.name, "devices": [d.__dict__ for d in b.devices]} for b in regs],
            "backend_modules": [dataclasses.asdict(m) for m in modules],
            "system_info": system,
        }
        print(json.dumps(info, indent=2))
        return 0
    print(f"pyllama-yield {pyllama_yield.__version__}")
    print(
        f"llama.cpp     commit {build['llama_cpp_commit']} (ggml {build['ggml_version']}, {build['build_type']}, "
        f"{build['compiler']})"
    )
    for b in regs:
        print(f"backend       {b.name}")
        for d in b.devices:
            mib = d.memory_total // (1 << 20)
            print(f"  device      {d.name} [{d.type}] {d.description} ({mib} MiB)")
    for _level, line in report_lines(modules):
        print(f"module        {line}")
    print(f"system        {system}")
    return 0


class ProgressBar:
    """Model load progress on stderr; returning False (once ``cancel`` is set) aborts the load."""

    def __init__(self, label: str, cancel=None) -> None:  # noqa: ANN001 - a threading.Event
        self.label = label
        self.cancel = cancel
        self.last = -1

    def __call__(self, progress: float) -> bool:
        pct = int(progress * 100)
        if pct != self.last:
            self.last = pct
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r{self.label} [{bar:<25}] {pct:3d}%")
            if pct >= 100:
                sys.stderr.write("\n")
            sys.stderr.flush()
        return not (self.cancel is not None and self.cancel.is_set())


def _model_path(settings, stack: ExitStack) -> Path:  # noqa: ANN001 - ServerSettings, imported lazily
    if settings.model:
        return Path(settings.model)
    from pyllama_yield.testing import make_tiny_model

    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pyllama-yield-")))
    path = make_tiny_model(tmp / "tiny-default.gguf", n_embd=128, n_layer=2, n_ctx=4096)
    print(
        f"no model given (-m): serving a tiny random-weight model generated at {path} "
        "(real tokenizer, random weights: its output is gibberish)",
        file=sys.stderr,
    )
    return path


def _engine(settings, stack: ExitStack, cancel=None):  # noqa: ANN001, ANN202 - imported lazily
    from pyllama_yield.cli import engine_config_from_settings, settings_from_hub
    from pyllama_yield.server import Engine

    settings = settings_from_hub(settings)
    path = _model_path(settings, stack)

    config = engine_config_from_settings(settings, str(path))
    return Engine(config, progress=ProgressBar(f"loading {path.name}", cancel))


def _server_extra_missing() -> str | None:
    """Why ``serve`` cannot run here (its extra is not installed), or None."""
    try:
        import httpx  # noqa: F401
        import orjson  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return f"serve needs the server extra: pip install 'pyllama-yield[server]' ({exc})"
    return None


def cmd_serve(args: argparse.Namespace) -> int:
    if (missing := _server_extra_missing()) is not None:
        print(missing, file=sys.stderr)
        return 2
    from pyllama_yield.api import build_app, gcp
    from pyllama_yield.api.http_server import uvicorn_server
    from pyllama_yield.cli import server_tools, settings_from_args

    settings = settings_from_args(args)
    if settings.verbose:
        _log_debug()
    port = gcp.port(settings.port)  # Vertex AI tells the port with AIP_HTTP_PORT
    if (routed := _serve_as_router(settings, args, port)) is not None:
        return routed
    try:
        tools = server_tools(settings)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    # Listen first and load the model in the background, as llama-server does: meanwhile every
    # request (/health too) gets 503 "Loading model".
    app = build_app(None, settings, tools=tools)
    server = uvicorn_server(app, settings, port, on_exit=tools.shutdown if tools else None)
    _print_running_backends()
    return _serve_while_loading(settings, app.state.pyllama, server, tools, port)


def _serve_while_loading(settings, state, server, tools, port: int) -> int:  # noqa: ANN001 - imported lazily
    """Run the HTTP ``server`` on this thread while the model loads on another and is attached to
    the app's ``state``; the exit code once it stops (Ctrl-C / SIGTERM, or a failed load)."""
    import threading

    from pyllama_yield.api.cpu_split import split_cpus
    from pyllama_yield.api.http_server import listen_sockets

    shutting_down = threading.Event()
    failure: list[BaseException] = []
    # the model's threads and the event loop on CPUs of their own, where -t/-tb leave one spare
    split = split_cpus(max(settings.threads, settings.threads_batch)) if settings.pin_event_loop else None

    def load(stack: ExitStack) -> None:
        if split is not None:
            split.pin_model()  # before the loop thread (and ggml's threads) start from here
        try:
            engine = _engine(settings, stack, cancel=shutting_down).start()
            if split is not None:
                split.pin_event_loop(engine.queue.worker)
            stack.callback(engine.stop)
            state.attach(engine)
            print(
                f"serving {engine.info['model']} on {', '.join(f'{h}:{port}' for h in settings.hosts)} "
                f"({engine.n_parallel} slot(s), n_ctx {engine.n_ctx_slot} per slot)",
                file=sys.stderr,
            )
        except BaseException as exc:  # reported below; the server must not keep running without a model
            if not shutting_down.is_set():  # else: the load was given up on purpose
                failure.append(exc)
            server.should_exit = True

    with ExitStack() as stack:
        stack.callback(state.close)  # last: joins the HTTP threads that engine.stop woke
        if tools is not None:
            stack.callback(tools.close)  # MCP server processes, the runtime's container
        loader = threading.Thread(target=load, args=(stack,), name="model-loader")
        # uvicorn handles Ctrl-C/SIGTERM while it runs, then re-raises them to the handlers it found:
        # make those no-ops, so the shutdown below runs instead of a KeyboardInterrupt or a kill
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)
        loader.start()
        if split is not None:
            split.pin_event_loop()
        server.run(sockets=listen_sockets(settings.hosts, port))  # returns on Ctrl-C / SIGTERM or a failed load
        shutting_down.set()  # a load still running gives up at its next progress report
        loader.join()
    return _exit_code(failure, state)


def _serve_as_router(settings, args: argparse.Namespace, port: int) -> int | None:  # noqa: ANN001 - ServerSettings
    """Router mode, when the flags ask for it (no model and a models source, or ``-hf`` of a remote
    preset): its exit code once it has served; None to serve one model."""
    from pyllama_yield.hub import HubError
    from pyllama_yield.router.serve import is_router, serve_router, with_remote_preset

    try:
        settings = with_remote_preset(settings)
    except HubError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not is_router(settings):
        return None
    # the flags given on the command line go on to every model
    return serve_router(settings, {k: v for k, v in vars(args).items() if k in type(settings).model_fields}, port)


def _print_running_backends() -> None:
    """serve's first lines: the backend modules that run. Why a GPU module does not was already
    logged as a warning when the package loaded."""
    from pyllama_yield.backend_loader import report_lines
    from pyllama_yield.devices import module_report

    for level, line in report_lines(module_report()):
        if level < logging.WARNING:
            print(line, file=sys.stderr)


def _log_debug() -> None:
    """The server's own debug lines (slots, prompt cache) on stderr, as llama-server's -v."""
    logging.basicConfig(stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    logging.getLogger("pyllama_yield").setLevel(logging.DEBUG)


def _exit_code(failure: list[BaseException], state) -> int:  # noqa: ANN001 - AppState, imported lazily
    """What ``serve`` exits with once the HTTP server has stopped: 1 for a failed load, a failed
    engine or a thread left running, else 0."""
    import threading

    if failure:
        print(f"error: {failure[0]}", file=sys.stderr)
        return 1
    if state.engine is not None and state.engine.failure is not None:
        _exit_failed(state.engine.failure)
    left = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    print(f"shut down: {'threads left: ' + ', '.join(left) if left else 'no thread left'}", file=sys.stderr)
    return 1 if left else 0


def _exit_failed(failure: str) -> None:
    """End a server whose engine failed for good: a thread of it is parked inside llama.cpp, so
    the exit-time cleanup (which would join it) is skipped."""
    print(f"error: {failure}", file=sys.stderr)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(1)


def cmd_generate(args: argparse.Namespace) -> int:
    from pyllama_yield.cli import settings_from_args
    from pyllama_yield.server.errors import EngineFailure
    from pyllama_yield.server.results import CompletionFinal, completion_step, expect

    settings = settings_from_args(args)
    with ExitStack() as stack:
        engine = _engine(settings, stack).start()
        stack.callback(engine.stop)
        n_predict = settings.n_predict if settings.n_predict >= 0 else 64
        reader = engine.submit({"prompt": args.prompt, "n_predict": n_predict, "stream": True})
        final = None
        while reader.has_next():
            res = reader.next()
            if res is None:
                break
            if res.is_error:
                print(f"\nerror: {expect(res, EngineFailure).message}", file=sys.stderr)
                return 1
            step = completion_step(res)
            sys.stdout.write(step.content)
            sys.stdout.flush()
            if isinstance(step, CompletionFinal):
                final = step
        print()
        if final:
            t = final.timings
            print(
                f"[{t.prompt_n} prompt tokens at {t.prompt_per_second:.1f} t/s, "
                f"{t.predicted_n} generated at {t.predicted_per_second:.1f} t/s]",
                file=sys.stderr,
            )
    return 0


def cmd_rpc_server(args: argparse.Namespace) -> int:
    from pyllama_yield import rpc

    if args.host != "127.0.0.1":  # llama.cpp's rpc-server warns the same way
        print(
            f"WARNING: host {args.host!r} is not 127.0.0.1. Never expose the RPC server to an open network:\n"
            "         it has no authentication and no encryption (private networks only).",
            file=sys.stderr,
        )
    try:
        devices = rpc.server_devices([d for d in re.split(r"[,/]+", args.device or "") if d])
        if not devices:
            print("error: no device to lend", file=sys.stderr)
            return 1
        cache = None
        if args.cache:
            cache = rpc.default_cache_dir()
            cache.mkdir(parents=True, exist_ok=True)
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a text stream here
        rpc.serve(args.host, args.port, args.threads, devices, cache)
    except KeyboardInterrupt:
        return 0
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyllama_yield", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="version, llama.cpp build, backends, devices, system info")
    p_info.add_argument("--json", action="store_true", help="machine-readable output")
    p_info.add_argument("--rpc", help="also list the devices of these rpc-servers (host:port,...)")
    p_info.set_defaults(func=cmd_info)

    from pyllama_yield.cli import add_settings_arguments

    # no abbreviated flags: llama-server takes none, and --reasoning must not read as --reasoning-format
    p_serve = sub.add_parser(
        "serve", help="llama-server compatible HTTP server (llama-server's flags)", allow_abbrev=False
    )
    add_settings_arguments(p_serve)
    p_serve.set_defaults(func=cmd_serve)

    p_gen = sub.add_parser("generate", help="complete one prompt, streamed to the terminal", allow_abbrev=False)
    add_settings_arguments(p_gen)
    p_gen.add_argument("-p", "--prompt", default="Once upon a time")
    p_gen.set_defaults(func=cmd_generate)

    p_rpc = sub.add_parser(
        "rpc-server",
        help="lend this machine's devices to other machines' serve --rpc (llama.cpp's rpc-server)",
        allow_abbrev=False,
    )
    p_rpc.add_argument("-H", "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    p_rpc.add_argument("-p", "--port", type=int, default=50052, help="port to listen on (default: %(default)s)")
    p_rpc.add_argument(
        "-t", "--threads", type=_positive, default=max(1, (os.cpu_count() or 2) // 2), help="CPU device threads"
    )
    p_rpc.add_argument("-d", "--device", help="comma-separated devices to lend (default: the GPUs, else the CPU)")
    p_rpc.add_argument("-c", "--cache", action="store_true", help="keep received tensors in a local file cache")
    p_rpc.set_defaults(func=cmd_rpc_server)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
