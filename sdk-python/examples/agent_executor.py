#!/usr/bin/env python3
"""The agent demo's Python step, ``word-stats``: a ``tether.agent.v1.Executor`` written with the
tether Python SDK (cookie ``TETHER_AGENT_PLUGIN=executor``, app version 1).

Params (or the previous step's outputs): ``text``; optional ``top`` (default 3). Outputs the
``top`` most frequent words, lower-cased, with their counts, and the number of distinct words.
The demo catalog runs it as ``examples/agent/catalog/bin/word-stats`` (a link to this file):

    tether call --catalog examples/agent/catalog word-stats tether.agent.v1.Executor/Execute \\
        '{"step":"s","paramsJson":"{\\"text\\":\\"a b a\\"}"}'
"""

import collections
import json
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

import tether_plugin  # noqa: E402

DEFAULT_TOP = 3


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
    """Serves :func:`word_stats` as an ``Executor``."""

    def Execute(self, request, context):  # noqa: N802 (gRPC method name)
        try:
            outputs, message = word_stats(
                _object(request.params_json, "params_json"),
                _object(request.input_json, "input_json"),
            )
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
    tether_plugin.serve(
        "TETHER_AGENT_PLUGIN",
        "executor",
        [(agent_pb2_grpc.add_ExecutorServicer_to_server, WordStats())],
        app_versions=[1],
    )
