#!/usr/bin/env python3
"""The agent demo's Python step, ``word-stats``: a ``tether.agent.v1.Executor`` written with the
tether Python SDK (cookie ``TETHER_AGENT_PLUGIN=executor``, app version 1).

Params (or the previous step's outputs): ``text``; optional ``top`` (default 3). Outputs the
``top`` most frequent words, lower-cased, with their counts, and the number of distinct words.
While it works it calls back to the host (``tether.agent.v1.Host``, which ``tether run`` serves
to every plugin through ``plugin.GRPCBroker``): a progress report and a log line per step.
Callbacks are best effort: under a host that serves no host services (``tether call``, go-plugin
hosts) the step works without them. The demo catalog runs it as
``examples/agent/catalog/bin/word-stats`` (a link to this file):

    tether call --catalog examples/agent/catalog word-stats tether.agent.v1.Executor/Execute \\
        '{"step":"s","paramsJson":"{\\"text\\":\\"a b a\\"}"}'
"""

import collections
import json
import logging
import os
import re
import sys

# Run from a checkout, the example uses the SDK next to it; copied elsewhere, the installed one.
_HERE = os.path.dirname(os.path.realpath(__file__))
_CHECKOUT_SDK = os.path.join(_HERE, os.pardir, "src")
if os.path.isdir(os.path.join(_CHECKOUT_SDK, "tether_plugin")):
    sys.path.insert(0, _CHECKOUT_SDK)
sys.path.insert(0, _HERE)

import agent_pb2  # noqa: E402 (generated from examples/proto/agent.proto)
import agent_pb2_grpc  # noqa: E402
import grpc  # noqa: E402

import tether_plugin  # noqa: E402

DEFAULT_TOP = 3
#: Seconds to wait for the host's announcement of its host services (a tether host sends it
#: right after connecting, long before the first step).
HOST_SERVICES_WAIT = 1.0

log = logging.getLogger("word-stats")


class HostCalls:
    """Best-effort calls back to the host's ``tether.agent.v1.Host`` for one step."""

    def __init__(self, broker: tether_plugin.GRPCBroker, step: str) -> None:
        self._broker = broker
        self._step = step

    def _stub(self):
        try:
            return agent_pb2_grpc.HostStub(self._broker.host_services(HOST_SERVICES_WAIT))
        except tether_plugin.GrpcBrokerError as e:
            log.debug("no host callbacks: %s", e)
            return None

    def progress(self, done: int, total: int, message: str) -> None:
        stub = self._stub()
        if stub is not None:
            try:
                stub.ReportProgress(
                    agent_pb2.ProgressReport(step=self._step, done=done, total=total, message=message)
                )
            except grpc.RpcError as e:
                log.debug("progress report failed: %s", e.details())

    def log(self, level: int, message: str) -> None:
        stub = self._stub()
        if stub is not None:
            try:
                stub.Log(agent_pb2.LogLine(step=self._step, level=level, message=message))
            except grpc.RpcError as e:
                log.debug("log callback failed: %s", e.details())


def word_stats(params: dict, inputs: dict) -> tuple[dict, str]:
    """The step: ``(outputs, summary)``; ``ValueError`` says what is wrong with the params."""
    text = params.get("text", inputs.get("text"))
    if not isinstance(text, str):
        raise ValueError("needs a string `text` in its params or in the previous step's outputs")
    top = params.get("top", DEFAULT_TOP)
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise ValueError("`top` must be a positive integer")
    counts = collections.Counter(re.findall(r"[\w']+", text.lower()))
    most = [{"word": w, "count": n} for w, n in counts.most_common(top)]
    return {"top": most, "distinct": len(counts)}, f"{len(counts)} distinct words"


def _object(text: str, what: str) -> dict:
    value = json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        raise ValueError(f"{what} must be a JSON object")
    return value


class WordStats(agent_pb2_grpc.ExecutorServicer):
    """Serves :func:`word_stats` as an ``Executor``, reporting to the host through ``broker``."""

    def __init__(self, broker: tether_plugin.GRPCBroker) -> None:
        self._broker = broker

    def Execute(self, request, context):  # noqa: N802 (gRPC method name)
        host = HostCalls(self._broker, request.step)
        try:
            outputs, message = word_stats(
                _object(request.params_json, "params_json"),
                _object(request.input_json, "input_json"),
            )
            words = sum(w["count"] for w in outputs["top"])
            host.progress(1, 1, f"counted; the top {len(outputs['top'])} words cover {words}")
            host.log(agent_pb2.LOG_LEVEL_INFO, f"word-stats: {message}")
        except (ValueError, json.JSONDecodeError) as e:
            return agent_pb2.ExecuteResponse(
                phase=agent_pb2.PHASE_FAILED,
                outputs_json="{}",
                message=f"step `{request.step}`: {e}",
            )
        return agent_pb2.ExecuteResponse(
            phase=agent_pb2.PHASE_SUCCEEDED, outputs_json=json.dumps(outputs), message=message
        )


if __name__ == "__main__":
    plugin = tether_plugin.Plugin("TETHER_AGENT_PLUGIN", "executor", app_versions=[1])
    plugin.add_service(agent_pb2_grpc.add_ExecutorServicer_to_server, WordStats(plugin.broker()))
    plugin.serve()
