"""A scripted OpenAI-compatible server for tests and the demo: generic answers from the request alone."""

from __future__ import annotations

import signal
import sys
from typing import Any

from ._drawn import DrawnRelevance
from ._local import LMStudioServer, OllamaServer
from ._server import Behaviour, FakeLLMServer, FaultPlan, LatencyModel, ScriptedModel

__all__ = ["Behaviour", "DrawnRelevance", "FakeLLMServer", "FaultPlan", "LMStudioServer", "LatencyModel", "OllamaServer", "ScriptedModel",
           "serve"]


def serve(port: int = 0, **kwargs: Any) -> None:
    """Serve until SIGINT or SIGTERM; the first line on stdout is PORT=<n>."""
    server = FakeLLMServer(port=port, **kwargs)
    print(f"PORT={server.port}", flush=True)

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
        sys.stdout.flush()
